//! Users with real processes: created, granted and revoked through the
//! command line (the password from stdin, hashed before it is sent), listed
//! alike by every node, kept across a restart of the whole cluster, and
//! deleted only with `--yes`. Every change is in an audit log.

mod common;

use std::time::{Duration, Instant};

use strand_client::cli::Outcome;

/// `strand user list --json` at `node`'s client address, as `name ->
/// permissions`.
async fn users_at(address: &str) -> Vec<(String, Vec<String>)> {
    let run = common::strand(address, &["--json", "user", "list"], b"").await;
    assert_eq!(run.outcome, Outcome::Success, "{}", run.stderr);
    let listed: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|user| {
            let name = user["name"].as_str().expect("name").to_owned();
            let permissions = user["permissions"]
                .as_array()
                .expect("permissions")
                .iter()
                .map(|permission| permission.as_str().expect("text").to_owned())
                .collect();
            (name, permissions)
        })
        .collect()
}

#[test]
fn users_are_replicated_listed_by_every_node_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let runtime = common::runtime();
    let deadline = Instant::now() + Duration::from_secs(120);
    let cluster = common::bootstrap(&nodes).join(",");
    runtime.block_on(async {
        common::connect(common::bootstrap(&nodes), deadline).await;
        let created =
            common::strand(&cluster, &["user", "create", "alice"], b"correct horse\n").await;
        assert_eq!(created.outcome, Outcome::Success, "{}", created.stderr);
        let again = common::strand(&cluster, &["user", "create", "alice"], b"another one\n").await;
        assert_eq!(again.outcome, Outcome::Failed, "exists: {}", again.stderr);
        let short = common::strand(&cluster, &["user", "create", "bob"], b"short\n").await;
        assert_eq!(short.outcome, Outcome::Failed, "{}", short.stderr);
        for permission in ["consume:shop/orders", "produce:shop", "admin"] {
            let granted =
                common::strand(&cluster, &["user", "grant", "alice", permission], b"").await;
            assert_eq!(granted.outcome, Outcome::Success, "{}", granted.stderr);
        }
        let revoked = common::strand(&cluster, &["user", "revoke", "alice", "admin"], b"").await;
        assert_eq!(revoked.outcome, Outcome::Success, "{}", revoked.stderr);
    });
    let expected = vec![(
        "alice".to_owned(),
        vec!["produce:shop".to_owned(), "consume:shop/orders".to_owned()],
    )];
    for node in &nodes {
        common::wait_until("every node lists alice as granted", 30, || {
            runtime.block_on(users_at(&node.client_address)) == expected
        });
    }
    // A clean restart of every node: the catalog is rebuilt from the log.
    for node in &mut nodes {
        node.terminate();
    }
    for node in &mut nodes {
        node.start();
    }
    let cluster = common::bootstrap(&nodes).join(",");
    common::wait_until("alice is still there after the restart", 60, || {
        runtime.block_on(users_at(&cluster)) == expected
    });
    runtime.block_on(async {
        let unconfirmed = common::strand(&cluster, &["user", "delete", "alice"], b"").await;
        assert_eq!(
            unconfirmed.outcome,
            Outcome::Usage,
            "{}",
            unconfirmed.stderr
        );
        let deleted = common::strand(&cluster, &["user", "delete", "alice", "--yes"], b"").await;
        assert_eq!(deleted.outcome, Outcome::Success, "{}", deleted.stderr);
    });
    assert!(runtime.block_on(users_at(&cluster)).is_empty());
    let entries = common::audit_entries(dir.path(), &nodes);
    for action in [
        "CreateUser",
        "GrantPermission",
        "RevokePermission",
        "DeleteUser",
    ] {
        assert!(
            entries
                .iter()
                .any(|entry| entry["action"] == action && entry["outcome"] == "Ok"),
            "{action} in {entries:?}"
        );
    }
    assert!(
        entries
            .iter()
            .all(|entry| !entry.to_string().contains("correct horse")),
        "the password is never written"
    );
}
