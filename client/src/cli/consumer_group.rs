//! `strand consumer-group list|describe|reset` (also `strand group`) and
//! `strand consume --group`.
//!
//! `consume --group NAME` joins the group and prints what it is given,
//! each line prefixed with the partition (`PARTITION<TAB>OFFSET<TAB>VALUE`;
//! `--json` adds `"partition"`). Assignment changes go to stderr. It stores
//! the group's offsets after each batch printed (so an interrupted member's
//! successor resumes after the last printed record), and leaves the group
//! at `--count` or on SIGINT / SIGTERM.

use std::io::Write;

use serde::Serialize;

use super::args::{ConsumeArgs, ResetTarget, Start};
use super::consume::{record_json_in, record_text};
use super::errors::CliError;
use super::table::Table;
use crate::{
    Client, ClientError, ConsumerGroupEvent, ConsumerGroupInfo, ConsumerGroupMemberConfig,
    ConsumerGroupRecords, StartFrom,
};

/// Runs `strand consume --group NAME`.
pub(crate) async fn consume(
    client: &Client,
    group: &str,
    args: ConsumeArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let doing = format!("consume {} as consumer group {group}", args.topic);
    let config = member_config(&args)?;
    let mut consumer = client
        .consumer_group_member(group, &args.topic.stream, &args.topic.topic, config)
        .await
        .map_err(|error| CliError::client(&doing, error))?;
    let mut printed = 0u64;
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        report_events(consumer.take_events(), consumer.member());
        if args.count.is_some_and(|count| printed >= count) {
            break;
        }
        let polled = tokio::select! {
            polled = consumer.poll() => polled,
            () = &mut stop => break,
        };
        let batches = match polled {
            Ok(batches) => batches,
            // A rebalance or removal is taken by the consumer: go on.
            Err(ClientError::StaleGeneration { .. } | ClientError::UnknownMember { .. }) => {
                continue;
            }
            Err(error) if error_is_passing(&error) => {
                eprintln!("strand: {error}; retrying");
                continue;
            }
            Err(error) => return Err(CliError::client(&doing, error)),
        };
        printed += print_batches(&batches, &args, json, out)?;
        out.flush()?;
    }
    report_events(consumer.take_events(), consumer.member());
    consumer
        .leave()
        .await
        .map_err(|error| CliError::client(format!("{doing}: leave the group"), error))
}

/// The member's settings: where partitions without a stored offset start
/// (`--from` takes only `earliest` or `latest` here), its session timeout,
/// and offsets stored after every batch printed.
fn member_config(args: &ConsumeArgs) -> Result<ConsumerGroupMemberConfig, CliError> {
    let start_from = match args.from {
        Some(Start::Latest) => StartFrom::Latest,
        Some(Start::Earliest) | None => StartFrom::Earliest,
        Some(Start::Offset(_)) => {
            return Err(CliError::Usage(
                "--group starts each partition at the group's offset; --from takes only \
                 `earliest` or `latest` (for partitions the group never stored an offset on)"
                    .to_owned(),
            ));
        }
    };
    Ok(ConsumerGroupMemberConfig {
        session_timeout_ms: args.session_timeout_ms,
        heartbeat_interval_ms: (args.session_timeout_ms / 5).max(100),
        start_from,
        // The offsets after every batch printed: a successor resumes after
        // the last record this member printed.
        auto_commit_interval_ms: 0,
        ..ConsumerGroupMemberConfig::default()
    })
}

/// Prints every record of `batches`, each line naming its partition;
/// returns how many were printed.
fn print_batches(
    batches: &[ConsumerGroupRecords],
    args: &ConsumeArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<u64, CliError> {
    let mut printed = 0u64;
    for batch in batches {
        for record in &batch.records {
            let line = if json {
                record_json_in(Some(batch.partition), record)
            } else {
                format!(
                    "{}\t{}",
                    batch.partition,
                    record_text(record, args.key_sep.as_deref())
                )
            };
            writeln!(out, "{line}")?;
            printed += 1;
        }
    }
    Ok(printed)
}

/// Errors a long-running member rides out (the cluster fails over).
fn error_is_passing(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Timeout { .. } | ClientError::Unavailable { .. } | ClientError::Connect { .. }
    )
}

/// Assignment changes, on stderr.
fn report_events(events: Vec<ConsumerGroupEvent>, member: u128) {
    for event in events {
        match event {
            ConsumerGroupEvent::Assigned(partitions) => {
                eprintln!("strand: member {member:032x} reads partitions {partitions:?}")
            }
            ConsumerGroupEvent::Revoked(partitions) => {
                eprintln!("strand: member {member:032x} no longer reads partitions {partitions:?}")
            }
            ConsumerGroupEvent::Rejoined { member } => eprintln!(
                "strand: the group removed this member (no heartbeat within its session); \
                 joined again as {member:032x}"
            ),
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut terminate) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// One partition of a described group.
#[derive(Debug, Serialize)]
struct PartitionJson {
    partition: u32,
    group: u64,
    member: Option<String>,
    committed: Option<u64>,
    end: u64,
    lag: u64,
}

#[derive(Debug, Serialize)]
struct MemberJson {
    member: String,
    session_timeout_ms: u32,
    partitions: Vec<u32>,
}

#[derive(Debug, Serialize)]
struct ConsumerGroupJson {
    group: String,
    topic: String,
    generation: u64,
    members: Vec<MemberJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    partitions: Vec<PartitionJson>,
}

fn group_json(info: &ConsumerGroupInfo, partitions: Vec<PartitionJson>) -> ConsumerGroupJson {
    ConsumerGroupJson {
        group: info.group.clone(),
        topic: format!("{}/{}", info.stream, info.topic),
        generation: info.generation,
        members: info
            .members
            .iter()
            .map(|member| MemberJson {
                member: format!("{:032x}", member.member),
                session_timeout_ms: member.session_timeout_ms,
                partitions: member.partitions.clone(),
            })
            .collect(),
        partitions,
    }
}

/// Runs `strand consumer-group list`.
pub(crate) async fn list(client: &Client, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let described = client
        .describe_consumer_groups(None)
        .await
        .map_err(|error| CliError::client("list consumer groups", error))?;
    if json {
        let groups: Vec<ConsumerGroupJson> = described
            .groups
            .iter()
            .map(|info| group_json(info, Vec::new()))
            .collect();
        writeln!(
            out,
            "{}",
            serde_json::to_string(&groups).unwrap_or_default()
        )?;
        return Ok(());
    }
    let mut table = Table::new(&["GROUP", "TOPIC", "GENERATION", "MEMBERS"]);
    for info in &described.groups {
        table.row(vec![
            info.group.clone(),
            format!("{}/{}", info.stream, info.topic),
            info.generation.to_string(),
            info.members.len().to_string(),
        ]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}

/// The one group named `name`, or a clear error.
async fn one_group(
    client: &Client,
    name: &str,
    doing: &str,
) -> Result<ConsumerGroupInfo, CliError> {
    let described = client
        .describe_consumer_groups(Some(name))
        .await
        .map_err(|error| CliError::client(doing, error))?;
    described.groups.into_iter().next().ok_or_else(|| {
        CliError::Failed(format!(
            "{doing}: no consumer group {name} (`strand consumer-group list` shows the groups)"
        ))
    })
}

/// Runs `strand consumer-group describe NAME`.
pub(crate) async fn describe(
    client: &Client,
    name: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let doing = format!("describe consumer group {name}");
    let info = one_group(client, name, &doing).await?;
    let mut partitions = Vec::new();
    for (partition, partition_group) in info.partition_groups.iter().enumerate() {
        let partition = partition as u32;
        let committed = client
            .get_cursor_group(*partition_group, name)
            .await
            .map_err(|error| CliError::client(&doing, error))?;
        let (earliest, end) = client
            .partition_bounds(*partition_group)
            .await
            .map_err(|error| CliError::client(&doing, error))?;
        let member = info
            .members
            .iter()
            .find(|member| member.partitions.contains(&partition))
            .map(|member| format!("{:032x}", member.member));
        let lag = end.saturating_sub(committed.unwrap_or(earliest).max(earliest));
        partitions.push(PartitionJson {
            partition,
            group: *partition_group,
            member,
            committed,
            end,
            lag,
        });
    }
    if json {
        let group = group_json(&info, partitions);
        writeln!(out, "{}", serde_json::to_string(&group).unwrap_or_default())?;
        return Ok(());
    }
    writeln!(
        out,
        "group {} on {}/{}, generation {}, {} member(s)",
        info.group,
        info.stream,
        info.topic,
        info.generation,
        info.members.len()
    )?;
    let mut table = Table::new(&["PARTITION", "MEMBER", "COMMITTED", "END", "LAG"]);
    for partition in &partitions {
        table.row(vec![
            partition.partition.to_string(),
            partition.member.clone().unwrap_or_else(|| "-".to_owned()),
            partition
                .committed
                .map_or_else(|| "-".to_owned(), |offset| offset.to_string()),
            partition.end.to_string(),
            partition.lag.to_string(),
        ]);
    }
    write!(out, "{}", table.render())?;
    Ok(())
}

/// Runs `strand consumer-group reset NAME --to ...`.
pub(crate) async fn reset(
    client: &Client,
    name: &str,
    to: ResetTarget,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let doing = format!("reset consumer group {name}");
    let info = one_group(client, name, &doing).await?;
    if !info.members.is_empty() {
        return Err(CliError::Failed(format!(
            "{doing}: the group has {} member(s); stop its consumers first (a reset would race \
             their commits)",
            info.members.len()
        )));
    }
    let mut offsets = Vec::new();
    for (partition, partition_group) in info.partition_groups.iter().enumerate() {
        let (earliest, end) = client
            .partition_bounds(*partition_group)
            .await
            .map_err(|error| CliError::client(&doing, error))?;
        let offset = match to {
            ResetTarget::Earliest => earliest,
            ResetTarget::Latest => end,
            ResetTarget::Offset(offset) => offset.clamp(earliest, end),
            ResetTarget::Time(timestamp_ns) => client
                .offset_for_time(&info.stream, &info.topic, partition as u32, timestamp_ns)
                .await
                .map_err(|error| CliError::client(&doing, error))?,
        };
        client
            .store_cursor_group(*partition_group, name, offset)
            .await
            .map_err(|error| CliError::client(&doing, error))?;
        offsets.push((partition as u32, offset));
    }
    if json {
        let offsets: Vec<serde_json::Value> = offsets
            .iter()
            .map(
                |(partition, offset)| serde_json::json!({"partition": partition, "offset": offset}),
            )
            .collect();
        writeln!(
            out,
            "{}",
            serde_json::json!({"group": name, "offsets": offsets})
        )?;
        return Ok(());
    }
    for (partition, offset) in offsets {
        writeln!(
            out,
            "group {name}: partition {partition} now reads from offset {offset}"
        )?;
    }
    Ok(())
}
