//! The persistence order's bookkeeping: which persists of the durable state
//! were asked for, which are done, and what the done ones put on disk.
//!
//! The driver persists the durable state in the order asked, each ask
//! numbered by a sequence; a completion names the newest one done, and
//! every ask at or below it is on disk. What is on disk bounds what the
//! replica may claim: it acks nothing in a view whose number is not
//! persisted ([`Persistence::view`]), retention drops nothing above the
//! persisted commit, and a cut that drops ops that may have been acked
//! waits for the persist recording so. The decisions live in
//! `storage.rs`; this is the state they read and its rules.

use std::collections::VecDeque;

use strand_wire::ViewId;

/// One persist handed to the driver and not done yet: what it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InFlightPersist {
    /// Its sequence number.
    pub sequence: u64,
    /// The view it writes.
    pub view: ViewId,
    /// The log view it writes.
    pub log_view: ViewId,
    /// The commit number it writes.
    pub commit: u64,
}

/// The replica's persists: asked, in flight, done. See the module docs.
#[derive(Debug)]
pub(crate) struct Persistence {
    /// The sequence of the newest persist asked for (0: none yet).
    requested: u64,
    /// The sequence of the newest persist done.
    completed: u64,
    /// Persists asked for and not done, oldest first.
    in_flight: VecDeque<InFlightPersist>,
    /// The view known to be on disk.
    view: ViewId,
    /// The commit number known to be on disk.
    commit: u64,
    /// The commit the client table in the durable state was encoded at
    /// (0: encode it again at the next persist).
    pub client_table_at: u64,
}

impl Persistence {
    /// The persistence of a replica that read `view` and `commit` from its
    /// superblock.
    pub fn opened(view: ViewId, commit: u64) -> Persistence {
        Persistence {
            requested: 0,
            completed: 0,
            in_flight: VecDeque::new(),
            view,
            commit,
            client_table_at: 0,
        }
    }

    /// Records a persist of `view`, `log_view` and `commit` asked for; its
    /// sequence number.
    pub fn ask(&mut self, view: ViewId, log_view: ViewId, commit: u64) -> u64 {
        assert!(
            log_view <= view,
            "persisting log view {log_view} past view {view}"
        );
        self.requested += 1;
        self.in_flight.push_back(InFlightPersist {
            sequence: self.requested,
            view,
            log_view,
            commit,
        });
        self.requested
    }

    /// Persist `sequence` is done, and with it every one before: those in
    /// flight up to it, oldest first (their views and commits now count as
    /// on disk). Empty when it was done already.
    pub fn done(&mut self, sequence: u64) -> Vec<InFlightPersist> {
        assert!(
            sequence <= self.requested,
            "persisted a state never asked for"
        );
        if sequence <= self.completed {
            return Vec::new();
        }
        self.completed = sequence;
        let mut done = Vec::new();
        while let Some(&persist) = self.in_flight.front() {
            if persist.sequence > sequence {
                break;
            }
            self.in_flight.pop_front();
            self.view = self.view.max(persist.view);
            self.commit = self.commit.max(persist.commit);
            done.push(persist);
        }
        done
    }

    /// A state transfer installed a log whose commit `op` storage persisted
    /// with it: a later persist must not lower it.
    pub fn installed(&mut self, op: u64) {
        self.commit = op;
    }

    /// Whether persist `sequence` is done.
    pub fn is_done(&self, sequence: u64) -> bool {
        sequence <= self.completed
    }

    /// Whether persist `sequence` was asked for and is not done.
    pub fn is_in_flight(&self, sequence: u64) -> bool {
        sequence > self.completed && sequence <= self.requested
    }

    /// Whether no persist is in flight.
    pub fn idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// The view known to be on disk.
    pub fn view(&self) -> ViewId {
        self.view
    }

    /// The commit number known to be on disk.
    pub fn commit(&self) -> u64 {
        self.commit
    }

    /// The sequence of the newest persist asked for.
    pub fn requested(&self) -> u64 {
        self.requested
    }

    /// The sequence of the newest persist done.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Its own rules: nothing done before it was asked; persists in flight
    /// in the order asked, all after the newest done; each writes a log
    /// view no later than its view.
    pub fn assert_invariants(&self) {
        assert!(
            self.completed <= self.requested,
            "persist {} completed before it was asked for ({})",
            self.completed,
            self.requested
        );
        assert!(
            self.in_flight.len() as u64 <= self.requested - self.completed,
            "{} persists in flight, {} asked and not done",
            self.in_flight.len(),
            self.requested - self.completed
        );
        let mut sequence = self.completed;
        for persist in &self.in_flight {
            assert!(
                persist.sequence > sequence && persist.sequence <= self.requested,
                "persists in flight out of order: {} after {sequence}",
                persist.sequence
            );
            assert!(
                persist.log_view <= persist.view,
                "persist {} writes log view {} past view {}",
                persist.sequence,
                persist.log_view,
                persist.view
            );
            sequence = persist.sequence;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_settles_every_persist_up_to_it_once() {
        let mut persistence = Persistence::opened(ViewId::new(0, 1), 5);
        let first = persistence.ask(ViewId::new(0, 2), ViewId::new(0, 1), 6);
        let second = persistence.ask(ViewId::new(0, 3), ViewId::new(0, 3), 7);
        let third = persistence.ask(ViewId::new(0, 3), ViewId::new(0, 3), 9);
        persistence.assert_invariants();
        assert!(persistence.is_in_flight(first) && !persistence.idle());
        let done = persistence.done(second);
        assert_eq!(
            done.iter().map(|p| p.sequence).collect::<Vec<_>>(),
            [first, second]
        );
        assert_eq!(
            (persistence.view(), persistence.commit()),
            (ViewId::new(0, 3), 7)
        );
        assert!(persistence.is_done(first) && persistence.is_in_flight(third));
        assert!(persistence.done(first).is_empty(), "done already");
        persistence.assert_invariants();
        assert_eq!(persistence.done(third).len(), 1);
        assert!(persistence.idle());
        assert_eq!(persistence.commit(), 9);
    }

    #[test]
    #[should_panic(expected = "never asked for")]
    fn a_completion_of_a_persist_never_asked_for_is_a_bug() {
        let mut persistence = Persistence::opened(ViewId::ZERO, 0);
        persistence.done(1);
    }
}
