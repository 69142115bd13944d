//! The command byte: which typed header a frame carries.

/// Every kind of frame that crosses a Strand socket.
///
/// The replica bus carries the replication commands; the client port carries
/// `Request` and `Reply`. The value 0 is never a command, so a zeroed buffer is
/// never mistaken for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Command {
    /// Liveness probe and peer identification on the replica bus.
    Ping = 1,
    /// Answer to a `Ping`.
    Pong = 2,
    /// A client operation sent to a group's primary.
    Request = 3,
    /// The answer to a `Request`.
    Reply = 4,
    /// Primary → backups: append op `n` (chained to op `n-1` by `parent`).
    Prepare = 5,
    /// Backup → primary: op `n` is appended (queued or durable, per policy).
    PrepareOk = 6,
    /// Primary → backups: heartbeat carrying the commit number.
    Commit = 7,
    /// A replica votes to leave its view; a quorum of votes starts the next one.
    StartViewChange = 8,
    /// A replica's log summary, sent to the candidate primary of the new view.
    DoViewChange = 9,
    /// The new primary's canonical log: backups adopt it and become Normal.
    StartView = 10,
    /// A restarted or lagging replica asks the primary for the current view.
    RequestStartView = 11,
    /// Ask a peer for one prepare (header and body) by op and checksum.
    RequestPrepare = 12,
    /// Ask a peer for the prepare headers in an op range.
    RequestHeaders = 13,
    /// Prepare headers answering `RequestHeaders`.
    Headers = 14,
    /// Ask a peer for one chunk of a state-transfer export.
    RequestStateTransfer = 15,
    /// One checksummed chunk of a state-transfer export.
    StateTransferChunk = 16,
    /// Primary → backups: cursor events that are durable on the primary.
    Cursors = 17,
    /// Answer to a repair request below the sender's retained log: it no
    /// longer holds those ops (retention dropped them); the asker catches up
    /// by state transfer.
    LogStart = 18,
}

impl Command {
    /// Every command, in wire order; used by tests and by exhaustive checks.
    pub const ALL: [Command; 18] = [
        Command::Ping,
        Command::Pong,
        Command::Request,
        Command::Reply,
        Command::Prepare,
        Command::PrepareOk,
        Command::Commit,
        Command::StartViewChange,
        Command::DoViewChange,
        Command::StartView,
        Command::RequestStartView,
        Command::RequestPrepare,
        Command::RequestHeaders,
        Command::Headers,
        Command::RequestStateTransfer,
        Command::StateTransferChunk,
        Command::Cursors,
        Command::LogStart,
    ];

    /// Parses the command byte; `None` for a byte that names no command.
    pub fn from_u8(value: u8) -> Option<Command> {
        Command::ALL
            .iter()
            .copied()
            .find(|command| *command as u8 == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_round_trips_and_zero_is_none() {
        for command in Command::ALL {
            assert_eq!(Command::from_u8(command as u8), Some(command));
        }
        assert_eq!(Command::from_u8(0), None);
        assert_eq!(Command::from_u8(Command::ALL.len() as u8 + 1), None);
        assert_eq!(Command::from_u8(u8::MAX), None);
    }
}
