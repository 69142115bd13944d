//! The state machine a group's replica commits into: the metadata plane's
//! catalog (group 0) or a partition's record log (every other group).

use bytes::Bytes;
use strand_consensus::{RecordLog, StateMachine};
use strand_wire::{PrepareHeader, ResultCode};

use crate::catalog::Catalog;

/// One group's state machine.
#[derive(Debug, Clone)]
pub enum Machine {
    /// Group 0: streams, topics and placements.
    Catalog(Catalog),
    /// A partition: the committed offset end.
    Records(RecordLog),
}

impl Machine {
    /// The catalog, for group 0.
    pub fn catalog(&self) -> Option<&Catalog> {
        match self {
            Machine::Catalog(catalog) => Some(catalog),
            Machine::Records(_) => None,
        }
    }

    /// One past the last committed record offset (0 for the catalog).
    pub fn high_watermark(&self) -> u64 {
        match self {
            Machine::Catalog(_) => 0,
            Machine::Records(records) => records.offset_end,
        }
    }
}

impl StateMachine for Machine {
    fn commit(&mut self, header: &PrepareHeader, body: Option<&Bytes>) -> (ResultCode, Bytes) {
        match self {
            Machine::Catalog(catalog) => catalog.commit(header, body),
            Machine::Records(records) => records.commit(header, body),
        }
    }

    fn needs_bodies(&self) -> bool {
        match self {
            Machine::Catalog(catalog) => catalog.needs_bodies(),
            Machine::Records(records) => records.needs_bodies(),
        }
    }

    fn restore(&mut self, head: Option<&PrepareHeader>) {
        match self {
            // The catalog is rebuilt by replaying the committed log before the
            // replica opens (see `group::open_catalog`).
            Machine::Catalog(_) => {}
            Machine::Records(records) => records.restore(head),
        }
    }
}
