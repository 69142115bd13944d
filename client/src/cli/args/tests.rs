//! Tests of the command line's definitions and parsers: what each command
//! takes, what is refused before anything is sent.

use clap::CommandFactory;

use crate::PartitionTarget;

use super::operator::parse_partition_target;
use super::records::{parse_start, parse_time_ns};
use super::topic::DurabilityArg;
use super::*;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("strand").chain(args.iter().copied()))
}

#[test]
fn times_are_rfc3339_or_an_age_before_now() {
    assert_eq!(
        parse_time_ns("2026-12-05T10:00:00Z"),
        Ok(1_796_464_800_000_000_000)
    );
    assert_eq!(
        parse_time_ns("2026-12-05T10:00:00.5Z"),
        Ok(1_796_464_800_500_000_000)
    );
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as u64;
    let five_minutes_ago = parse_time_ns("-5m").expect("an age");
    let age_ns = now_ns - five_minutes_ago;
    assert!(
        (299_000_000_000..301_000_000_000).contains(&age_ns),
        "{age_ns}"
    );
    for bad in ["yesterday", "-5 parsecs", "2026-13-01T00:00:00Z", ""] {
        assert!(parse_time_ns(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_command_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn consumer_group_answers_to_its_alias_group() {
    for name in ["consumer-group", "group"] {
        let cli = parse(&[name, "describe", "g"]).expect("valid");
        let Command::ConsumerGroup(ConsumerGroupCommand::Describe { name }) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(name, "g");
    }
    let help = Cli::command().render_help().to_string();
    assert!(help.contains("consumer-group"), "{help}");
    assert!(help.contains("[alias: group]"), "{help}");
}

#[test]
fn topic_create_takes_every_policy() {
    let cli = parse(&[
        "--cluster",
        "a:1,b:2",
        "topic",
        "create",
        "shop/orders",
        "--partitions",
        "4",
        "--replicas",
        "5",
        "--durability",
        "replicated",
        "--confirm",
        "2",
        "--retention-bytes",
        "1000",
        "--retention-ms",
        "60000",
        "--segment-bytes",
        "1048576",
    ])
    .expect("valid");
    assert_eq!(cli.cluster, vec!["a:1", "b:2"]);
    let Command::Topic(TopicCommand::Create(create)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(create.topic.to_string(), "shop/orders");
    assert_eq!(create.partitions, 4);
    assert_eq!(create.replicas, 5);
    assert_eq!(create.durability, Some(DurabilityArg::Replicated));
    assert_eq!(create.confirm, Some(ConfirmPolicy::Count(2)));
    assert_eq!((create.retention_bytes, create.retention_ms), (1000, 60000));
    assert_eq!(create.segment_bytes, Some(1 << 20));
}

#[test]
fn policies_left_out_mean_the_cluster_defaults() {
    let cli = parse(&["topic", "create", "s/t"]).expect("valid");
    let Command::Topic(TopicCommand::Create(create)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!((create.durability, create.confirm), (None, None));
    assert_eq!((create.partitions, create.replicas), (1, 3));
    assert_eq!(create.segment_bytes, None, "the node's default");
}

#[test]
fn bad_values_are_refused_before_anything_is_sent() {
    for args in [
        &["topic", "create", "no-slash"][..],
        &["topic", "create", "s/bad name"],
        &["topic", "create", "s/t", "--replicas", "16"],
        &["topic", "create", "s/t", "--partitions", "0"],
        &["topic", "create", "s/t", "--confirm", "0"],
        &["topic", "create", "s/t", "--durability", "fsync"],
        &["topic", "create", "s/t", "--segment-bytes", "65535"],
        &["topic", "create", "s/t", "--segment-bytes", "1073741825"],
        &["topic", "create", "s/t", "--segment-bytes", "1MiB"],
        &["consume", "s/t", "--from", "3", "--cursor", "c"],
        &["produce", "s/t", "--size", "10"],
        &["produce", "s/t", "--count", "1", "--size", "999999999"],
        &["--timeout-ms", "0", "status"],
        &["accept-loss", "s/t/x"],
        &["partition", "reassign", "s/t/0"],
        &["partition", "reassign", "s/t/0", "--replicas", "1,x"],
        &["partition", "reassign", "s/t", "--replicas", "1,2"],
        &[
            "partition",
            "reassign",
            "7",
            "--replicas",
            "1",
            "--confirm",
            "0",
        ],
        &["partition", "drop-replica", "7"],
        &["partition", "drop-replica", "7", "--node", "-1"],
        &["topic", "alter", "s/t"],
        &["topic", "alter", "s/t", "--retention-bytes", "1MiB"],
        &["topic", "alter", "s/t", "--retention-ms", "-1"],
        &["topic", "alter", "s/t", "--confirm", "0"],
        &["topic", "add-partitions", "s/t"],
        &["topic", "add-partitions", "s/t", "--count", "1"],
        &["topic", "add-partitions", "s/t", "--count", "4097"],
        &["topic", "delete", "no-slash", "--yes"],
        &["stream", "delete", "bad name", "--yes"],
        &["stream", "delete"],
    ] {
        assert!(parse(args).is_err(), "{args:?} parsed");
    }
}

#[test]
fn the_default_cluster_is_the_dev_clusters_first_node() {
    // Read from the definition, so a STRAND_CLUSTER set around the
    // test run cannot change the answer.
    let command = Cli::command();
    let cluster = command
        .get_arguments()
        .find(|arg| arg.get_id() == "cluster")
        .expect("a --cluster flag");
    assert_eq!(cluster.get_default_values(), [DEV_CLUSTER_ADDRESS]);
    assert_eq!(
        cluster.get_env().and_then(|env| env.to_str()),
        Some("STRAND_CLUSTER")
    );
}

#[test]
fn small_parsers() {
    assert_eq!(
        parse_confirm("majority"),
        Ok(ConfirmPolicy::MajorityDurable)
    );
    assert_eq!(parse_confirm("local"), Ok(ConfirmPolicy::LocalDurable));
    assert_eq!(parse_confirm("3"), Ok(ConfirmPolicy::Count(3)));
    assert!(parse_confirm("most").is_err());
    assert_eq!(parse_start("earliest"), Ok(Start::Earliest));
    assert_eq!(parse_start("latest"), Ok(Start::Latest));
    assert_eq!(parse_start("42"), Ok(Start::Offset(42)));
    assert!(parse_start("-1").is_err());
    assert_eq!(parse_partition_target("7"), Ok(PartitionTarget::Group(7)));
    let partition = parse_partition_target("s/t/2").expect("a partition");
    assert_eq!(
        partition,
        PartitionTarget::Partition {
            stream: "s".into(),
            topic: "t".into(),
            partition: 2
        }
    );
    assert_eq!(partition.to_string(), "s/t/2");
    assert_eq!(PartitionTarget::Group(7).to_string(), "group 7");
    assert!(parse_partition_target("s/2").is_err());
}

#[test]
fn partition_reassign_takes_a_target_replicas_and_a_policy() {
    let cli = parse(&[
        "partition",
        "reassign",
        "shop/orders/1",
        "--replicas",
        "1,2,4",
        "--confirm",
        "local",
    ])
    .expect("valid");
    let Command::Partition(PartitionCommand::Reassign(reassign)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(reassign.target.to_string(), "shop/orders/1");
    assert_eq!(reassign.replicas, [1, 2, 4]);
    assert_eq!(reassign.confirm, Some(ConfirmPolicy::LocalDurable));
    let cli = parse(&["partition", "reassign", "9", "--replicas", "3"]).expect("valid");
    let Command::Partition(PartitionCommand::Reassign(reassign)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(reassign.target, PartitionTarget::Group(9));
    assert_eq!((reassign.replicas, reassign.confirm), (vec![3], None));
}

#[test]
fn drop_replica_takes_a_target_a_node_and_the_confirmation() {
    let cli =
        parse(&["partition", "drop-replica", "s/t/0", "--node", "2", "--yes"]).expect("valid");
    let Command::Partition(PartitionCommand::DropReplica(dropping)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(dropping.target.to_string(), "s/t/0");
    assert_eq!((dropping.node, dropping.yes), (2, true));
    let cli = parse(&["partition", "drop-replica", "4", "--node", "2"]).expect("valid");
    let Command::Partition(PartitionCommand::DropReplica(dropping)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert!(!dropping.yes, "refused later, before anything is sent");
}

#[test]
fn topic_alter_takes_any_of_the_changes() {
    let cli = parse(&[
        "topic",
        "alter",
        "shop/orders",
        "--retention-bytes",
        "0",
        "--confirm",
        "majority",
    ])
    .expect("valid");
    let Command::Topic(TopicCommand::Alter(alter)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(alter.topic.to_string(), "shop/orders");
    assert_eq!(alter.retention_bytes, Some(0), "0: no limit");
    assert_eq!(alter.retention_ms, None, "unchanged");
    assert_eq!(alter.confirm, Some(ConfirmPolicy::MajorityDurable));
    let cli = parse(&["topic", "alter", "s/t", "--retention-ms", "60000"]).expect("valid");
    let Command::Topic(TopicCommand::Alter(alter)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(
        (alter.retention_bytes, alter.retention_ms, alter.confirm),
        (None, Some(60_000), None)
    );
}

#[test]
fn add_partitions_takes_the_new_total() {
    let cli = parse(&["topic", "add-partitions", "s/t", "--count", "8"]).expect("valid");
    let Command::Topic(TopicCommand::AddPartitions(adding)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!((adding.topic.to_string(), adding.count), ("s/t".into(), 8));
}

#[test]
fn deletes_take_their_target_and_the_confirmation() {
    let cli = parse(&["topic", "delete", "shop/orders", "--yes"]).expect("valid");
    let Command::Topic(TopicCommand::Delete(deleting)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(deleting.topic.to_string(), "shop/orders");
    assert!(deleting.yes);
    let cli = parse(&["stream", "delete", "shop"]).expect("valid");
    let Command::Stream(StreamCommand::Delete(deleting)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(deleting.name, "shop");
    assert!(!deleting.yes, "refused later, before anything is deleted");
}

#[test]
fn global_flags_go_anywhere() {
    let cli = parse(&["status", "--json", "--cluster", "x:1"]).expect("valid");
    assert!(cli.json);
    assert_eq!(cli.cluster, vec!["x:1"]);
    assert!(matches!(cli.command, Command::Status));
}
