//! Cursors: the cursor event log (`cursors.log`), the cursor snapshot
//! (`cursors.snapshot`) and the in-memory cursor map (consumer → offset).
//!
//! Every event has a sequence number; the cursor *tail* is how many events
//! there have ever been. The snapshot holds the map as of the events below its
//! boundary (`covers`); the map in memory is the snapshot plus the events from
//! `covers` on, replayed. Compaction drops log frames the snapshot covers.
//!
//! On disk: `cursors.log` is WAL frames, one per append: `cursor_base u64,
//! event_count u32`, then the encoded `CursorEvents` body exactly as consensus
//! produced it. An event whose offset is
//! [`strand_wire::ops::CURSOR_TOMBSTONE_OFFSET`] deletes its consumer's
//! cursor. `cursors.snapshot` is the map in bounded pieces (see
//! `cursor_snapshot`).
//!
//! Cursors promise at-least-once: a damaged or torn cursor log is cut at the
//! damage (readers may see records again), never refused.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strand_wal::{Ack, FRAME_HEADER_BYTES, FileId, OpenMode, Request, Tail, scan};
use strand_wire::Body;
use strand_wire::ops::{CursorEvent, CursorEvents};

use crate::cursor_snapshot::{apply_event, read_snapshot, write_snapshot};
use crate::disk::Disk;
use crate::error::PartitionError;
use crate::io::{Io, Pending};
use crate::layout::{cursors_log_path, cursors_log_tmp_path};

const FRAME_PREFIX_BYTES: usize = 12;

/// One append's frame in the cursor log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CursorFrame {
    pub(crate) base: u64,
    pub(crate) count: u32,
    pub(crate) position: u64,
    pub(crate) frame_len: u64,
}

impl CursorFrame {
    fn end(&self) -> u64 {
        self.base + u64::from(self.count)
    }
}

/// What opening the cursor log found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CursorFindings {
    /// Bytes cut from the cursor log's tail (torn, or damaged: cursor events
    /// are at-least-once, so damage is cut rather than refused).
    pub cut_bytes: u64,
    /// The snapshot was unreadable and ignored.
    pub snapshot_damaged: bool,
    /// Events between the snapshot and the log's start are missing.
    pub events_missing: bool,
    /// Cursors lowered to the record log's end.
    pub cursors_clamped: usize,
}

/// The cursor log, snapshot and map. See the module docs.
pub(crate) struct CursorLog {
    dir: PathBuf,
    file: Option<FileId>,
    frames: Vec<CursorFrame>,
    len: u64,
    log_start: u64,
    pub tail: u64,
    pub durable_tail: u64,
    covers: u64,
    snapshot_map: BTreeMap<String, u64>,
    pub map: BTreeMap<String, u64>,
    in_flight: VecDeque<(u64, Vec<CursorEvent>)>,
    /// The first append that failed: its events stay in flight for good, so
    /// waiting for them ends in this error.
    pub failure: Option<PartitionError>,
}

impl CursorLog {
    /// Opens (or creates) the cursor state of the partition at `dir`.
    /// `trusted_tail`: after a failed write or sync in this process, the
    /// superblock's cursor checkpoint; the events past it may be page-cache
    /// bytes the disk never got (a failed sync leaves them readable, marked
    /// clean), so they are cut (at-least-once: consumers may see records
    /// again) rather than counted durable.
    pub fn open<D: Disk>(
        io: &mut Io<D>,
        dir: &Path,
        trusted_tail: Option<u64>,
    ) -> Result<(CursorLog, CursorFindings), PartitionError> {
        let mut findings = CursorFindings::default();
        let (covers, snapshot_map) = CursorLog::snapshot_at_open(io, dir, &mut findings)?;
        let path = cursors_log_path(dir);
        let bytes = io
            .disk
            .read_file(&path)
            .map_err(|error| PartitionError::io(&path, "read the cursor log", &error))?
            .unwrap_or_default();
        let (mut frames, events, valid_len) = decode_log(&bytes);
        let mut valid_len = valid_prefix(&mut frames, valid_len, trusted_tail);
        if valid_len < bytes.len() as u64 {
            tracing::warn!(
                valid_len,
                len = bytes.len(),
                "partition: cutting the cursor log's tail"
            );
            findings.cut_bytes = bytes.len() as u64 - valid_len;
        }
        let log_end = frames.last().map_or(covers, CursorFrame::end);
        if log_end <= covers && !frames.is_empty() {
            frames.clear();
            valid_len = 0;
        }
        if valid_len < bytes.len() as u64 {
            io.disk
                .set_len(&path, valid_len)
                .map_err(|error| PartitionError::io(&path, "cut the cursor log", &error))?;
        }
        let log_start = frames.first().map_or(covers, |frame| frame.base);
        if log_start > covers {
            tracing::error!(
                log_start,
                covers,
                "partition: cursor events missing before the log"
            );
            findings.events_missing = true;
        }
        let mut map = snapshot_map.clone();
        for (sequence, event) in events {
            if sequence >= covers && sequence < log_end {
                apply_event(&mut map, event);
            }
        }
        let opened = io.open(&path, OpenMode::CreateOrAppend)?;
        assert_eq!(
            opened.len, valid_len,
            "the cursor log was cut to its valid prefix"
        );
        let tail = log_end.max(covers);
        let log = CursorLog {
            dir: dir.to_path_buf(),
            file: Some(opened.file),
            frames,
            len: valid_len,
            log_start,
            tail,
            durable_tail: tail,
            covers,
            snapshot_map,
            map,
            in_flight: VecDeque::new(),
            failure: None,
        };
        Ok((log, findings))
    }

    /// The cursor snapshot and the event it covers up to; an unreadable
    /// one is ignored (reported in `findings`): the log's events rebuild
    /// what they can.
    fn snapshot_at_open<D: Disk>(
        io: &mut Io<D>,
        dir: &Path,
        findings: &mut CursorFindings,
    ) -> Result<(u64, BTreeMap<String, u64>), PartitionError> {
        Ok(match read_snapshot(io, dir)? {
            Ok(snapshot) => snapshot,
            Err(reason) => {
                tracing::error!(%reason, "partition: cursor snapshot unreadable; ignoring it");
                findings.snapshot_damaged = true;
                (0, BTreeMap::new())
            }
        })
    }

    /// The bytes of the log holding events past `cursor_checkpoint` (what
    /// a failed sync may have left in the page cache only).
    pub fn unsynced_span(&self, cursor_checkpoint: u64) -> (u64, u64) {
        let kept = frames_below(&self.frames, cursor_checkpoint);
        let from = self
            .frames
            .get(kept)
            .map_or(self.len, |frame| frame.position);
        (from, self.len)
    }

    /// Lowers every cursor above `offset_end` to it; returns how many moved.
    pub fn clamp(&mut self, offset_end: u64) -> usize {
        let mut clamped = 0;
        for offset in self.map.values_mut() {
            if *offset > offset_end {
                *offset = offset_end;
                clamped += 1;
            }
        }
        clamped
    }

    /// The first event sequence number the log can still serve.
    pub fn log_start(&self) -> u64 {
        self.log_start
    }

    /// The snapshot's boundary.
    pub fn snapshot_covers(&self) -> u64 {
        self.covers
    }

    /// Appends encoded events `cursor_base..cursor_base + event_count`; `Ok`
    /// means queued. The durable completion comes back as [`Pending::Cursors`].
    pub fn append<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        cursor_base: u64,
        event_count: u32,
        events: &Bytes,
    ) -> Result<(), PartitionError> {
        let cursor_end = cursor_base + u64::from(event_count);
        self.append_as(
            io,
            cursor_base,
            event_count,
            events,
            Pending::Cursors { cursor_end },
        )
        .map(|_| ())
    }

    /// Appends events and waits until they are durable.
    fn append_durably<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        cursor_base: u64,
        event_count: u32,
        events: &Bytes,
    ) -> Result<(), PartitionError> {
        let user_data = self.append_as(io, cursor_base, event_count, events, Pending::Internal)?;
        let file = self.file.expect("an open cursor log has a file");
        io.finish(file, user_data)?;
        self.on_durable(cursor_base + u64::from(event_count));
        Ok(())
    }

    fn append_as<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        cursor_base: u64,
        event_count: u32,
        events: &Bytes,
        pending: Pending,
    ) -> Result<u64, PartitionError> {
        let end = cursor_base + u64::from(event_count);
        if cursor_base != self.tail || event_count == 0 {
            return Err(PartitionError::CursorEventsMisaligned {
                base: cursor_base,
                end,
                tail: self.tail,
            });
        }
        let decoded = CursorEvents::from_bytes(events)
            .map_err(|error| PartitionError::CursorEventsInvalid {
                reason: error.to_string(),
            })?
            .events;
        if decoded.len() as u64 != u64::from(event_count) {
            return Err(PartitionError::CursorEventsInvalid {
                reason: format!("{} events encoded, {event_count} announced", decoded.len()),
            });
        }
        let payload = frame_payload(cursor_base, event_count, events);
        let frame_len = (FRAME_HEADER_BYTES + payload.len()) as u64;
        let file = self.file.expect("an open cursor log has a file");
        let user_data = io.append(file, payload, Ack::Durable, pending)?;
        self.frames.push(CursorFrame {
            base: cursor_base,
            count: event_count,
            position: self.len,
            frame_len,
        });
        self.len += frame_len;
        self.tail = end;
        for event in &decoded {
            apply_event(&mut self.map, event.clone());
        }
        self.in_flight.push_back((cursor_base, decoded));
        Ok(user_data)
    }

    /// Cursor events up to `cursor_end` are durable. Stale completions (for
    /// events cut since) are ignored: the caller drains appends before a cut.
    pub fn on_durable(&mut self, cursor_end: u64) -> bool {
        if cursor_end > self.tail {
            return false;
        }
        self.durable_tail = self.durable_tail.max(cursor_end);
        while self
            .in_flight
            .front()
            .is_some_and(|(base, events)| base + events.len() as u64 <= self.durable_tail)
        {
            self.in_flight.pop_front();
        }
        true
    }

    /// True while some appended events are not durable yet.
    pub fn has_in_flight(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Events `from..to` (for shipping to a backup).
    pub fn read_events<D: Disk>(
        &self,
        io: &mut Io<D>,
        from: u64,
        to: u64,
    ) -> Result<Vec<CursorEvent>, PartitionError> {
        if from < self.log_start {
            return Err(PartitionError::CursorEventsCompacted {
                from,
                log_start: self.log_start,
            });
        }
        if from > to || to > self.tail {
            return Err(PartitionError::CursorEventsMisaligned {
                base: from,
                end: to,
                tail: self.tail,
            });
        }
        let mut out = Vec::with_capacity((to - from) as usize);
        for frame in self
            .frames
            .iter()
            .filter(|frame| frame.end() > from && frame.base < to)
        {
            let events = self.frame_events(io, frame)?;
            for (index, event) in events.into_iter().enumerate() {
                let sequence = frame.base + index as u64;
                if sequence >= from && sequence < to {
                    out.push(event);
                }
            }
        }
        assert_eq!(
            out.len() as u64,
            to - from,
            "the log holds every event it counts"
        );
        Ok(out)
    }

    /// The events of one frame, from memory while in flight, else from disk.
    fn frame_events<D: Disk>(
        &self,
        io: &mut Io<D>,
        frame: &CursorFrame,
    ) -> Result<Vec<CursorEvent>, PartitionError> {
        if let Some((_, events)) = self.in_flight.iter().find(|(base, _)| *base == frame.base) {
            return Ok(events.clone());
        }
        let path = cursors_log_path(&self.dir);
        let bytes = io
            .disk
            .read_at(&path, frame.position, frame.frame_len as usize)
            .map_err(|error| PartitionError::io(&path, "read cursor events", &error))?;
        let (frames, events, _) = decode_log(&bytes);
        if frames.len() != 1 || frames[0].base != frame.base {
            return Err(PartitionError::CursorEventsInvalid {
                reason: format!("frame at byte {} no longer reads back", frame.position),
            });
        }
        Ok(events.into_iter().map(|(_, event)| event).collect())
    }

    /// Cuts the event log to `cursor_tail` events and lowers a snapshot
    /// boundary past it (keeping the snapshot's state), durably. The caller has
    /// drained in-flight appends. A repeated cut changes nothing.
    pub fn cut<D: Disk>(&mut self, io: &mut Io<D>, cursor_tail: u64) -> Result<(), PartitionError> {
        assert!(
            self.in_flight.is_empty(),
            "cut with cursor appends in flight"
        );
        if self.tail <= cursor_tail && self.covers <= cursor_tail {
            return Ok(()); // nothing past the cut: a repeated cut changes nothing
        }
        let new_tail = self.tail.min(cursor_tail);
        if self.tail > cursor_tail {
            self.cut_log(io, cursor_tail)?;
        }
        if self.covers > cursor_tail {
            tracing::info!(
                covers = self.covers,
                cursor_tail,
                "partition: lowering the cursor snapshot boundary"
            );
            write_snapshot(io, &self.dir, cursor_tail, &self.snapshot_map)?;
            self.covers = cursor_tail;
        }
        self.tail = new_tail;
        self.durable_tail = new_tail;
        self.log_start = self.frames.first().map_or(self.covers, |frame| frame.base);
        self.rebuild_map(io)
    }

    /// The first event a cut to `cursor_tail` writes again: the base of
    /// the frame it splits (its kept events are appended anew), else the
    /// cut point itself.
    pub fn cut_rewrites_from(&self, cursor_tail: u64) -> u64 {
        let keep = frames_below(&self.frames, cursor_tail);
        self.frames
            .get(keep)
            .map_or(cursor_tail, |frame| frame.base.min(cursor_tail))
    }

    fn cut_log<D: Disk>(&mut self, io: &mut Io<D>, cursor_tail: u64) -> Result<(), PartitionError> {
        let keep = frames_below(&self.frames, cursor_tail);
        let partial = self
            .frames
            .get(keep)
            .filter(|frame| frame.base < cursor_tail)
            .copied();
        let kept_events = match partial {
            Some(frame) => {
                let mut events = self.frame_events(io, &frame)?;
                events.truncate((cursor_tail - frame.base) as usize);
                events
            }
            None => Vec::new(),
        };
        let cut_at = self
            .frames
            .get(keep)
            .map_or(self.len, |frame| frame.position);
        let file = self.file.expect("an open cursor log has a file");
        io.run(file, |user_data| Request::Truncate {
            file,
            len: cut_at,
            user_data,
        })?;
        self.frames.truncate(keep);
        self.len = cut_at;
        if let Some(frame) = partial {
            let body = Bytes::from(
                CursorEvents {
                    events: kept_events,
                }
                .to_vec(),
            );
            let count = (cursor_tail - frame.base) as u32;
            self.tail = frame.base;
            self.append_durably(io, frame.base, count, &body)?;
        }
        Ok(())
    }

    /// The map from the snapshot plus the log's events from the boundary on.
    fn rebuild_map<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        let mut map = self.snapshot_map.clone();
        let from = self.covers.max(self.log_start);
        if from < self.tail {
            for event in self.read_events(io, from, self.tail)? {
                apply_event(&mut map, event);
            }
        }
        self.map = map;
        Ok(())
    }

    /// Writes a snapshot of the map at the tail, durably. The caller has
    /// drained in-flight appends.
    pub fn snapshot<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        assert!(
            self.in_flight.is_empty(),
            "snapshot with cursor appends in flight"
        );
        write_snapshot(io, &self.dir, self.tail, &self.map)?;
        self.covers = self.tail;
        self.snapshot_map = self.map.clone();
        Ok(())
    }

    /// Drops log frames whose events are all below `min(keep_from, covers)`.
    /// The caller has drained in-flight appends.
    pub fn compact<D: Disk>(
        &mut self,
        io: &mut Io<D>,
        keep_from: u64,
    ) -> Result<usize, PartitionError> {
        assert!(
            self.in_flight.is_empty(),
            "compaction with cursor appends in flight"
        );
        let drop_below = keep_from.min(self.covers);
        let dropped = frames_below(&self.frames, drop_below);
        if dropped == 0 {
            return Ok(0);
        }
        let path = cursors_log_path(&self.dir);
        let tmp = cursors_log_tmp_path(&self.dir);
        let keep_from_byte = self
            .frames
            .get(dropped)
            .map_or(self.len, |frame| frame.position);
        let bytes = io
            .disk
            .read_file(&path)
            .map_err(|error| PartitionError::io(&path, "read the cursor log", &error))?
            .unwrap_or_default();
        let kept = bytes
            .get(keep_from_byte as usize..self.len as usize)
            .unwrap_or(&[]);
        let file = self.file.take().expect("an open cursor log has a file");
        io.close(file)?;
        io.disk
            .remove_file(&tmp)
            .and_then(|()| io.disk.write_at(&tmp, 0, kept))
            .and_then(|()| io.disk.rename(&tmp, &path))
            .map_err(|error| PartitionError::io(&path, "compact the cursor log", &error))?;
        let opened = io.open(&path, OpenMode::Append)?;
        self.file = Some(opened.file);
        self.frames.drain(..dropped);
        for frame in &mut self.frames {
            frame.position -= keep_from_byte;
        }
        self.len = kept.len() as u64;
        self.log_start = self.frames.first().map_or(self.covers, |frame| frame.base);
        Ok(dropped)
    }

    /// Closes the log's file (syncing it).
    pub fn close<D: Disk>(&mut self, io: &mut Io<D>) -> Result<(), PartitionError> {
        match self.file.take() {
            Some(file) => io.close(file),
            None => Ok(()),
        }
    }
}

/// How many of `frames` (in event order) end at or below event `event`:
/// the index of the first that holds an event at or past it.
fn frames_below(frames: &[CursorFrame], event: u64) -> usize {
    frames.partition_point(|frame| frame.end() <= event)
}

/// A cursor log frame's payload.
pub(crate) fn frame_payload(cursor_base: u64, event_count: u32, events: &[u8]) -> Bytes {
    let mut payload = Vec::with_capacity(FRAME_PREFIX_BYTES + events.len());
    payload.extend_from_slice(&cursor_base.to_le_bytes());
    payload.extend_from_slice(&event_count.to_le_bytes());
    payload.extend_from_slice(events);
    Bytes::from(payload)
}

/// The valid, contiguous prefix of a cursor log: its frames, its events with
/// their sequence numbers, and its length in bytes.
pub(crate) fn decode_log(bytes: &[u8]) -> (Vec<CursorFrame>, Vec<(u64, CursorEvent)>, u64) {
    let report = scan(bytes);
    let mut frames: Vec<CursorFrame> = Vec::new();
    let mut events = Vec::new();
    let mut valid_len = 0;
    for span in &report.frames {
        let Some((base, count, decoded)) = decode_frame(span.payload(bytes)) else {
            break;
        };
        if frames.last().is_some_and(|last| last.end() != base) {
            break;
        }
        for (index, event) in decoded.into_iter().enumerate() {
            events.push((base + index as u64, event));
        }
        frames.push(CursorFrame {
            base,
            count,
            position: span.offset,
            frame_len: span.end() - span.offset,
        });
        valid_len = span.end();
    }
    if let Tail::Corrupt { fault_offset, .. } = report.tail {
        tracing::error!(
            fault_offset,
            "partition: damaged cursor log frame; later events dropped"
        );
    }
    (frames, events, valid_len)
}

pub(crate) fn decode_frame(payload: &[u8]) -> Option<(u64, u32, Vec<CursorEvent>)> {
    let prefix = payload.get(..FRAME_PREFIX_BYTES)?;
    let base = u64::from_le_bytes(prefix[..8].try_into().ok()?);
    let count = u32::from_le_bytes(prefix[8..].try_into().ok()?);
    // Events numbered past u64::MAX are no log's: damage, refused like it.
    base.checked_add(u64::from(count))?;
    let events = CursorEvents::from_bytes(&payload[FRAME_PREFIX_BYTES..])
        .ok()?
        .events;
    (events.len() as u64 == u64::from(count) && count > 0).then_some((base, count, events))
}

/// The length of the log's valid prefix, `frames` cut to it: past the
/// trusted tail (the superblock's cursor checkpoint, after a failed write or
/// sync) nothing is counted durable.
fn valid_prefix(frames: &mut Vec<CursorFrame>, valid_len: u64, trusted_tail: Option<u64>) -> u64 {
    let Some(trusted) = trusted_tail else {
        return valid_len;
    };
    let kept = frames_below(frames, trusted);
    let Some(first_cut) = frames.get(kept) else {
        return valid_len;
    };
    tracing::warn!(
        trusted,
        cut_from = first_cut.base,
        "partition: a write or sync failed earlier; cutting the cursor events past the checkpoint"
    );
    let cut_at = first_cut.position;
    frames.truncate(kept);
    assert!(cut_at <= valid_len, "a frame within the valid prefix");
    cut_at
}
