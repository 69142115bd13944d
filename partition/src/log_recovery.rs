//! Opening the record log: read every segment, find what is valid, what is
//! damaged and what is missing, and rebuild the in-memory log from it.
//!
//! The rules, in the order they are applied:
//! 1. Segments below the superblock's retained head are leftovers of an
//!    interrupted retention: removed. Empty trailing segments nobody listed
//!    (a crash right after a roll) are removed too; one holding a byte other
//!    than zero but no readable entry is kept: its only entries may have
//!    been durable and acked and damaged since, a torn tail (rule 3).
//! 2. Every segment is scanned whole ([`crate::scan`]). A damaged region
//!    between valid entries is a **fault**: the ops it held (counted from the
//!    ops around it) are reported faulty, nothing after it is cut, and the
//!    region is kept for the ops' rewrite in place.
//! 3. Only the last segment can have a **torn tail** (sealed segments were
//!    synced before their successor got a byte): it is cut. A sealed segment
//!    shorter than the superblock says, or ending in damage, lost ops: faulty.
//!    Bytes alone cannot tell a write a crash cut short from a durable, acked
//!    last entry that was damaged since, so a torn tail holding any byte but
//!    zeros is cut only after the superblock durably says that the replica
//!    may have acked the ops it held (`maybe_acked_op`): the replica then
//!    never counts them as "never had" in a view change (its log is
//!    untrusted until it adopts a view) and gets them back from its peers.
//! 4. Ops above the log's end but at or below `op_checkpoint` (the superblock's
//!    durable head) were durable and are gone: faulty, never silently lost.
//! 5. Ops must follow each other, chain by checksum, and keep record offsets
//!    contiguous, and a segment is named for the record offset its first op
//!    starts at; anything else is [`PartitionError::LogInconsistent`]. So is
//!    a segment without a readable entry followed by one whose first entry is
//!    unreadable, when the superblock does not list it: nothing says which
//!    ops the second holds.
//! 6. Each segment's sparse index is compared with the one its entries imply
//!    and rebuilt when it differs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use strand_wire::{CommandHeader, PrepareHeader};

use crate::disk::Disk;
use crate::entry::{EntryMeta, carries_records, record_offset_base};
use crate::error::PartitionError;
use crate::index::{IndexDamage, decode_index, expected_index};
use crate::io::Io;
use crate::layout::{
    file_name, index_path, parse_index_name, parse_segment_name, records_dir, segment_path,
};
use crate::partition::{OpenMutations, PartitionConfig};
use crate::record_log::{
    Gap, LogConfig, RecordLog, Segment, remove_segment_files, write_index_file,
};
use crate::scan::{Item, ScannedEntry, SegmentScan, scan_segment};
use crate::superblock::{SealedSegment, Superblock};

/// A damaged region found at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentDamage {
    /// The segment (its first offset).
    pub segment_first_offset: u64,
    /// First damaged byte.
    pub byte_start: u64,
    /// One past the last.
    pub byte_end: u64,
    /// The ops whose entries were there (never empty: bytes between two
    /// consecutive entries make the log inconsistent).
    pub ops: std::ops::RangeInclusive<u64>,
}

/// An index that was rebuilt at open, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRebuild {
    /// The segment (its first offset).
    pub segment_first_offset: u64,
    /// What was wrong with the index file.
    pub damage: IndexDamage,
}

/// What opening the log found.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogFindings {
    pub headers: Vec<PrepareHeader>,
    pub torn_bytes_cut: u64,
    /// The first op of a torn tail that held data (possibly a damaged,
    /// acked entry): marked as maybe acked before the cut.
    pub damaged_tail_from: Option<u64>,
    /// The first op cut after an earlier failed write or sync.
    pub unsynced_dropped_from: Option<u64>,
    /// The first op past the log's end that the durable mark names.
    pub lost_tail_from: Option<u64>,
    pub damage: Vec<SegmentDamage>,
    pub indexes_rebuilt: Vec<IndexRebuild>,
    pub leftovers_removed: Vec<PathBuf>,
}

/// One segment as found on disk.
struct Found {
    first_offset: u64,
    listed: Option<SealedSegment>,
    scan: SegmentScan,
    file_len: Option<u64>,
}

impl Found {
    /// The first op the segment holds, when the disk says.
    fn known_first_op(&self) -> Option<u64> {
        if let Some(listed) = self.listed {
            return Some(listed.first_op);
        }
        match self.scan.items.first() {
            Some(Item::Entry(entry)) if entry.position == 0 => Some(entry.header.op.get()),
            Some(Item::Fault(fault)) if fault.start == 0 => {
                fault.readable.first().map(|entry| entry.header.op.get())
            }
            _ => None,
        }
    }
}

/// The last headers seen: every one above `commit` and `committed_keep` at or below.
struct HeaderWindow {
    commit: u64,
    committed_keep: usize,
    committed: usize,
    headers: VecDeque<PrepareHeader>,
}

impl HeaderWindow {
    fn push(&mut self, header: PrepareHeader) {
        if header.op.get() <= self.commit {
            self.committed += 1;
        }
        self.headers.push_back(header);
        while self.committed > self.committed_keep {
            let front = self
                .headers
                .pop_front()
                .expect("committed headers are in the window");
            assert!(front.op.get() <= self.commit);
            self.committed -= 1;
        }
    }
}

/// The walk's running state: what the next op and offset must be.
struct Walk {
    dir: PathBuf,
    expected_op: u64,
    expected_offset: u64,
    offset_known: bool,
    previous_checksum: Option<u32>,
    faulty: BTreeSet<u64>,
    gaps: Vec<Gap>,
    window: HeaderWindow,
    findings: LogFindings,
    /// A mutation run's switch: a damaged tail is cut as a plain torn one.
    trust_damaged_tail: bool,
    /// A mutation run's switch: the durable mark is not read.
    ignore_durable_mark: bool,
}

/// Walks every segment found, in order; creates the first (empty) segment
/// at the superblock's head when none holds anything.
fn walk_segments<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    walk: &mut Walk,
    founds: &[Found],
    superblock: &mut Superblock,
) -> Result<Vec<Segment>, PartitionError> {
    let mut segments = Vec::with_capacity(founds.len().max(1));
    for (index, found) in founds.iter().enumerate() {
        let is_last = index + 1 == founds.len();
        let next = founds.get(index + 1);
        segments.push(walk_segment(io, walk, found, is_last, next, superblock)?);
    }
    if segments.is_empty() {
        let path = segment_path(dir, superblock.head_offset);
        io.disk
            .write_at(&path, 0, &[])
            .map_err(|error| PartitionError::io(&path, "create a segment", &error))?;
        segments.push(Segment::empty(superblock.head_offset, superblock.head_op));
    }
    assert!(!segments.is_empty(), "a log has a segment");
    Ok(segments)
}

/// Ops the superblock's checkpoint or the durable mark vouch for that the
/// log (ending at `op`) lacks: lost (a tail the disk dropped without a
/// trace), never "never had": each counts as damaged.
fn mark_lost_tail<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    superblock: &Superblock,
    op: u64,
    walk: &mut Walk,
) {
    let marked = if walk.ignore_durable_mark {
        0
    } else {
        crate::durable_mark::read(&mut io.disk, dir).map_or(0, |slot| slot.op)
    };
    let vouched = superblock.op_checkpoint.max(marked);
    if vouched > op {
        tracing::error!(
            op,
            marked,
            checkpoint = superblock.op_checkpoint,
            "partition: the log ends below what its checkpoint or durable mark vouch for; the missing ops may have been acknowledged and are repaired from peers"
        );
        walk.findings.lost_tail_from = Some(op + 1);
    }
    for missing in op + 1..=vouched {
        walk.faulty.insert(missing);
    }
}

/// Opens the record log of the partition at `dir` described by `superblock`
/// (rewritten, durably, when a damaged tail must be marked before its cut).
pub(crate) fn recover_log<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    superblock: &mut Superblock,
    partition_config: PartitionConfig,
    mutations: OpenMutations,
) -> Result<(RecordLog, LogFindings), PartitionError> {
    let config = partition_config.log;
    let records = records_dir(dir);
    io.disk
        .create_dir_all(&records)
        .map_err(|error| PartitionError::io(&records, "create the records directory", &error))?;
    let mut walk = Walk {
        dir: dir.to_path_buf(),
        expected_op: superblock.head_op,
        expected_offset: superblock.head_offset,
        offset_known: true,
        previous_checksum: initial_parent(superblock),
        faulty: BTreeSet::new(),
        gaps: Vec::new(),
        window: HeaderWindow {
            commit: superblock.durable.commit,
            committed_keep: partition_config.headers_committed_max,
            committed: 0,
            headers: VecDeque::new(),
        },
        findings: LogFindings::default(),
        trust_damaged_tail: cfg!(feature = "mutations") && mutations.trust_damaged_tail,
        ignore_durable_mark: cfg!(feature = "mutations") && mutations.ignore_durable_mark,
    };
    let mut founds = find_segments(io, dir, superblock, &mut walk.findings)?;
    if partition_config.drop_unsynced {
        walk.findings.unsynced_dropped_from = drop_unsynced_tail(io, dir, superblock, &mut founds)?;
        remove_empty_trailing(io, dir, &mut founds)?;
    }
    let mut segments = walk_segments(io, dir, &mut walk, &founds, superblock)?;
    let op = segments.last().expect("never empty").last_op();
    mark_lost_tail(io, dir, superblock, op, &mut walk);
    for segment in &mut segments {
        check_index(io, dir, config, segment, &mut walk.findings)?;
    }
    let mut log = RecordLog {
        dir: dir.to_path_buf(),
        config,
        segments,
        active: None,
        head_op: superblock.head_op,
        head_offset: superblock.head_offset,
        head_parent_checksum: superblock.head_parent_checksum,
        op,
        offset_end: walk.expected_offset,
        durable_op: op,
        faulty: walk.faulty,
        gaps: walk.gaps,
        in_flight: VecDeque::new(),
        failure: None,
        refill_intent: None,
    };
    log.assert_invariants();
    log.reopen_active(io)?;
    let mut findings = walk.findings;
    findings.headers = walk.window.headers.into_iter().collect();
    Ok((log, findings))
}

/// The checksum op `head_op` must name as its parent, when known.
fn initial_parent(superblock: &Superblock) -> Option<u32> {
    match (superblock.head_op, superblock.head_parent_checksum) {
        (1, _) => Some(0),
        (_, 0) => None,
        (_, checksum) => Some(checksum),
    }
}

/// The first offsets of the segments in the records directory, after
/// removing what a crash left half done: temp files, and an index whose
/// segment is gone (it would block a new segment at its offset).
fn segment_offsets<D: Disk>(io: &mut Io<D>, dir: &Path) -> Result<BTreeSet<u64>, PartitionError> {
    let records = records_dir(dir);
    let names = io
        .disk
        .list_dir(&records)
        .map_err(|error| PartitionError::io(&records, "list segments", &error))?;
    for name in names.iter().filter(|name| name.ends_with(".tmp")) {
        let path = records.join(name);
        io.disk
            .remove_file(&path)
            .map_err(|error| PartitionError::io(&path, "remove a temp file", &error))?;
    }
    let offsets: BTreeSet<u64> = names
        .iter()
        .filter_map(|name| parse_segment_name(name))
        .collect();
    for name in &names {
        let Some(offset) = parse_index_name(name) else {
            continue;
        };
        if !offsets.contains(&offset) {
            let path = records.join(name);
            tracing::info!(path = %path.display(), "partition: removing an index without its segment");
            io.disk
                .remove_file(&path)
                .map_err(|error| PartitionError::io(&path, "remove an orphan index", &error))?;
        }
    }
    Ok(offsets)
}

/// Lists, cleans up and scans the segment files.
fn find_segments<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    superblock: &Superblock,
    findings: &mut LogFindings,
) -> Result<Vec<Found>, PartitionError> {
    let mut offsets = segment_offsets(io, dir)?;
    for &leftover in offsets
        .iter()
        .filter(|&&offset| offset < superblock.head_offset)
    {
        tracing::info!(
            first_offset = leftover,
            "partition: removing a segment retention left behind"
        );
        findings.leftovers_removed.push(segment_path(dir, leftover));
        remove_segment_files(io, dir, leftover)?;
    }
    offsets.retain(|&offset| offset >= superblock.head_offset);
    let listed: BTreeMap<u64, SealedSegment> = superblock
        .sealed_segments
        .iter()
        .filter(|segment| segment.first_offset >= superblock.head_offset)
        .map(|segment| (segment.first_offset, *segment))
        .collect();
    offsets.extend(listed.keys());
    let mut founds = Vec::with_capacity(offsets.len());
    for first_offset in offsets {
        let path = segment_path(dir, first_offset);
        let bytes = io
            .disk
            .read_file(&path)
            .map_err(|error| PartitionError::io(&path, "read a segment", &error))?;
        let file_len = bytes.as_ref().map(|bytes| bytes.len() as u64);
        let scan = scan_segment(bytes.as_deref().unwrap_or(&[]));
        founds.push(Found {
            first_offset,
            listed: listed.get(&first_offset).copied(),
            scan,
            file_len,
        });
    }
    remove_empty_trailing(io, dir, &mut founds)?;
    Ok(founds)
}

/// Removes trailing segments nobody listed that hold nothing (a crash right
/// after a roll, or a cut of unsynced entries that emptied the last one):
/// the log ends before them, and a segment is named by the record offset
/// its first op starts at, which an empty one would claim for ops it never
/// held.
fn remove_empty_trailing<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    founds: &mut Vec<Found>,
) -> Result<(), PartitionError> {
    while founds.len() > 1 {
        let last = founds.last().expect("len > 1");
        if last.listed.is_some() || !last.scan.is_empty() || last.scan.torn_has_data {
            break;
        }
        tracing::info!(
            first_offset = last.first_offset,
            "partition: removing an empty trailing segment"
        );
        remove_segment_files(io, dir, last.first_offset)?;
        founds.pop();
    }
    Ok(())
}

/// Walks one segment's items, assigning ops and recording damage.
fn walk_segment<D: Disk>(
    io: &mut Io<D>,
    walk: &mut Walk,
    found: &Found,
    is_last: bool,
    next: Option<&Found>,
    superblock: &mut Superblock,
) -> Result<Segment, PartitionError> {
    let first_op = found
        .listed
        .map_or(walk.expected_op, |listed| listed.first_op);
    if first_op != walk.expected_op {
        return Err(PartitionError::LogInconsistent {
            op: walk.expected_op,
            reason: format!(
                "segment {} starts at op {first_op}, the log continues at op {}",
                found.first_offset, walk.expected_op
            ),
        });
    }
    if walk.offset_known && found.first_offset != walk.expected_offset {
        return Err(PartitionError::LogInconsistent {
            op: first_op,
            reason: format!(
                "segment {} is named for records from offset {}, the log's records end at {}",
                found.first_offset, found.first_offset, walk.expected_offset
            ),
        });
    }
    let mut segment = Segment::empty(found.first_offset, first_op);
    let items = &found.scan.items;
    for (at, item) in items.iter().enumerate() {
        match item {
            Item::Entry(entry) => walk_entry(walk, &mut segment, entry)?,
            Item::Fault(fault) => {
                let Some(Item::Entry(following)) = items.get(at + 1) else {
                    unreachable!("the scan merges faults and ends them at a valid entry");
                };
                let readable = &fault.readable;
                let until = following.header.op.get();
                let offset_end = record_offset_base(&following.header);
                walk_damaged(
                    walk,
                    &mut segment,
                    (fault.start, fault.end),
                    until,
                    offset_end,
                    readable,
                )?;
            }
        }
    }
    walk_tail(io, walk, &mut segment, found, (is_last, next), superblock)?;
    Ok(segment)
}

/// One valid entry: it must be the expected op, chain, and continue offsets.
fn walk_entry(
    walk: &mut Walk,
    segment: &mut Segment,
    entry: &ScannedEntry,
) -> Result<(), PartitionError> {
    let header = &entry.header;
    let op = header.op.get();
    let inconsistent = |reason: String| PartitionError::LogInconsistent { op, reason };
    if op != walk.expected_op {
        return Err(inconsistent(format!(
            "found op {op} where op {} belongs",
            walk.expected_op
        )));
    }
    if let Some(parent) = walk.previous_checksum {
        if header.parent.get() != parent {
            return Err(inconsistent(format!(
                "parent {:#010x} does not chain to {parent:#010x}",
                header.parent.get()
            )));
        }
    }
    if carries_records(header)
        && walk.offset_known
        && header.offset_base.get() != walk.expected_offset
    {
        return Err(inconsistent(format!(
            "records start at {}, the log's records end at {}",
            header.offset_base.get(),
            walk.expected_offset
        )));
    }
    let meta = EntryMeta::of(header, entry.position, walk.expected_offset);
    segment.entries.push(meta);
    segment.len = meta.end();
    walk.expected_op += 1;
    walk.expected_offset = meta.offset_end;
    walk.offset_known = true;
    walk.previous_checksum = Some(header.checksum());
    walk.window.push(*header);
    Ok(())
}

/// The entries of the damaged ops `first_op..until`, each marked damaged
/// and faulty. A damaged entry whose header is readable keeps its own
/// records' range (a truncation right after it needs it); an unreadable one
/// spans up to the next readable one's records, or the run's end.
fn push_damaged_entries(
    walk: &mut Walk,
    segment: &mut Segment,
    (first_op, until): (u64, u64),
    start: u64,
    offset_end: u64,
    readable: &[ScannedEntry],
) {
    assert!(first_op < until, "a damaged run holds an op");
    let mut records_at = walk.expected_offset;
    for op in first_op..until {
        let known = readable.iter().find(|entry| entry.header.op.get() == op);
        let mut meta = match known {
            Some(entry) => {
                walk.window.push(entry.header);
                EntryMeta::of(&entry.header, entry.position, records_at)
            }
            None => {
                let records_end = readable
                    .iter()
                    .find(|entry| entry.header.op.get() > op && carries_records(&entry.header))
                    .map_or(offset_end, |entry| record_offset_base(&entry.header));
                EntryMeta {
                    position: start,
                    frame_len: 0,
                    checksum: 0,
                    offset_base: records_at,
                    offset_end: records_end.max(records_at),
                    timestamp_ns: 0,
                    damaged: true,
                }
            }
        };
        meta.damaged = true;
        records_at = meta.offset_end;
        segment.entries.push(meta);
        walk.faulty.insert(op);
    }
}

/// Whether a damaged run from `first_op` may be numbered up to `until`
/// (the next readable op): `until` follows it, and the run holds at least
/// one op.
fn damaged_run_numbered(
    first_op: u64,
    until: u64,
    (start, end): (u64, u64),
) -> Result<(), PartitionError> {
    if until < first_op {
        return Err(PartitionError::LogInconsistent {
            op: until,
            reason: format!("op {until} follows damage after op {first_op} was expected"),
        });
    }
    if until == first_op {
        // Entries are appended back to back and rewritten in place, so
        // bytes between two consecutive ops are never the log's own: a
        // write landed where it did not belong (a misdirected write), and
        // the entry after them may itself be out of place. No layout the
        // walk could infer is trustworthy from here (a rewrite would not
        // fit the region it guessed): the copy is fenced and rebuilt.
        return Err(PartitionError::LogInconsistent {
            op: until,
            reason: format!(
                "bytes {start}..{end} hold no entry, yet op {until} follows op {} directly",
                until.saturating_sub(1)
            ),
        });
    }
    Ok(())
}

/// A damaged run: ops `expected_op..until` lived in bytes `start..end`, their
/// records ending at `offset_end`.
fn walk_damaged(
    walk: &mut Walk,
    segment: &mut Segment,
    (start, end): (u64, u64),
    until: u64,
    offset_end: u64,
    readable: &[ScannedEntry],
) -> Result<(), PartitionError> {
    let first_op = walk.expected_op;
    damaged_run_numbered(first_op, until, (start, end))?;
    tracing::error!(
        segment = segment.first_offset,
        start,
        end,
        first_op,
        last_op = until.saturating_sub(1),
        "partition: damaged entries in the record log"
    );
    walk.findings.damage.push(SegmentDamage {
        segment_first_offset: segment.first_offset,
        byte_start: start,
        byte_end: end,
        ops: first_op..=until.saturating_sub(1),
    });
    push_damaged_entries(
        walk,
        segment,
        (first_op, until),
        start,
        offset_end,
        readable,
    );
    walk.gaps.push(Gap {
        segment_first_offset: segment.first_offset,
        first_op,
        last_op: until - 1,
        end,
        open_ended: false,
        next_op: first_op,
        cursor: start,
        early: BTreeMap::new(),
    });
    segment.len = end;
    walk.expected_op = until;
    walk.expected_offset = offset_end;
    walk.offset_known = false;
    walk.previous_checksum = readable
        .iter()
        .find(|entry| entry.header.op.get() == until - 1)
        .map(|entry| entry.header.checksum());
    Ok(())
}

/// A segment whose ops run on into the next one (or the last segment)
/// ends where its readable entries do: a torn tail is cut (after marking
/// its ops maybe acked, if it held data of the log's last one), and a
/// missing last segment file is created.
fn end_segment<D: Disk>(
    io: &mut Io<D>,
    walk: &mut Walk,
    segment: &mut Segment,
    found: &Found,
    is_last: bool,
    superblock: &mut Superblock,
) -> Result<(), PartitionError> {
    let path = segment_path(&walk.dir, found.first_offset);
    if let Some(torn_from) = found.scan.torn_from {
        if is_last && found.scan.torn_has_data && !walk.trust_damaged_tail {
            mark_tail_maybe_acked(io, walk, found, superblock)?;
        }
        let torn = found.scan.total_len - torn_from;
        tracing::warn!(path = %path.display(), torn_from, torn, "partition: cutting a torn tail");
        io.disk
            .set_len(&path, torn_from)
            .map_err(|error| PartitionError::io(&path, "cut a torn tail", &error))?;
        walk.findings.torn_bytes_cut += torn;
        segment.len = torn_from;
    }
    if found.file_len.is_none() && is_last {
        io.disk
            .write_at(&path, 0, &[])
            .map_err(|error| PartitionError::io(&path, "create a segment", &error))?;
    }
    Ok(())
}

/// The end of a segment: cut a torn tail of the last one; ops missing at the
/// end of a sealed one are damage.
fn walk_tail<D: Disk>(
    io: &mut Io<D>,
    walk: &mut Walk,
    segment: &mut Segment,
    found: &Found,
    (is_last, next): (bool, Option<&Found>),
    superblock: &mut Superblock,
) -> Result<(), PartitionError> {
    let next_first_op = next.and_then(Found::known_first_op);
    let next_first_offset = next.map(|next| next.first_offset);
    let valid_end = found.scan.valid_end();
    segment.len = segment.len.max(valid_end);
    // The segment after says where this one ends; failing that (its first
    // entry is unreadable too), the superblock's listing of this one does.
    let listed_end = found
        .listed
        .filter(|listed| listed.last_op >= listed.first_op && listed.last_op > 0)
        .map(|listed| listed.last_op + 1);
    let next_first = match next_first_op.or(listed_end.filter(|_| next.is_some())) {
        Some(op) => op,
        // Nothing says how many ops this segment held, nor where the next
        // one starts (its first entry is unreadable): numbering the next
        // one on from here could give its ops numbers they never had.
        None if next.is_some() && segment.entries.is_empty() => {
            return Err(PartitionError::LogInconsistent {
                op: walk.expected_op,
                reason: format!(
                    "segment {} holds no readable entry and the one after it begins \
                     with damage: their ops cannot be numbered",
                    found.first_offset
                ),
            });
        }
        None => walk.expected_op,
    };
    if is_last || next_first == walk.expected_op {
        return end_segment(io, walk, segment, found, is_last, superblock);
    }
    if next_first < walk.expected_op {
        return Err(PartitionError::LogInconsistent {
            op: next_first,
            reason: format!(
                "segment after {} starts at an op it already holds",
                found.first_offset
            ),
        });
    }
    let logical_len = found
        .listed
        .map_or(0, |listed| listed.len_bytes)
        .max(found.file_len.unwrap_or(0))
        .max(valid_end);
    let offset_end = next_first_offset.unwrap_or(walk.expected_offset);
    let readable = found.scan.torn_readable.clone();
    let gaps_before = walk.gaps.len();
    walk_damaged(
        walk,
        segment,
        (valid_end, logical_len),
        next_first,
        offset_end,
        &readable,
    )?;
    if let Some(gap) = walk.gaps.get_mut(gaps_before) {
        gap.open_ended = true;
    }
    segment.len = logical_len;
    Ok(())
}

/// After a write or sync failed earlier in this process: the last segment's
/// entries past the superblock's durable checkpoint may be page-cache bytes
/// the disk never got, so they are cut, once the superblock durably says
/// their ops may have been acked (see `PartitionConfig::drop_unsynced`).
/// Sealed segments were synced before their successors got a byte. Returns
/// the first op cut.
fn drop_unsynced_tail<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    superblock: &mut Superblock,
    founds: &mut [Found],
) -> Result<Option<u64>, PartitionError> {
    let checkpoint = superblock.op_checkpoint;
    let Some(last) = founds.last_mut() else {
        return Ok(None);
    };
    let entries = || {
        last.scan.items.iter().filter_map(|item| match item {
            Item::Entry(entry) => Some(entry),
            Item::Fault(_) => None,
        })
    };
    let Some(first) = entries().find(|entry| entry.header.op.get() > checkpoint) else {
        return Ok(None);
    };
    let first_op = first.header.op.get();
    let last_op = entries()
        .map(|entry| entry.header.op.get())
        .max()
        .unwrap_or(first_op);
    // Cut right after the last entry the checkpoint covers: whatever lies
    // between it and the first entry past it is past the checkpoint too.
    let cut = last
        .scan
        .items
        .iter()
        .skip_while(
            |item| !matches!(item, Item::Entry(entry) if entry.header.op.get() <= checkpoint),
        )
        .skip_while(
            |item| matches!(item, Item::Entry(entry) if entry.header.op.get() <= checkpoint),
        )
        .map(|item| match item {
            Item::Entry(entry) => entry.position,
            Item::Fault(fault) => fault.start,
        })
        .next()
        .filter(|_| entries().any(|entry| entry.header.op.get() <= checkpoint))
        .unwrap_or(0);
    tracing::error!(
        segment = last.first_offset,
        first_op,
        last_op,
        checkpoint,
        "partition: a write or sync failed earlier; dropping the ops past the durable \
         checkpoint (they may be page-cache bytes only) to repair them from peers"
    );
    mark_maybe_acked(io, dir, superblock, last_op)?;
    let path = segment_path(dir, last.first_offset);
    io.disk
        .set_len(&path, cut)
        .map_err(|error| PartitionError::io(&path, "cut unsynced entries", &error))?;
    let bytes = io
        .disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read a segment", &error))?
        .unwrap_or_default();
    last.scan = scan_segment(&bytes);
    last.file_len = Some(bytes.len() as u64);
    Ok(Some(first_op))
}

/// Raises the superblock's `maybe_acked_op` to `op`, durably, before the
/// ops it covers leave the log.
fn mark_maybe_acked<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    superblock: &mut Superblock,
    op: u64,
) -> Result<(), PartitionError> {
    if superblock.durable.maybe_acked_op >= op {
        return Ok(());
    }
    let mut marked = superblock.clone();
    marked.sequence += 1;
    marked.clean_shutdown = false;
    marked.stopped_in_view = false;
    marked.durable.maybe_acked_op = op;
    crate::superblock::write_now(&mut io.disk, dir, &marked)?;
    *superblock = marked;
    Ok(())
}

/// Before a torn tail with data is cut from the last segment: the ops it may
/// have held, from the next one expected on, may have been durable and acked
/// (a damaged entry looks torn when nothing follows it). The superblock says
/// so durably first, so that neither this open nor any later one (the cut
/// leaves a clean end) counts them as never had.
fn mark_tail_maybe_acked<D: Disk>(
    io: &mut Io<D>,
    walk: &mut Walk,
    found: &Found,
    superblock: &mut Superblock,
) -> Result<(), PartitionError> {
    let readable_max = found
        .scan
        .torn_readable
        .iter()
        .map(|entry| entry.header.op.get())
        .max()
        .unwrap_or(0);
    let maybe_acked_op = walk.expected_op.max(readable_max);
    walk.findings.damaged_tail_from = Some(walk.expected_op);
    tracing::error!(
        segment = found.first_offset,
        first_op = walk.expected_op,
        maybe_acked_op,
        "partition: the log ends in damaged bytes; ops from here on may have been acked and \
         are repaired from peers (the log is untrusted until a view change settles it)"
    );
    mark_maybe_acked(io, &walk.dir, superblock, maybe_acked_op)
}

/// Compares a segment's index file with what its entries imply; rebuilds it
/// when they differ.
fn check_index<D: Disk>(
    io: &mut Io<D>,
    dir: &Path,
    config: LogConfig,
    segment: &mut Segment,
    findings: &mut LogFindings,
) -> Result<(), PartitionError> {
    let expected = expected_index(config.index, segment.first_op, &segment.entries);
    let path = index_path(dir, segment.first_offset);
    let bytes = io
        .disk
        .read_file(&path)
        .map_err(|error| PartitionError::io(&path, "read an index", &error))?;
    let damage = match bytes.map(|bytes| decode_index(&bytes)) {
        None => IndexDamage::Missing,
        Some(Ok(decoded)) if decoded == expected => {
            segment.index = expected;
            return Ok(());
        }
        Some(Ok(_)) => IndexDamage::Stale,
        Some(Err(damage)) => damage,
    };
    tracing::info!(index = %file_name(&path), ?damage, "partition: rebuilding a segment index");
    segment.index = expected;
    write_index_file(io, dir, segment)?;
    findings.indexes_rebuilt.push(IndexRebuild {
        segment_first_offset: segment.first_offset,
        damage,
    });
    Ok(())
}
