//! The configuration's unit tests: a good file, field-named errors,
//! overrides, the loopback rule, a local cluster's file read back, policies.

use super::*;

const GOOD: &str = r#"
    node = 2
    cluster = 9
    data_dir = "/tmp/strand"
    [[peers]]
    id = 2
    replica_address = "127.0.0.1:7102"
    client_address = "127.0.0.1:7202"
    [[peers]]
    id = 1
    replica_address = "127.0.0.1:7101"
    client_address = "127.0.0.1:7201"
"#;

#[test]
fn a_good_file_parses_and_sorts_peers() {
    let config = NodeConfig::parse(Path::new("x.toml"), GOOD, Overrides::default()).expect("valid");
    assert_eq!(config.node, 2);
    assert_eq!(
        config.peers.iter().map(|peer| peer.id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(config.me().replica_address, "127.0.0.1:7102");
    assert_eq!(config.default_durability, Durability::Persisted);
    assert_eq!(config.default_confirm, ConfirmPolicy::MajorityDurable);
    assert!(config.direct_io, "past the page cache unless told");
    let cached = GOOD.replacen("cluster = 9", "cluster = 9\n        direct_io = false", 1);
    let config =
        NodeConfig::parse(Path::new("x.toml"), &cached, Overrides::default()).expect("valid");
    assert!(!config.direct_io);
    assert_eq!(config.cursor_consumers_per_partition_max, 10_000);
    let bounded = GOOD.replacen(
        "cluster = 9",
        "cluster = 9\n        cursor_consumers_per_partition_max = 50",
        1,
    );
    let config =
        NodeConfig::parse(Path::new("x.toml"), &bounded, Overrides::default()).expect("valid");
    assert_eq!(config.cursor_consumers_per_partition_max, 50);
    assert_eq!(
        config.cursor_retention_ms,
        Some(CURSOR_RETENTION_MS_DEFAULT),
        "absent: 7 days"
    );
    for (value, expected) in [(0, None), (60_000, Some(60_000))] {
        let text = GOOD.replacen(
            "cluster = 9",
            &format!("cluster = 9\n        cursor_retention_ms = {value}"),
            1,
        );
        let config =
            NodeConfig::parse(Path::new("x.toml"), &text, Overrides::default()).expect("valid");
        assert_eq!(config.cursor_retention_ms, expected, "{value}");
    }
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (GOOD.replace("node = 2", "node = 3"), "node"),
        (
            GOOD.replace("127.0.0.1:7101", "nowhere"),
            "peers.replica_address",
        ),
        (GOOD.replace("cluster = 9", "cluster = -1"), "cluster"),
        (GOOD.replace("id = 1", "id = 2"), "peers.id"),
        (
            GOOD.replace(
                "cluster = 9",
                "cluster = 9\ncursor_consumers_per_partition_max = 0",
            ),
            "cursor_consumers_per_partition_max",
        ),
    ];
    for (text, field) in cases {
        let error = NodeConfig::parse(Path::new("x.toml"), &text, Overrides::default())
            .expect_err("invalid");
        assert!(
            error.to_string().contains(field),
            "{error} should name {field}"
        );
    }
    let unknown = GOOD.replace("cluster = 9", "cluster = 9\nclusterr = 1");
    let error = NodeConfig::parse(Path::new("x.toml"), &unknown, Overrides::default())
        .expect_err("unknown field");
    assert!(error.to_string().contains("clusterr"), "{error}");
}

#[test]
fn overrides_win() {
    let overrides = Overrides {
        node: Some(1),
        data_dir: Some("/elsewhere".into()),
        metrics_address: None,
    };
    let config = NodeConfig::parse(Path::new("x.toml"), GOOD, overrides).expect("valid");
    assert_eq!(config.node, 1);
    assert_eq!(config.data_dir, PathBuf::from("/elsewhere"));
}

#[test]
fn plaintext_off_loopback_needs_insecure_and_tls_paths_resolve_from_the_file() {
    let public = GOOD.replace("127.0.0.1:7202", "0.0.0.0:7202");
    let error = NodeConfig::parse(Path::new("x.toml"), &public, Overrides::default())
        .expect_err("plaintext on 0.0.0.0");
    assert!(
        error.to_string().contains("peers.client_address")
            && error.to_string().contains("insecure"),
        "{error}"
    );
    let insecure = public.replace("cluster = 9", "cluster = 9\ninsecure = true");
    let config = NodeConfig::parse(Path::new("x.toml"), &insecure, Overrides::default())
        .expect("insecure allows it");
    assert!(config.insecure && config.tls.is_none());
    let tls = format!(
        "{public}\n[tls]\nca = \"certs/ca.pem\"\ncert = \"/abs/node.pem\"\nkey = \"node.key\"\n"
    );
    let error = NodeConfig::parse(
        Path::new("/etc/strand/node.toml"),
        &tls,
        Overrides::default(),
    )
    .expect_err("TLS without sign-in");
    assert!(error.to_string().contains("sign-in"), "{error}");
    let tls = format!("{tls}\n[auth]\nrequired = true\n");
    let config = NodeConfig::parse(
        Path::new("/etc/strand/node.toml"),
        &tls,
        Overrides::default(),
    )
    .expect("TLS and sign-in allow it");
    let files = config.tls.expect("tls");
    assert_eq!(files.ca, PathBuf::from("/etc/strand/certs/ca.pem"));
    assert_eq!(files.cert, PathBuf::from("/abs/node.pem"));
    assert_eq!(files.key, PathBuf::from("/etc/strand/node.key"));
}

#[test]
fn a_local_cluster_file_keeps_quotes_and_backslashes_in_paths() {
    let data_dir = Path::new("/tmp/a \"quoted\" dir\\with\\backslashes");
    let tls = TlsFiles {
        ca: PathBuf::from("/certs/\"ca\".pem"),
        cert: PathBuf::from("/certs/node\\1.pem"),
        key: PathBuf::from("/certs/'node' 1.key"),
    };
    let peers = [PeerConfig {
        id: 1,
        replica_address: "127.0.0.1:7101".into(),
        client_address: "127.0.0.1:7201".into(),
        kafka_address: Some("127.0.0.1:7301".into()),
    }];
    let hash = strand_credentials::hash_password("a password").expect("hashed");
    let text = local_cluster_toml(
        1,
        7,
        data_dir,
        &peers,
        Some("127.0.0.1:9101"),
        Some(&tls),
        Some(&hash),
    )
    .expect("written");
    let config = NodeConfig::parse(Path::new("/etc/node.toml"), &text, Overrides::default())
        .expect("read back");
    assert_eq!(config.data_dir, data_dir, "{text}");
    assert_eq!(config.tls, Some(tls));
    assert_eq!(config.peers, peers);
    assert_eq!((config.node, config.cluster), (1, 7));
    assert!(config.auth.required);
    assert_eq!(config.auth.admin_password_hash, Some(hash));
    assert_eq!(
        config.metrics_address,
        Some("127.0.0.1:9101".parse().expect("address"))
    );
}

#[test]
fn policies_parse() {
    assert_eq!(
        parse_confirm(Some("3")).expect("count"),
        ConfirmPolicy::Count(3)
    );
    assert!(parse_confirm(Some("0")).is_err());
    assert!(parse_durability(Some("fast")).is_err());
}
