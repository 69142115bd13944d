//! State transfer, both ends, inside the host: the storage side of the
//! receiving session ([`crate::transfer::Incoming`] decides which peer,
//! which chunks, stalls and moving on; this file imports what it accepts,
//! installs when it says so and sends its requests) and the serving side
//! (each `RequestStateTransfer` is answered with one `StateTransferChunk` of
//! an export). Frames and ticks drive it; nothing here knows of sockets or
//! clocks, so the simulator runs exactly this.
//!
//! Bounds: a replica keeps at most [`EXPORTS_KEPT_MAX`] exports while it
//! serves them (the oldest is dropped; a requester of a dropped export
//! stalls and starts over).

use std::collections::VecDeque;

use bytes::Bytes;
use strand_consensus::Status;
use strand_partition::{Disk, Export, ExportConfig, Import, PartitionError};
use strand_wire::{
    CommandHeader, Message, Msg, RequestStateTransferHeader, StateTransferChunkHeader,
};

use super::{GroupHost, Output};
use crate::transfer::{Incoming, TransferAction, source_after};

/// Exports a replica keeps while serving them.
pub const EXPORTS_KEPT_MAX: usize = 2;

/// The transfer this replica receives: the session's decisions and the
/// import they concern.
#[derive(Debug)]
struct Receiving {
    session: Incoming,
    /// Set once chunk 0 (the manifest) was imported and taken.
    import: Option<Import>,
}

/// Both sides' state for one group.
#[derive(Debug, Default)]
pub(super) struct Transfers {
    /// Exports being served, oldest first.
    exports: VecDeque<Export>,
    /// The transfer this replica receives, if any.
    incoming: Option<Receiving>,
}

impl<D: Disk> GroupHost<D> {
    // ----- receiving -----------------------------------------------------------

    /// Whether a transfer is being received.
    pub fn receiving_transfer(&self) -> bool {
        self.transfers.incoming.is_some()
    }

    /// Starts receiving a state transfer from `from`, or the next member
    /// after it (a `StartStateTransfer` effect, a replica that reopened
    /// awaiting one, or a session that gave up on its source).
    pub(super) fn start_transfer(&mut self, from: u8, op_min: u64, out: &mut Vec<Output>) {
        assert_eq!(
            self.replica.status(),
            Status::AwaitingStateTransfer,
            "a state transfer for a replica that awaits none"
        );
        let me = self.replica.config().replica;
        let source = source_after(self.replica.transfer_sources().iter(), me, from);
        tracing::info!(source, op_min, "host: state transfer starts");
        let mut actions = Vec::new();
        let session = Incoming::start(source, op_min, &mut actions);
        self.transfers.incoming = Some(Receiving {
            session,
            import: None,
        });
        self.run_transfer_actions(actions, out);
    }

    /// Carries out what the receiving session asked for.
    fn run_transfer_actions(&mut self, actions: Vec<TransferAction>, out: &mut Vec<Output>) {
        for action in actions {
            match action {
                TransferAction::Request {
                    to,
                    frontier_op,
                    frontier_offset,
                    chunk,
                } => self.request_chunk(to, frontier_op, frontier_offset, chunk, out),
                TransferAction::Install => self.install_transfer(out),
                TransferAction::StartOver { from } => {
                    let op_min = self
                        .transfers
                        .incoming
                        .as_ref()
                        .map_or(0, |receiving| receiving.session.op_min());
                    self.start_transfer(from, op_min, out);
                    return; // the old session's other actions are moot
                }
            }
        }
    }

    fn request_chunk(
        &mut self,
        to: u8,
        frontier_op: u64,
        frontier_offset: u64,
        chunk: u32,
        out: &mut Vec<Output>,
    ) {
        let mut header = RequestStateTransferHeader::new(
            self.cluster,
            self.group,
            self.replica.view(),
            self.replica.config().replica,
        );
        header.frontier_op.set(frontier_op);
        header.frontier_offset.set(frontier_offset);
        header.chunk.set(chunk);
        out.push(Output::Send {
            to,
            message: Message::RequestStateTransfer(Msg::new(header, Bytes::new())),
        });
    }

    /// Per tick: a replica awaiting a transfer with none running starts one
    /// from its view's primary; a running one ticks its session.
    pub(super) fn tick_transfer(&mut self, out: &mut Vec<Output>) {
        if self.replica.status() != Status::AwaitingStateTransfer {
            self.transfers.incoming = None;
            return;
        }
        let Some(receiving) = &mut self.transfers.incoming else {
            let primary = self.replica.primary_index();
            self.start_transfer(primary, 0, out);
            return;
        };
        let mut actions = Vec::new();
        receiving.session.on_tick(&mut actions);
        self.run_transfer_actions(actions, out);
    }

    /// A chunk of the transfer this replica receives.
    pub(super) fn on_transfer_chunk(
        &mut self,
        message: Msg<StateTransferChunkHeader>,
        out: &mut Vec<Output>,
    ) {
        let header = *message.header();
        let chunk = header.chunk.get();
        if self.replica.status() != Status::AwaitingStateTransfer {
            // The replica stopped waiting (it retired, say) since the
            // session started: nothing to install any more.
            self.transfers.incoming = None;
            return;
        }
        let Some(receiving) = &mut self.transfers.incoming else {
            return; // not receiving: a late answer
        };
        if !receiving.session.accept(header.prefix.replica, chunk) {
            return; // another source's, or a duplicate
        }
        let result = if chunk == 0 {
            self.begin_import(message.body())
        } else {
            self.import_chunk(&header, message.body())
        };
        let Some(receiving) = &mut self.transfers.incoming else {
            return;
        };
        let mut actions = Vec::new();
        match result {
            Err(error) => {
                tracing::warn!(%error, chunk, "host: state transfer chunk refused; starting over");
                receiving.session.on_refused(&mut actions);
            }
            Ok(()) => {
                let needed = receiving
                    .import
                    .as_ref()
                    .map(Import::needed_chunks)
                    .unwrap_or_default();
                receiving.session.request_more(&needed, &mut actions);
            }
        }
        self.run_transfer_actions(actions, out);
    }

    /// Imports a manifest; the session decides whether it reaches far enough.
    fn begin_import(&mut self, body: &Bytes) -> Result<(), PartitionError> {
        assert!(
            self.transfers
                .incoming
                .as_ref()
                .is_some_and(|receiving| receiving.import.is_none()),
            "a manifest imported outside a session, or twice in one"
        );
        let import = self.partition_mut().import_begin(body)?;
        let receiving = self
            .transfers
            .incoming
            .as_mut()
            .expect("receiving a transfer");
        let manifest = import.manifest();
        // Op 0 is an empty log: the source has committed nothing yet.
        let frontier_known = manifest.frontier_op == 0 || manifest.frontier_header.is_some();
        let (frontier_op, frontier_offset) = (manifest.frontier_op, manifest.frontier_offset);
        if !receiving
            .session
            .on_manifest(frontier_op, frontier_offset, frontier_known)
        {
            // The source has not committed far enough yet: asked again later.
            tracing::info!(
                frontier_op,
                op_min = receiving.session.op_min(),
                "host: export too short; waiting"
            );
            return Ok(());
        }
        tracing::info!(
            frontier_op,
            chunks = import.manifest().chunk_count,
            reused = import.segments_reused(),
            "host: state transfer manifest imported"
        );
        receiving.import = Some(import);
        Ok(())
    }

    fn import_chunk(
        &mut self,
        header: &StateTransferChunkHeader,
        body: &Bytes,
    ) -> Result<(), PartitionError> {
        let mut receiving = self
            .transfers
            .incoming
            .take()
            .expect("receiving a transfer");
        let frontier_matches = receiving
            .session
            .frontier_matches(header.frontier_op.get(), header.frontier_offset.get());
        let result = match (&mut receiving.import, frontier_matches) {
            (Some(import), true) => {
                let chunk = header.chunk.get();
                // The session accepts only chunks it asked for, and it asks
                // only for those the import lacks.
                assert!(
                    chunk >= 1 && chunk < import.manifest().chunk_count,
                    "chunk {chunk} outside the manifest's {} chunks",
                    import.manifest().chunk_count
                );
                self.partition_mut().import_chunk(import, chunk, body)
            }
            _ => Ok(()), // an answer from an earlier export: ignore it
        };
        self.transfers.incoming = Some(receiving);
        result
    }

    /// Swaps the staged partition in and tells consensus.
    fn install_transfer(&mut self, out: &mut Vec<Output>) {
        assert_eq!(
            self.replica.status(),
            Status::AwaitingStateTransfer,
            "installing a state transfer nobody awaits"
        );
        let Some(receiving) = self.transfers.incoming.take() else {
            return;
        };
        let Some(import) = receiving.import else {
            return;
        };
        let head = import.manifest().frontier_header;
        let cursor_tail = import.manifest().cursor_tail;
        let history_starts = crate::convert::state_of(&import.manifest().durable).history_starts;
        if let Err(error) = self.partition_mut().finish_staging(&import) {
            tracing::warn!(%error, "host: staged transfer refused; starting over");
            let mut actions = Vec::new();
            receiving.session.on_refused(&mut actions);
            self.transfers.incoming = Some(Receiving {
                session: receiving.session,
                import: None,
            });
            self.run_transfer_actions(actions, out);
            return;
        }
        let Some(partition) = self.partition.take() else {
            return;
        };
        #[cfg(feature = "mutations")]
        let installed = if self.mutations.install_unmarked {
            partition.install_unmarked(import)
        } else {
            partition.install(import)
        };
        #[cfg(not(feature = "mutations"))]
        let installed = partition.install(import);
        match installed {
            Ok((installed, recovery)) => {
                self.partition = Some(installed);
                tracing::info!(
                    op = recovery.op,
                    cursor_tail,
                    "host: state transfer installed"
                );
                out.push(Output::TransferInstalled { op: recovery.op });
                let client_table =
                    crate::convert::readable_client_table(&recovery.durable.client_table);
                self.replica.on_state_transfer_done(
                    head,
                    cursor_tail,
                    &recovery.headers,
                    &client_table,
                    &history_starts,
                    &mut self.effects,
                );
                self.rebuild_catalog_after_transfer();
                self.note_log_start();
            }
            Err(failed) => self.after_failed_swap("install the state transfer", failed, out),
        }
    }

    /// Both ends' own state: a transfer is received only while the replica
    /// awaits it (or until the next tick notices it retired), its session
    /// holds its bounds, and the exports kept are bounded and each at its
    /// own frontier.
    pub(super) fn assert_transfer_invariants(&self) {
        if let Some(receiving) = &self.transfers.incoming {
            assert!(
                matches!(
                    self.replica.status(),
                    Status::AwaitingStateTransfer | Status::Retired
                ),
                "receiving a state transfer in status {:?}",
                self.replica.status()
            );
            receiving.session.assert_invariants();
        }
        let exports = &self.transfers.exports;
        assert!(
            exports.len() <= EXPORTS_KEPT_MAX,
            "{} exports kept",
            exports.len()
        );
        debug_assert!(
            exports.iter().enumerate().all(|(index, export)| {
                exports
                    .iter()
                    .skip(index + 1)
                    .all(|other| other.manifest().frontier_op != export.manifest().frontier_op)
            }),
            "two exports kept at one frontier"
        );
    }

    // ----- serving -------------------------------------------------------------

    /// A peer asks for a chunk of an export of this partition.
    pub(super) fn serve_transfer(
        &mut self,
        request: &RequestStateTransferHeader,
        out: &mut Vec<Output>,
    ) {
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
        let body = match self.partition_mut().export_chunk(&export, chunk) {
            Ok(body) => body,
            Err(error) => {
                tracing::warn!(%error, chunk, "host: cannot serve a transfer chunk");
                return;
            }
        };
        let mut header = StateTransferChunkHeader::new(
            self.cluster,
            self.group,
            self.replica.view(),
            self.replica.config().replica,
        );
        header.frontier_op.set(export.manifest().frontier_op);
        header
            .frontier_offset
            .set(export.manifest().frontier_offset);
        header.chunk.set(chunk);
        header.chunk_count.set(export.chunk_count());
        out.push(Output::Send {
            to,
            message: Message::StateTransferChunk(Msg::new(header, body)),
        });
    }

    /// The kept export at `frontier_op`, made now if there is none. Kept
    /// exports that list segments retention has since removed are dropped
    /// first: their requesters find a new manifest, start their import over
    /// and ask again.
    fn export_at(&mut self, frontier_op: u64) -> Option<usize> {
        let head_op = self.partition_view().head_op();
        self.transfers
            .exports
            .retain(|export| export.manifest().head_op >= head_op);
        if let Some(index) = self
            .transfers
            .exports
            .iter()
            .position(|export| export.manifest().frontier_op == frontier_op)
        {
            return Some(index);
        }
        // The table through this replica's commit, which is at or past the
        // frontier (one asked at 0 is taken at the commit).
        let client_table = bytes::Bytes::from(self.replica.client_table().encode());
        match self
            .partition_mut()
            .export(frontier_op, ExportConfig::default(), client_table)
        {
            Ok(export) => {
                // Later chunks find it by the frontier they were asked at.
                assert_eq!(
                    export.manifest().frontier_op,
                    frontier_op,
                    "an export taken at another frontier than asked"
                );
                if self.transfers.exports.len() >= EXPORTS_KEPT_MAX {
                    self.transfers.exports.pop_front();
                }
                self.transfers.exports.push_back(export);
                Some(self.transfers.exports.len() - 1)
            }
            Err(error) => {
                tracing::warn!(%error, frontier_op, "host: cannot export for a state transfer");
                None
            }
        }
    }
}
