//! Kafka's admin APIs as Strand's metadata operations, proposed on the
//! node that leads the metadata plane, which Kafka clients know as the
//! controller (any other node answers `NOT_CONTROLLER`, and they refresh
//! their metadata): CreateTopics (the stream created with it when
//! missing), DeleteTopics, CreatePartitions, the topics' configs, and
//! DescribeCluster.
//!
//! The configs Strand has: `retention.ms` and `retention.bytes` (-1: no
//! limit; both alterable), `segment.bytes`, `min.insync.replicas` (the
//! confirm rule: that many copies confirm a record) and `cleanup.policy`
//! (`delete` only). Anything else is refused as `INVALID_CONFIG`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand_kafka::admin::{self, Alteration, Described, NewTopic, RESOURCE_TOPIC, TopicOutcome};
use strand_kafka::api::{self, ApiKey, RequestHeader};
use strand_kafka::codec::Reader;
use strand_kafka::errors::{code, from_result};
use strand_kafka::{DecodeError, names};
use strand_wire::ops::{
    AddPartitions, AlterTopic, CreateStream, CreateTopic, DeleteTopic, TopicInfo,
};
use strand_wire::{Body, ConfirmPolicy, Operation, ResultCode};

use crate::kafka::link::{Answer, Link};
use crate::kafka::listener::Response;
use crate::kafka::metadata::{brokers, controller_id};
use crate::kafka::serve::Served;

/// How long a metadata proposal may take.
const PROPOSAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves one admin request (`header.api` is an admin API).
pub async fn serve(
    link: &Arc<Link>,
    header: RequestHeader,
    body: &mut Reader,
) -> Result<Served, DecodeError> {
    let link = Arc::clone(link);
    match header.api {
        ApiKey::CreateTopics => {
            let (topics, validate_only) = admin::decode_create_topics(&header, body)?;
            later(create_topics(link, header, topics, validate_only))
        }
        ApiKey::DeleteTopics => later(delete_topics(
            link,
            header.clone(),
            admin::decode_delete_topics(body)?,
        )),
        ApiKey::CreatePartitions => {
            let (topics, validate_only) = admin::decode_create_partitions(body)?;
            later(create_partitions(link, header, topics, validate_only))
        }
        ApiKey::DescribeConfigs => {
            let resources = admin::decode_describe_configs(&header, body)?;
            let body = admin::encode_describe_configs(&header, &describe_configs(&link, resources));
            Ok(Served::Respond(Response::Ready(api::response_frame(
                &header, body,
            ))))
        }
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => {
            let incremental = header.api == ApiKey::IncrementalAlterConfigs;
            let (resources, validate_only) = admin::decode_alter_configs(body, incremental)?;
            later(alter_configs(link, header, resources, validate_only))
        }
        ApiKey::DescribeCluster => {
            admin::decode_describe_cluster(&header, body)?;
            let shared = link.shared();
            let cluster_id = format!("strand-{}", shared.config.cluster);
            let body = admin::encode_describe_cluster(
                &header,
                &cluster_id,
                controller_id(shared),
                &brokers(shared),
            );
            Ok(Served::Respond(Response::Ready(api::response_frame(
                &header, body,
            ))))
        }
        other => unreachable!("{other:?} is not an admin API"),
    }
}

/// A response written when `task` finishes.
fn later(
    task: impl Future<Output = Option<Bytes>> + Send + 'static,
) -> Result<Served, DecodeError> {
    Ok(Served::Respond(Response::Later(tokio::spawn(task))))
}

/// Proposes a metadata operation as the connection's user; a node that
/// does not lead the plane answers `NotPrimary`.
async fn propose(link: &Link, operation: Operation, body: Vec<u8>) -> Answer {
    let (sent, _) = link.send(0, operation, Bytes::from(body)).await;
    link.answer(sent, PROPOSAL_TIMEOUT).await
}

/// The Kafka error code of a metadata answer: `NOT_CONTROLLER` where the
/// plane's primary is elsewhere.
fn admin_code(answer: &Answer) -> (i16, Option<String>) {
    match answer.result {
        ResultCode::Ok => (code::NONE, None),
        ResultCode::NotPrimary | ResultCode::NotReady => (code::NOT_CONTROLLER, answer.message()),
        other => (from_result(other), answer.message()),
    }
}

async fn create_topics(
    link: Arc<Link>,
    header: RequestHeader,
    topics: Vec<NewTopic>,
    validate_only: bool,
) -> Option<Bytes> {
    let mut outcomes = Vec::with_capacity(topics.len());
    for topic in topics {
        outcomes.push(create_topic(&link, topic, validate_only).await);
    }
    Some(api::response_frame(
        &header,
        admin::encode_create_topics(&header, &outcomes),
    ))
}

/// Creates one topic (and its stream, when missing).
async fn create_topic(link: &Link, topic: NewTopic, validate_only: bool) -> TopicOutcome {
    let mut outcome = TopicOutcome {
        name: topic.name.clone(),
        topic_id: [0; 16],
        error_code: code::NONE,
        message: None,
        partitions: -1,
        replication_factor: -1,
    };
    let fail = |mut outcome: TopicOutcome, error_code, message: String| {
        outcome.error_code = error_code;
        outcome.message = Some(message);
        outcome
    };
    let spec = match topic_spec(link, &topic) {
        Ok(spec) => spec,
        Err((error_code, message)) => return fail(outcome, error_code, message),
    };
    if validate_only {
        outcome.partitions = spec.partition_count as i32;
        outcome.replication_factor = i16::from(spec.replica_count);
        return outcome;
    }
    let stream = CreateStream {
        name: spec.stream.clone(),
    };
    let answer = propose(link, Operation::CreateStream, stream.to_vec()).await;
    if !matches!(answer.result, ResultCode::Ok | ResultCode::AlreadyExists) {
        let (error_code, message) = admin_code(&answer);
        return fail(outcome, error_code, message.unwrap_or_default());
    }
    let answer = propose(link, Operation::CreateTopic, spec.to_vec()).await;
    let (error_code, message) = admin_code(&answer);
    if error_code != code::NONE {
        return fail(outcome, error_code, message.unwrap_or_default());
    }
    outcome.partitions = spec.partition_count as i32;
    outcome.replication_factor = i16::from(spec.replica_count);
    outcome
}

/// The Strand topic a CreateTopics entry asks for, or why it cannot be.
fn topic_spec(link: &Link, topic: &NewTopic) -> Result<CreateTopic, (i16, String)> {
    let shared = link.shared();
    let Some((stream, name)) = names::to_strand(&topic.name, &shared.config.kafka.stream) else {
        return Err((
            code::INVALID_REQUEST,
            format!("{:?} is no valid topic name", topic.name),
        ));
    };
    if topic.assigned {
        return Err((
            code::INVALID_REPLICA_ASSIGNMENT,
            "replicas are placed by the cluster".to_owned(),
        ));
    }
    let nodes = shared.config.peers.len() as i16;
    let replicas = match topic.replication_factor {
        -1 => nodes.min(3),
        factor if (1..=nodes).contains(&factor) => factor,
        factor => {
            return Err((
                code::INVALID_REPLICATION_FACTOR,
                format!("{factor} replicas on {nodes} nodes"),
            ));
        }
    };
    let partitions = match topic.partitions {
        -1 => 1,
        count if (1..=4096).contains(&count) => count,
        count => {
            return Err((
                code::INVALID_PARTITIONS,
                format!("{count} partitions (1 to 4096)"),
            ));
        }
    };
    let mut spec = CreateTopic {
        stream,
        topic: name,
        partition_count: partitions as u32,
        replica_count: replicas as u8,
        confirm: None,
        durability: None,
        consumer_offset_durability: None,
        retention_bytes: 0,
        retention_ms: 0,
        segment_bytes: None,
    };
    for (key, value) in &topic.configs {
        apply_config(&mut spec, key, value.as_deref().unwrap_or_default())
            .map_err(|message| (code::INVALID_CONFIG, message))?;
    }
    Ok(spec)
}

/// One Kafka config onto a new topic.
fn apply_config(spec: &mut CreateTopic, key: &str, value: &str) -> Result<(), String> {
    let number = || {
        value
            .parse::<i64>()
            .map_err(|_| format!("{key}={value:?} is not a number"))
    };
    let limit = |number: i64| u64::try_from(number).unwrap_or(0);
    match key {
        "retention.ms" => spec.retention_ms = limit(number()?),
        "retention.bytes" => spec.retention_bytes = limit(number()?),
        "segment.bytes" => spec.segment_bytes = Some(limit(number()?).max(1)),
        "min.insync.replicas" => {
            let count = u8::try_from(number()?)
                .ok()
                .filter(|count| (1..=spec.replica_count).contains(count));
            let count = count.ok_or(format!("{key}={value}: 1 to the replication factor"))?;
            spec.confirm = Some(ConfirmPolicy::Count(count));
        }
        "cleanup.policy" if value == "delete" => {}
        _ => return Err(format!("{key}={value:?} is not a config Strand takes")),
    }
    Ok(())
}

async fn delete_topics(
    link: Arc<Link>,
    header: RequestHeader,
    names_asked: Vec<String>,
) -> Option<Bytes> {
    let mut results = Vec::with_capacity(names_asked.len());
    for name in names_asked {
        let (error_code, message) =
            match names::to_strand(&name, &link.shared().config.kafka.stream) {
                None => (code::UNKNOWN_TOPIC_OR_PARTITION, None),
                Some((stream, topic)) => {
                    let body = DeleteTopic { stream, topic }.to_vec();
                    admin_code(&propose(&link, Operation::DeleteTopic, body).await)
                }
            };
        results.push((name, error_code, message));
    }
    Some(api::response_frame(
        &header,
        admin::encode_delete_topics(&header, &results),
    ))
}

async fn create_partitions(
    link: Arc<Link>,
    header: RequestHeader,
    topics: Vec<admin::Growth>,
    validate_only: bool,
) -> Option<Bytes> {
    let mut results = Vec::with_capacity(topics.len());
    for (name, count, assigned) in topics {
        let target = names::to_strand(&name, &link.shared().config.kafka.stream);
        let (error_code, message) = match (target, assigned, u32::try_from(count)) {
            (None, _, _) => (code::UNKNOWN_TOPIC_OR_PARTITION, None),
            (_, true, _) => (
                code::INVALID_REPLICA_ASSIGNMENT,
                Some("replicas are placed by the cluster".to_owned()),
            ),
            (_, _, Err(_)) => (code::INVALID_PARTITIONS, None),
            (Some(_), false, Ok(_)) if validate_only => (code::NONE, None),
            (Some((stream, topic)), false, Ok(partition_count)) => {
                let body = AddPartitions {
                    stream,
                    topic,
                    partition_count,
                }
                .to_vec();
                admin_code(&propose(&link, Operation::AddPartitions, body).await)
            }
        };
        results.push((name, error_code, message));
    }
    Some(api::response_frame(
        &header,
        admin::encode_create_partitions(&header, &results),
    ))
}

/// Each topic resource's configs, as this node's catalog holds them.
fn describe_configs(
    link: &Link,
    resources: Vec<(i8, String, Option<Vec<String>>)>,
) -> Vec<Described> {
    let shared = link.shared();
    let catalog = shared.catalog();
    resources
        .into_iter()
        .map(|(kind, name, keys)| {
            let mut described = Described {
                error_code: code::NONE,
                message: None,
                kind,
                name: name.clone(),
                configs: Vec::new(),
            };
            let info = names::to_strand(&name, &shared.config.kafka.stream)
                .filter(|_| kind == RESOURCE_TOPIC)
                .and_then(|(stream, topic)| catalog.topic_info(&stream, &topic, &|_| 0));
            match info {
                Some(info) => described.configs = topic_configs(&info, keys.as_deref()),
                None => described.error_code = code::UNKNOWN_TOPIC_OR_PARTITION,
            }
            described
        })
        .collect()
}

/// A topic's configs in Kafka's names (only `keys`, when given).
fn topic_configs(info: &TopicInfo, keys: Option<&[String]>) -> Vec<(String, String, bool)> {
    let limit = |value: u64| match value {
        0 => "-1".to_owned(),
        value => value.to_string(),
    };
    let replicas = info
        .partitions
        .first()
        .map_or(1, |partition| partition.replicas.len() as u8);
    let confirms = match info.confirm {
        ConfirmPolicy::MajorityDurable => replicas / 2 + 1,
        ConfirmPolicy::LocalDurable => replicas,
        ConfirmPolicy::Count(count) => count.min(replicas),
    };
    let segment_bytes = match info.segment_bytes {
        0 => 256 * 1024 * 1024,
        bytes => bytes,
    };
    let all = [
        ("retention.ms", limit(info.retention_ms), false),
        ("retention.bytes", limit(info.retention_bytes), false),
        ("segment.bytes", segment_bytes.to_string(), true),
        ("min.insync.replicas", confirms.to_string(), true),
        ("cleanup.policy", "delete".to_owned(), true),
    ];
    all.into_iter()
        .filter(|(name, _, _)| keys.is_none_or(|keys| keys.iter().any(|key| key == name)))
        .map(|(name, value, read_only)| (name.to_owned(), value, read_only))
        .collect()
}

async fn alter_configs(
    link: Arc<Link>,
    header: RequestHeader,
    resources: Vec<Alteration>,
    validate_only: bool,
) -> Option<Bytes> {
    let mut results = Vec::with_capacity(resources.len());
    for (kind, name, configs) in resources {
        let (error_code, message) = match alteration(&link, kind, &name, &configs) {
            Err(refused) => refused,
            Ok(_) if validate_only => (code::NONE, None),
            Ok(alter) => admin_code(&propose(&link, Operation::AlterTopic, alter.to_vec()).await),
        };
        results.push((kind, name, error_code, message));
    }
    Some(api::response_frame(
        &header,
        admin::encode_alter_configs(&header, &results),
    ))
}

/// The AlterTopic a topic resource's config changes make, or why none can.
fn alteration(
    link: &Link,
    kind: i8,
    name: &str,
    configs: &[(String, i8, Option<String>)],
) -> Result<AlterTopic, (i16, Option<String>)> {
    let target = names::to_strand(name, &link.shared().config.kafka.stream)
        .filter(|_| kind == RESOURCE_TOPIC);
    let Some((stream, topic)) = target else {
        return Err((
            code::INVALID_REQUEST,
            Some("only topics' configs are altered".to_owned()),
        ));
    };
    let mut alter = AlterTopic {
        stream,
        topic,
        retention_bytes: None,
        retention_ms: None,
    };
    for (key, operation, value) in configs {
        // Set (0) a value, or delete (1) it back to no limit.
        let value = match (operation, value.as_deref()) {
            (0, Some(value)) => value.parse::<i64>().ok(),
            (1, _) => Some(-1),
            _ => None,
        };
        let value = value.map(|value| u64::try_from(value).unwrap_or(0));
        match (key.as_str(), value) {
            ("retention.ms", Some(value)) => alter.retention_ms = Some(value),
            ("retention.bytes", Some(value)) => alter.retention_bytes = Some(value),
            (key, _) => {
                return Err((
                    code::INVALID_CONFIG,
                    Some(format!("{key} cannot be altered here")),
                ));
            }
        }
    }
    Ok(alter)
}
