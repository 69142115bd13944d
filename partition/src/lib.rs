//! # strand-partition: one partition replica's storage
//!
//! Everything a partition replica keeps on disk under
//! `<data>/partitions/<stream>/<topic>/<partition>/`: the record log (segment
//! files of prepares written through the node's WAL, with sparse indexes), the
//! cursor event log and snapshot, the superblock (view, log_view, commit,
//! history starts, clean-shutdown mark, policies), and the storage side of the
//! failover rules: the cut to a history start, quarantine to `<dir>.fenced.N`,
//! and state transfer. It executes consensus's storage effects and reports, at
//! open, what consensus needs to start (see [`Recovery`]); it does not depend
//! on consensus and holds no protocol decision of its own.
//!
//! Modules, in reading order:
//!
//! | module | owns |
//! |---|---|
//! | [`layout`] | every path and file name |
//! | [`error`] | [`PartitionError`] |
//! | [`disk`] | the [`Disk`] trait: real files over the threaded WAL ([`FileDisk`]) with a node's bounded read descriptors ([`ReadHandles`]), the WAL's in-memory crash-modelling disk ([`MemoryDisk`]) |
//! | `io` | naming WAL requests, sorting their completions |
//! | [`superblock`] | the two-copy checksummed superblock |
//! | `start_codec` | history starts as the superblock and the transfer manifest write them |
//! | `entry`, `scan` | a log entry (one prepare per frame); scanning a segment past its faults |
//! | [`index`] | the sparse segment index |
//! | `record_log` | segments: append, roll, truncate, retention; the log's invariants |
//! | `log_reads` | reads by op, headers, fetch by offset ([`FetchedBatch`]) |
//! | `log_rewrite` | rewriting damaged entries in place |
//! | `log_recovery` | opening the log: torn tails vs faults, lost ops, index rebuilds |
//! | [`durable_mark`] | the highest op a `persisted` log made durable, appended beside each append in files of their own: durable completions wait for it, open finds a tail the disk lost without a trace |
//! | `cursors` | cursor event log (stores and tombstones), map, compaction |
//! | `cursor_snapshot` | the cursor snapshot file, in bounded pieces, read whole or not at all |
//! | `machine_snapshot` | the state machine's image after an op (the metadata plane's catalog), two alternating copies, so the log below can go |
//! | [`recovery`] | the open report, [`Recovery`] |
//! | `partition` | [`Partition`]: open, close, reads |
//! | `unsynced` | after a crash, writing again what a failed sync may have left in the page cache only |
//! | `writes` | prepares, `PersistState`, cursor appends, retention; [`Completed`] |
//! | `cut` | the cut: the one way a log's tail goes (reference A's cut to a history start, a repair's drop) |
//! | `quarantine` | fencing to `<dir>.fenced.N` and rebuilding from the agreed prefix |
//! | [`transfer`] | state-transfer export, import, atomic install |
//! | [`fixtures`] | valid prepare chains for tests, benches and the simulator |
//! | [`faults`] | damaging a stopped node's files as failing disks do (tests, `strand-disk-fault`) |
//! | `fuzzing` | (feature `fuzzing`) the on-disk decoders for the fuzz targets and proptests |
//!
//! Driving it from consensus's effects (the server and the simulator):
//!
//! | effect | call | then report |
//! |---|---|---|
//! | `WritePrepare { prepare }` | [`Partition::write_prepare`] | `on_write(op, checksum, Queued)` on `Ok` (or `Durable` when [`WriteAccepted::stage`] says so); `Durable` on [`Completed::Prepare`] |
//! | `Cut { op, cursor_tail }` | [`Partition::cut`] (durable on return) | `on_truncated(op)` |
//! | `PersistState { state, sequence }` | [`Partition::persist_state`] | `on_state_persisted(sequence)` on [`Completed::StatePersisted`] |
//! | `ServePrepare { to, op, checksum }` | [`Partition::read_prepare`] | send it if its checksum matches (or, for 0, the op is committed) |
//! | `ServeHeaders { to, op_min, op_max }` | [`Partition::read_headers`] | send them as a Headers frame |
//! | `AppendCursors { cursor_base, event_count, events }` | [`Partition::append_cursors`] | `on_cursors_written(end, Queued)` on `Ok`; `Durable` on [`Completed::Cursors`] |
//! | `ShipCursors { to, cursor_from }` | [`Partition::read_cursor_events`] up to [`Partition::cursor_durable_tail`] | send a Cursors frame |
//! | `StartStateTransfer { from, op_min }` | peer: [`Partition::export`] + [`Partition::export_chunk`]; here: [`Partition::import_begin`], [`Partition::import_chunk`], [`Partition::install`] | `on_state_transfer_done(frontier header, cursor_tail)` |
//! | `Quarantine { agreed_op }` | [`Partition::quarantine`] | (a state transfer follows) |
//!
//! Asynchronous answers come from [`Partition::poll`] / [`Partition::wait`];
//! everything else is durable when it returns. At open, [`Recovery`] carries
//! what consensus's `Recovered` needs, field for field.
//!
//! Invariants that matter most:
//! - **Nothing durable is lost quietly.** Open cuts only a torn tail of the
//!   last segment, and a torn tail holding data (which bytes cannot tell from
//!   a damaged, acked last entry) only after the superblock durably marks its
//!   ops as maybe acked; so does a reopen after a failed write or sync, for
//!   the tail past the durable checkpoint. Damage anywhere else, ops missing
//!   from a sealed segment, and ops lost below the superblock's durable
//!   checkpoint or the durable mark are reported as faulty ops, never
//!   dropped. A `persisted` prepare is reported durable only once the mark
//!   covers it.
//! - **Superblock order.** An unclean open makes the copy it chose durable
//!   before it writes the other.
//! - **Order of durable steps.** A sealed segment is synced before its
//!   successor gets a byte; a superblock that stops claiming ops (truncation,
//!   retention) is written before the files change; a quarantined copy and the
//!   files hard-linked from it are never written again; a quarantine's
//!   rebuild and an import are complete before their swap, and a swap a
//!   crash interrupted completes on the next open.

pub mod disk;
pub mod error;
pub mod faults;
pub mod fixtures;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod index;
pub mod layout;
pub mod recovery;
mod start_codec;
pub mod superblock;
pub mod transfer;

mod cursor_snapshot;
mod cursors;
mod cut;
pub mod durable_mark;
mod entry;
mod io;
mod log_reads;
mod log_recovery;
mod log_rewrite;
mod machine_snapshot;
mod partition;
mod quarantine;
mod record_log;
mod scan;
mod unsynced;
mod writes;

pub use cursor_snapshot::SNAPSHOT_PIECE_BYTES_MAX;
pub use cursors::CursorFindings;
pub use cut::{CutOutcome, CutPoint};
pub use disk::{Disk, FileDisk, MemoryDisk, ReadHandles, WaitError};
pub use error::{FailedSwap, PartitionError};
pub use log_reads::FetchedBatch;
pub use log_recovery::{IndexRebuild, SegmentDamage};
pub use log_rewrite::REWRITE_DOES_NOT_FIT;
pub use machine_snapshot::{MACHINE_SNAPSHOT_BYTES_MAX, MachineSnapshot};
pub use partition::{
    EntryLocation, HEADERS_COMMITTED_MAX_DEFAULT, OpenMutations, Partition, PartitionConfig,
    partition_present,
};
pub use quarantine::{Quarantined, finish_interrupted_fence, next_fenced_number};
pub use record_log::{LogConfig, RetentionPolicy};
pub use recovery::Recovery;
pub use superblock::{DurableFields, HistoryStart, Superblock};
pub use transfer::{Export, ExportConfig, Import, Manifest};
pub use writes::{Completed, RetentionOutcome, WriteAccepted, WriteStage};
