//! State transfer over the replica bus, and quarantine.
//!
//! A replica that needs a state transfer (its partition was quarantined, or
//! it reopened awaiting one) asks a peer for chunk 0 of an export at the
//! peer's commit (`RequestStateTransfer` with frontier 0), imports the
//! manifest, then asks for the chunks it still lacks, at most
//! [`CHUNKS_IN_FLIGHT_MAX`] at a time, each answered by one
//! `StateTransferChunk`. When every chunk is staged it installs the import
//! (an atomic swap) and tells consensus. A transfer that makes no progress
//! for [`STALL_TICKS`] asks again; after [`STALLS_PER_SOURCE_MAX`] stalls it
//! starts over from the next peer. A peer keeps at most [`EXPORTS_KEPT_MAX`]
//! exports while it serves them (the oldest is dropped; a requester of a
//! dropped export stalls and starts over).

use std::collections::{BTreeSet, VecDeque};

use bytes::Bytes;
use strand_consensus::Status;
use strand_partition::{Export, ExportConfig, Import, Partition, PartitionError};
use strand_wire::{
    CommandHeader, Message, Msg, RequestStateTransferHeader, StateTransferChunkHeader,
};

use super::Actor;
/// Chunks requested and not yet answered, at most.
pub(super) const CHUNKS_IN_FLIGHT_MAX: usize = 8;

/// Ticks without an answer before the in-flight requests are sent again.
pub(super) const STALL_TICKS: u32 = 50;

/// Stalls before the transfer starts over from the next peer.
pub(super) const STALLS_PER_SOURCE_MAX: u32 = 4;

/// Exports a replica keeps while serving them.
pub(super) const EXPORTS_KEPT_MAX: usize = 2;

/// The receiving side of one transfer.
#[derive(Debug)]
pub(super) struct Incoming {
    /// The replica asked.
    source: u8,
    /// The op the transfer must reach at least.
    op_min: u64,
    /// Set once chunk 0 (the manifest) was imported.
    import: Option<Import>,
    /// The export's frontier, once known.
    frontier_op: u64,
    frontier_offset: u64,
    /// Chunks asked for and not yet answered.
    in_flight: BTreeSet<u32>,
    /// Ticks since the last answer.
    idle_ticks: u32,
    /// Stalls from this source.
    stalls: u32,
}

/// Both sides' state for one group.
#[derive(Debug, Default)]
pub(super) struct Transfers {
    /// Exports being served, oldest first.
    exports: VecDeque<Export>,
    /// The transfer this replica receives, if any.
    incoming: Option<Incoming>,
}

impl Actor {
    // ----- quarantine ----------------------------------------------------------

    /// Moves the partition aside to `.fenced.N` and rebuilds it from the
    /// agreed prefix; the state transfer that completes it follows.
    pub(super) fn quarantine(&mut self, agreed_op: u64) {
        let Some(partition) = self.partition.take() else {
            return;
        };
        match partition.quarantine(agreed_op) {
            Ok((rebuilt, _, quarantined)) => {
                tracing::warn!(
                    agreed_op,
                    fenced = %quarantined.fenced_dir.display(),
                    linked = quarantined.segments_linked,
                    copied = quarantined.segments_copied,
                    "group: partition quarantined"
                );
                self.partition = Some(rebuilt);
            }
            Err(error) => {
                tracing::error!(%error, "group: quarantine failed; reopening the partition");
                self.reopen_partition();
            }
        }
    }

    /// Reopens the partition from its directory after an operation that
    /// consumed it failed; the group stops writing if that fails too.
    fn reopen_partition(&mut self) {
        let disk = self.new_disk();
        match Partition::open(disk, &self.spec.dir, self.partition_config) {
            Ok((partition, _)) => self.partition = Some(partition),
            Err(error) => {
                tracing::error!(%error, "group: cannot reopen the partition; the group stops");
                self.storage_failed = true;
                self.stopping = true;
            }
        }
    }

    // ----- receiving -----------------------------------------------------------

    /// Starts receiving a state transfer from `from` (a `StartStateTransfer`
    /// effect, or a replica that reopened awaiting one).
    pub(super) fn start_transfer(&mut self, from: u8, op_min: u64) {
        let source = self.transfer_source(from);
        tracing::info!(source, op_min, "group: state transfer starts");
        self.transfers.incoming = Some(Incoming {
            source,
            op_min,
            import: None,
            frontier_op: 0,
            frontier_offset: 0,
            in_flight: BTreeSet::from([0]),
            idle_ticks: 0,
            stalls: 0,
        });
        self.request_chunk(source, 0, 0, 0);
    }

    /// `from` if it is another member of the view's membership; otherwise
    /// the next member slot after it (cycling), never this replica.
    fn transfer_source(&self, from: u8) -> u8 {
        let me = self.replica.config().replica;
        let members: Vec<u8> = self
            .replica
            .view_membership()
            .slots
            .iter()
            .filter(|slot| *slot != me)
            .collect();
        members
            .iter()
            .copied()
            .find(|slot| *slot >= from)
            .or_else(|| members.first().copied())
            .unwrap_or(from)
    }

    fn request_chunk(&mut self, to: u8, frontier_op: u64, frontier_offset: u64, chunk: u32) {
        let mut header = RequestStateTransferHeader::new(
            self.shared.config.cluster,
            self.spec.group,
            self.replica.view(),
            self.replica.config().replica,
        );
        header.frontier_op.set(frontier_op);
        header.frontier_offset.set(frontier_offset);
        header.chunk.set(chunk);
        self.send_to_replica(
            to,
            &Message::RequestStateTransfer(Msg::new(header, Bytes::new())),
        );
    }

    /// Per tick: a replica awaiting a transfer with none running starts one;
    /// a stalled one asks again or moves on to the next peer.
    pub(super) fn tick_transfer(&mut self) {
        if self.replica.status() != Status::AwaitingStateTransfer {
            self.transfers.incoming = None;
            return;
        }
        let Some(incoming) = &mut self.transfers.incoming else {
            let primary = self.replica.primary_index();
            self.start_transfer(primary, 0);
            return;
        };
        incoming.idle_ticks += 1;
        if incoming.idle_ticks < STALL_TICKS {
            return;
        }
        incoming.idle_ticks = 0;
        incoming.stalls += 1;
        if incoming.stalls >= STALLS_PER_SOURCE_MAX || incoming.import.is_none() {
            let (next, op_min) = (incoming.source + 1, incoming.op_min);
            if incoming.stalls >= STALLS_PER_SOURCE_MAX {
                self.start_transfer(next, op_min);
            } else {
                let source = incoming.source;
                self.request_chunk(source, 0, 0, 0);
            }
            return;
        }
        let (source, frontier_op, frontier_offset) = (
            incoming.source,
            incoming.frontier_op,
            incoming.frontier_offset,
        );
        let again: Vec<u32> = incoming.in_flight.iter().copied().collect();
        for chunk in again {
            self.request_chunk(source, frontier_op, frontier_offset, chunk);
        }
    }

    /// A chunk of the transfer this replica receives.
    pub(super) fn on_transfer_chunk(&mut self, message: Msg<StateTransferChunkHeader>) {
        let header = *message.header();
        let from = header.prefix.replica;
        let chunk = header.chunk.get();
        let Some(incoming) = &mut self.transfers.incoming else {
            return; // not receiving: a late answer
        };
        if from != incoming.source || !incoming.in_flight.remove(&chunk) {
            return; // another source's, or a duplicate
        }
        incoming.idle_ticks = 0;
        let result = if chunk == 0 {
            self.begin_import(&header, message.body())
        } else {
            self.import_chunk(&header, message.body())
        };
        if let Err(error) = result {
            tracing::warn!(%error, chunk, "group: state transfer chunk refused; starting over");
            let next = self
                .transfers
                .incoming
                .as_ref()
                .map_or(0, |incoming| incoming.source + 1);
            let op_min = self
                .transfers
                .incoming
                .as_ref()
                .map_or(0, |incoming| incoming.op_min);
            self.start_transfer(next, op_min);
            return;
        }
        self.request_more_chunks();
    }

    fn begin_import(
        &mut self,
        header: &StateTransferChunkHeader,
        body: &Bytes,
    ) -> Result<(), PartitionError> {
        let import = self.partition().import_begin(body)?;
        let incoming = self
            .transfers
            .incoming
            .as_mut()
            .expect("receiving a transfer");
        let frontier_op = import.manifest().frontier_op;
        // Op 0 is an empty log: the source has committed nothing yet.
        let frontier_known = frontier_op == 0 || import.manifest().frontier_header.is_some();
        if frontier_op < incoming.op_min || !frontier_known {
            // The source has not committed far enough yet: ask again later.
            tracing::info!(
                frontier_op,
                op_min = incoming.op_min,
                "group: export too short; waiting"
            );
            incoming.in_flight.insert(0);
            return Ok(());
        }
        incoming.frontier_op = header.frontier_op.get();
        incoming.frontier_offset = header.frontier_offset.get();
        tracing::info!(
            frontier_op,
            chunks = import.manifest().chunk_count,
            reused = import.segments_reused(),
            "group: state transfer manifest imported"
        );
        incoming.import = Some(import);
        Ok(())
    }

    fn import_chunk(
        &mut self,
        header: &StateTransferChunkHeader,
        body: &Bytes,
    ) -> Result<(), PartitionError> {
        let mut incoming = self
            .transfers
            .incoming
            .take()
            .expect("receiving a transfer");
        let frontier_matches = header.frontier_op.get() == incoming.frontier_op
            && header.frontier_offset.get() == incoming.frontier_offset;
        let result = match (&mut incoming.import, frontier_matches) {
            (Some(import), true) => {
                let chunk = header.chunk.get();
                self.partition().import_chunk(import, chunk, body)
            }
            _ => Ok(()), // an answer from an earlier export: ignore it
        };
        self.transfers.incoming = Some(incoming);
        result
    }

    /// Keeps up to [`CHUNKS_IN_FLIGHT_MAX`] chunks asked for; installs the
    /// import once nothing is missing.
    fn request_more_chunks(&mut self) {
        let Some(incoming) = &mut self.transfers.incoming else {
            return;
        };
        let Some(import) = &incoming.import else {
            return;
        };
        let needed = import.needed_chunks();
        if needed.is_empty() && incoming.in_flight.is_empty() {
            self.install_transfer();
            return;
        }
        let room = CHUNKS_IN_FLIGHT_MAX.saturating_sub(incoming.in_flight.len());
        let wanted: Vec<u32> = needed
            .into_iter()
            .filter(|chunk| !incoming.in_flight.contains(chunk))
            .take(room)
            .collect();
        incoming.in_flight.extend(wanted.iter().copied());
        let (source, frontier_op, frontier_offset) = (
            incoming.source,
            incoming.frontier_op,
            incoming.frontier_offset,
        );
        for chunk in wanted {
            self.request_chunk(source, frontier_op, frontier_offset, chunk);
        }
    }

    /// Swaps the staged partition in and tells consensus.
    fn install_transfer(&mut self) {
        let Some(incoming) = self.transfers.incoming.take() else {
            return;
        };
        let Some(import) = incoming.import else {
            return;
        };
        let head = import.manifest().frontier_header;
        let cursor_tail = import.manifest().cursor_tail;
        if let Err(error) = self.partition().finish_staging(&import) {
            tracing::warn!(%error, "group: staged transfer refused; starting over");
            self.start_transfer(incoming.source + 1, incoming.op_min);
            return;
        }
        let Some(partition) = self.partition.take() else {
            return;
        };
        match partition.install(import) {
            Ok((installed, recovery)) => {
                self.partition = Some(installed);
                tracing::info!(
                    op = recovery.op,
                    cursor_tail,
                    "group: state transfer installed"
                );
                crate::metrics::state_transfer_installed(&self.label);
                self.replica.on_state_transfer_done(
                    head,
                    cursor_tail,
                    &recovery.headers,
                    &mut self.effects,
                );
            }
            Err(error) => {
                tracing::error!(%error, "group: installing the transfer failed");
                self.reopen_partition();
            }
        }
    }

    // ----- serving -------------------------------------------------------------

    /// A peer asks for a chunk of an export of this partition.
    pub(super) fn serve_transfer(&mut self, request: &RequestStateTransferHeader) {
        if self.replica.status() == Status::AwaitingStateTransfer {
            return; // nothing to give
        }
        let to = request.prefix.replica;
        let chunk = request.chunk.get();
        // The manifest (chunk 0) asked at frontier 0 is taken at this
        // replica's commit; later chunks name the manifest's frontier (0 for
        // an empty export, when nothing had committed).
        let frontier_op = match (request.frontier_op.get(), chunk) {
            (0, 0) => self.replica.commit(),
            (op, _) => op,
        };
        let Some(index) = self.export_at(frontier_op) else {
            return;
        };
        let export = self.transfers.exports[index].clone();
        let body = match self.partition().export_chunk(&export, chunk) {
            Ok(body) => body,
            Err(error) => {
                tracing::warn!(%error, chunk, "group: cannot serve a transfer chunk");
                return;
            }
        };
        let mut header = StateTransferChunkHeader::new(
            self.shared.config.cluster,
            self.spec.group,
            self.replica.view(),
            self.replica.config().replica,
        );
        header.frontier_op.set(export.manifest().frontier_op);
        header
            .frontier_offset
            .set(export.manifest().frontier_offset);
        header.chunk.set(chunk);
        header.chunk_count.set(export.chunk_count());
        self.send_to_replica(to, &Message::StateTransferChunk(Msg::new(header, body)));
    }

    /// The kept export at `frontier_op`, made now if there is none.
    fn export_at(&mut self, frontier_op: u64) -> Option<usize> {
        if let Some(index) = self
            .transfers
            .exports
            .iter()
            .position(|export| export.manifest().frontier_op == frontier_op)
        {
            return Some(index);
        }
        match self
            .partition()
            .export(frontier_op, ExportConfig::default())
        {
            Ok(export) => {
                if self.transfers.exports.len() >= EXPORTS_KEPT_MAX {
                    self.transfers.exports.pop_front();
                }
                self.transfers.exports.push_back(export);
                Some(self.transfers.exports.len() - 1)
            }
            Err(error) => {
                tracing::warn!(%error, frontier_op, "group: cannot export for a state transfer");
                None
            }
        }
    }
}
