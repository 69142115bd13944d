//! `strand cursor get|store|delete`: one consumer's cursor on one
//! partition. `delete` frees the name's slot under the partition's bound
//! on consumer names (`cursor_consumers_per_partition_max`).

use std::io::Write;

use clap::Subcommand;

use super::args::{TopicPath, parse_topic_path};
use super::errors::CliError;
use super::print_json;
use crate::Client;

/// `strand cursor ...`
#[derive(Debug, Subcommand)]
pub(crate) enum CursorCommand {
    /// Print a consumer's stored cursor (the next offset it reads).
    Get {
        /// The topic, as STREAM/TOPIC.
        #[arg(value_parser = parse_topic_path)]
        topic: TopicPath,
        /// The consumer's name.
        name: String,
        /// The partition.
        #[arg(long, default_value_t = 0)]
        partition: u32,
    },
    /// Store a consumer's cursor (the next offset it reads).
    Store {
        /// The topic, as STREAM/TOPIC.
        #[arg(value_parser = parse_topic_path)]
        topic: TopicPath,
        /// The consumer's name.
        name: String,
        /// The offset.
        offset: u64,
        /// The partition.
        #[arg(long, default_value_t = 0)]
        partition: u32,
    },
    /// Delete a consumer's cursor, freeing its name's slot on the
    /// partition (a consumer group's only while the group has no members).
    Delete {
        /// The topic, as STREAM/TOPIC.
        #[arg(value_parser = parse_topic_path)]
        topic: TopicPath,
        /// The consumer's name.
        name: String,
        /// The partition.
        #[arg(long, default_value_t = 0)]
        partition: u32,
    },
}

/// Runs a `strand cursor` command.
pub(crate) async fn run(
    client: &Client,
    command: CursorCommand,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        CursorCommand::Get {
            topic,
            name,
            partition,
        } => {
            let offset = client
                .get_cursor(&topic.stream, &topic.topic, partition, &name)
                .await
                .map_err(|error| CliError::client(format!("read cursor {name}"), error))?;
            if json {
                let value = serde_json::json!({ "consumer": name, "partition": partition, "offset": offset });
                return print_json(out, &value);
            }
            match offset {
                Some(offset) => writeln!(out, "{offset}")?,
                None => writeln!(out, "none")?,
            }
        }
        CursorCommand::Store {
            topic,
            name,
            offset,
            partition,
        } => {
            client
                .store_cursor(&topic.stream, &topic.topic, partition, &name, offset)
                .await
                .map_err(|error| CliError::client(format!("store cursor {name}"), error))?;
            done(json, out, "stored", &name, partition)?;
        }
        CursorCommand::Delete {
            topic,
            name,
            partition,
        } => {
            client
                .delete_cursor(&topic.stream, &topic.topic, partition, &name)
                .await
                .map_err(|error| CliError::client(format!("delete cursor {name}"), error))?;
            done(json, out, "deleted", &name, partition)?;
        }
    }
    Ok(())
}

fn done(
    json: bool,
    out: &mut dyn Write,
    what: &str,
    name: &str,
    partition: u32,
) -> Result<(), CliError> {
    if json {
        let value = serde_json::json!({ "consumer": name, "partition": partition, what: true });
        return print_json(out, &value);
    }
    writeln!(out, "{what} cursor {name} on partition {partition}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::args::{Cli, Command};
    use super::*;

    #[test]
    fn cursor_delete_names_the_topic_the_consumer_and_the_partition() {
        let cli = Cli::try_parse_from([
            "strand",
            "cursor",
            "delete",
            "s/t",
            "old",
            "--partition",
            "2",
        ])
        .expect("valid");
        let Command::Cursor(CursorCommand::Delete {
            topic,
            name,
            partition,
        }) = cli.command
        else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(
            (topic.to_string(), name.as_str(), partition),
            ("s/t".to_owned(), "old", 2)
        );
        assert!(Cli::try_parse_from(["strand", "cursor", "store", "s/t", "c"]).is_err());
    }
}
