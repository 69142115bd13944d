//! The receiving side of a state transfer as a sans-IO session: which peer
//! to ask, which chunks to ask for, when an answer counts, when to ask again
//! and when to give up on a peer. Driven by chunk answers and ticks only; the
//! caller does the storage work (importing the manifest and chunks, installing)
//! and sends the requests the session pushes.
//!
//! The protocol: ask the source for chunk 0 of an export at its commit
//! (frontier 0); once the manifest is imported, ask for the chunks still
//! missing, at most [`CHUNKS_IN_FLIGHT_MAX`] at a time, each at the
//! manifest's frontier; once nothing is missing and nothing is in flight,
//! install. A session that hears nothing for [`STALL_TICKS`] asks again; after
//! [`STALLS_PER_SOURCE_MAX`] stalls (or a chunk storage refused) it starts
//! over from the next member.

use std::collections::BTreeSet;

/// Chunks requested and not yet answered, at most.
pub const CHUNKS_IN_FLIGHT_MAX: usize = 8;

/// Ticks without an answer before the in-flight requests are sent again.
pub const STALL_TICKS: u32 = 50;

/// Stalls before the transfer starts over from the next peer.
pub const STALLS_PER_SOURCE_MAX: u32 = 4;

/// What the caller must do for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferAction {
    /// Send a `RequestStateTransfer` for `chunk` of the export at this
    /// frontier (0, 0 for the manifest of an export at the peer's commit).
    Request {
        /// The replica asked.
        to: u8,
        /// The export's frontier op (0: at the peer's commit).
        frontier_op: u64,
        /// The export's frontier offset.
        frontier_offset: u64,
        /// The chunk.
        chunk: u32,
    },
    /// Every chunk is staged: install the import and tell consensus.
    Install,
    /// Start over from replica `from` (the next member after the one that
    /// stalled or sent what storage refused): drop the import, then call
    /// [`Incoming::start`] with the member [`source_after`] picks.
    StartOver {
        /// The slot to look for the next source from.
        from: u8,
    },
}

/// The receiving side of one transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// The replica asked.
    source: u8,
    /// The op the transfer must reach at least.
    op_min: u64,
    /// The export's frontier (op, offset), once its manifest was imported.
    frontier: Option<(u64, u64)>,
    /// Chunks asked for and not yet answered.
    in_flight: BTreeSet<u32>,
    /// Ticks since the last answer.
    idle_ticks: u32,
    /// Stalls from this source.
    stalls: u32,
}

/// The member to transfer from: `from` itself if it is one of `members`
/// (this replica excluded), otherwise the next one after it, cycling; `from`
/// when there is no other member.
pub fn source_after(members: impl IntoIterator<Item = u8>, me: u8, from: u8) -> u8 {
    let others: Vec<u8> = members.into_iter().filter(|slot| *slot != me).collect();
    others
        .iter()
        .copied()
        .find(|slot| *slot >= from)
        .or_else(|| others.first().copied())
        .unwrap_or(from)
}

impl Incoming {
    /// Starts a transfer from `source` that must reach at least `op_min`:
    /// asks for the manifest.
    pub fn start(source: u8, op_min: u64, actions: &mut Vec<TransferAction>) -> Incoming {
        let session = Incoming {
            source,
            op_min,
            frontier: None,
            in_flight: BTreeSet::from([0]),
            idle_ticks: 0,
            stalls: 0,
        };
        actions.push(session.request(0));
        session.assert_invariants();
        session
    }

    /// The replica asked.
    pub fn source(&self) -> u8 {
        self.source
    }

    /// The op the transfer must reach at least.
    pub fn op_min(&self) -> u64 {
        self.op_min
    }

    fn request(&self, chunk: u32) -> TransferAction {
        assert!(
            chunk == 0 || self.frontier.is_some(),
            "chunk {chunk} asked for before the manifest"
        );
        let (frontier_op, frontier_offset) = self.frontier.unwrap_or((0, 0));
        TransferAction::Request {
            to: self.source,
            frontier_op,
            frontier_offset,
            chunk,
        }
    }

    /// A tick passed: after [`STALL_TICKS`] without an answer, ask again (the
    /// manifest, or every chunk in flight), or start over from the next peer
    /// after [`STALLS_PER_SOURCE_MAX`] stalls.
    pub fn on_tick(&mut self, actions: &mut Vec<TransferAction>) {
        self.idle_ticks += 1;
        if self.idle_ticks < STALL_TICKS {
            return;
        }
        self.idle_ticks = 0;
        self.stalls += 1;
        if self.stalls >= STALLS_PER_SOURCE_MAX {
            actions.push(TransferAction::StartOver {
                from: self.source + 1,
            });
            return;
        }
        if self.frontier.is_none() {
            self.in_flight = BTreeSet::from([0]);
            actions.push(self.request(0));
            return;
        }
        actions.extend(self.in_flight.iter().map(|chunk| self.request(*chunk)));
    }

    /// A chunk arrived from `from`: true when it answers a request in flight
    /// from the source (the caller then imports it); duplicates, other
    /// sources' chunks and late answers are false.
    pub fn accept(&mut self, from: u8, chunk: u32) -> bool {
        if from != self.source || !self.in_flight.remove(&chunk) {
            return false;
        }
        self.idle_ticks = 0;
        true
    }

    /// The manifest the caller imported reaches `frontier_op` (with its head
    /// header known, `frontier_known`): the frontier to ask chunks at, or,
    /// if the source has not committed far enough yet, the manifest is asked
    /// for again at the next stall. Returns whether the manifest was taken.
    pub fn on_manifest(
        &mut self,
        frontier_op: u64,
        frontier_offset: u64,
        frontier_known: bool,
    ) -> bool {
        assert!(self.frontier.is_none(), "a second manifest for one export");
        if frontier_op < self.op_min || !frontier_known {
            self.in_flight.insert(0);
            return false;
        }
        self.frontier = Some((frontier_op, frontier_offset));
        true
    }

    /// Whether a chunk stamped with this frontier belongs to the export
    /// being imported (an answer from an earlier export does not).
    pub fn frontier_matches(&self, frontier_op: u64, frontier_offset: u64) -> bool {
        self.frontier == Some((frontier_op, frontier_offset))
    }

    /// Storage refused a chunk (or the staged import): start over from the
    /// next peer.
    pub fn on_refused(&self, actions: &mut Vec<TransferAction>) {
        actions.push(TransferAction::StartOver {
            from: self.source + 1,
        });
    }

    /// After an answer: asks for more of the chunks the import still lacks
    /// (`needed`, ascending), up to [`CHUNKS_IN_FLIGHT_MAX`] in flight; once
    /// nothing is missing and nothing is in flight, install.
    pub fn request_more(&mut self, needed: &[u32], actions: &mut Vec<TransferAction>) {
        debug_assert!(
            needed.windows(2).all(|pair| pair[0] < pair[1]) && needed.first() != Some(&0),
            "chunks needed out of order, or the manifest among them: {needed:?}"
        );
        if self.frontier.is_none() {
            return; // still waiting for a manifest that reaches op_min
        }
        if needed.is_empty() && self.in_flight.is_empty() {
            actions.push(TransferAction::Install);
            return;
        }
        let room = CHUNKS_IN_FLIGHT_MAX.saturating_sub(self.in_flight.len());
        let wanted: Vec<u32> = needed
            .iter()
            .copied()
            .filter(|chunk| !self.in_flight.contains(chunk))
            .take(room)
            .collect();
        for chunk in wanted {
            self.in_flight.insert(chunk);
            actions.push(self.request(chunk));
        }
        self.assert_invariants();
    }

    /// Checks the session's own bounds; a failure is a bug in this file.
    pub fn assert_invariants(&self) {
        assert!(
            self.in_flight.len() <= CHUNKS_IN_FLIGHT_MAX,
            "{} chunks in flight",
            self.in_flight.len()
        );
        assert!(self.idle_ticks < STALL_TICKS, "a stall not acted on");
        assert!(
            self.stalls <= STALLS_PER_SOURCE_MAX,
            "{} stalls from one source",
            self.stalls
        );
        if self.frontier.is_none() {
            assert!(
                self.in_flight.iter().all(|chunk| *chunk == 0),
                "chunks asked for before the manifest"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(actions: &[TransferAction]) -> Vec<(u8, u64, u32)> {
        actions
            .iter()
            .filter_map(|action| match action {
                TransferAction::Request {
                    to,
                    frontier_op,
                    chunk,
                    ..
                } => Some((*to, *frontier_op, *chunk)),
                _ => None,
            })
            .collect()
    }

    fn started(source: u8, op_min: u64) -> Incoming {
        let mut actions = Vec::new();
        let session = Incoming::start(source, op_min, &mut actions);
        assert_eq!(
            requests(&actions),
            vec![(source, 0, 0)],
            "the manifest first"
        );
        session
    }

    #[test]
    fn a_source_is_another_member_at_or_after_the_one_asked() {
        assert_eq!(source_after([0, 1, 2], 0, 0), 1, "never itself");
        assert_eq!(source_after([0, 1, 2], 0, 2), 2);
        assert_eq!(source_after([0, 1, 2], 0, 3), 1, "cycles");
        assert_eq!(source_after([0, 2, 5], 2, 3), 5, "skips free slots");
        assert_eq!(source_after([4], 4, 1), 1, "alone: as asked");
    }

    #[test]
    fn chunks_follow_the_manifest_a_window_at_a_time_then_install() {
        let mut session = started(1, 10);
        assert!(session.accept(1, 0));
        assert!(session.on_manifest(20, 300, true));
        let mut actions = Vec::new();
        let needed: Vec<u32> = (1..=12).collect();
        session.request_more(&needed, &mut actions);
        assert_eq!(
            requests(&actions),
            (1..=8).map(|chunk| (1, 20, chunk)).collect::<Vec<_>>(),
            "at most eight in flight, at the manifest's frontier"
        );
        assert!(session.accept(1, 3));
        assert!(!session.accept(1, 3), "a duplicate");
        assert!(!session.accept(2, 4), "another source's");
        let mut actions = Vec::new();
        let needed: Vec<u32> = (1..=12).filter(|chunk| *chunk != 3).collect();
        session.request_more(&needed, &mut actions);
        assert_eq!(requests(&actions), vec![(1, 20, 9)]);
        for chunk in [1, 2, 4, 5, 6, 7, 8, 9] {
            assert!(session.accept(1, chunk));
        }
        let mut actions = Vec::new();
        session.request_more(&[10, 11, 12], &mut actions);
        assert_eq!(requests(&actions).len(), 3);
        for chunk in [10, 11, 12] {
            assert!(session.accept(1, chunk));
        }
        let mut actions = Vec::new();
        session.request_more(&[], &mut actions);
        assert_eq!(actions, vec![TransferAction::Install]);
        assert!(session.frontier_matches(20, 300));
        assert!(!session.frontier_matches(19, 300), "an earlier export");
    }

    #[test]
    fn a_manifest_short_of_op_min_is_asked_again_at_the_next_stall() {
        let mut session = started(2, 50);
        assert!(session.accept(2, 0));
        assert!(!session.on_manifest(40, 100, true), "the source lags");
        let mut actions = Vec::new();
        session.request_more(&[1, 2], &mut actions);
        assert!(actions.is_empty(), "no chunks of a refused manifest");
        for _ in 0..STALL_TICKS {
            session.on_tick(&mut actions);
        }
        assert_eq!(requests(&actions), vec![(2, 0, 0)]);
        assert!(session.accept(2, 0));
        assert!(
            !session.on_manifest(60, 0, false),
            "its head header unknown"
        );
    }

    #[test]
    fn stalls_ask_again_then_the_next_peer_takes_over() {
        let mut session = started(1, 0);
        assert!(session.accept(1, 0));
        assert!(session.on_manifest(5, 9, true));
        let mut actions = Vec::new();
        session.request_more(&[1, 2], &mut actions);
        let mut actions = Vec::new();
        for _ in 0..STALL_TICKS - 1 {
            session.on_tick(&mut actions);
        }
        assert!(actions.is_empty(), "patient until a stall");
        session.on_tick(&mut actions);
        assert_eq!(
            requests(&actions),
            vec![(1, 5, 1), (1, 5, 2)],
            "asked again"
        );
        let mut actions = Vec::new();
        for _ in 0..STALL_TICKS * (STALLS_PER_SOURCE_MAX - 1) {
            session.on_tick(&mut actions);
        }
        assert_eq!(
            actions.last(),
            Some(&TransferAction::StartOver { from: 2 }),
            "four stalls: the next member"
        );
    }

    #[test]
    fn an_answer_resets_the_stall_clock() {
        let mut session = started(0, 0);
        let mut actions = Vec::new();
        for _ in 0..STALL_TICKS - 1 {
            session.on_tick(&mut actions);
        }
        assert!(session.accept(0, 0));
        assert!(session.on_manifest(0, 0, true), "an empty export is fine");
        session.request_more(&[1], &mut actions);
        for _ in 0..STALL_TICKS - 1 {
            session.on_tick(&mut actions);
        }
        assert_eq!(requests(&actions), vec![(0, 0, 1)], "no repeat yet");
        let mut refused = Vec::new();
        session.on_refused(&mut refused);
        assert_eq!(refused, vec![TransferAction::StartOver { from: 1 }]);
    }
}
