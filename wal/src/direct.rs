//! Appends past the page cache (`O_DIRECT`): planning whole-block writes.
//!
//! Why: on the development VM, writing through the page cache took most of a
//! busy node's CPU once the cache had filled the machine's free memory (see
//! `docs/bench-history.md`, "a node-wide log and `O_DIRECT` tried"). A direct write
//! skips the cache: the device takes the bytes from our buffer. The price is
//! alignment: a direct write covers whole blocks of the file
//! ([`DIRECT_BLOCK_BYTES`]), from memory aligned to a block.
//!
//! A file's appends end anywhere, so a direct append starts at the block that
//! holds the append end. It carries the bytes of that block already in the
//! file (the file's *tail*, kept here in memory) before the new bytes, and
//! zeros after them up to the next block boundary. The file then holds zeros
//! past its last frame until the next append overwrites them, as the
//! zero-filled room of [`crate::preallocate`] leaves it: the recovery scan cuts
//! them as a torn tail, and a clean close cuts them off.
//!
//! Rewriting the tail block rewrites bytes that may already be durable, with
//! the same values: a write torn at any sector leaves each sector old or new,
//! and both hold those bytes. Two writes of one block must never be in flight
//! at once (the later could land first and the earlier then undo it), so the
//! caller keeps at most one direct write in flight per file.
//!
//! Extending a file is slow work for a direct write: the file system allocates
//! blocks and grows the file under an exclusive lock, so io_uring hands every
//! such write to a worker thread. A direct file that has grown a little
//! therefore gets room allocated ahead (`fallocate`, see
//! [`crate::preallocate::Preallocation::room_due`]), and the room is then
//! written with zeros ([`DirectFile::zero_room`]), once, beside the next
//! append. Allocated but never written, every append into the room would
//! span the written tail block and unwritten blocks, which the kernel does
//! not issue at once either, and at its completion the file system would
//! convert the blocks it wrote to written ones in a journal transaction of
//! their own. Zeroed, an append overwrites written blocks: issued at once,
//! nothing converted. An append that still reaches unwritten blocks (the
//! zeros not yet written) whose first block rewrites the tail is written as
//! two writes, that block and the rest (the backend's choice when no fsync
//! rides with it), so that each overwrites one extent. Measured over 1,000
//! partitions: seven in ten io_uring submissions went to a worker with
//! neither room nor split, one in fourteen with the room allocated and the
//! appends split.
//!
//! The module is pure: [`DirectFile`] plans each write into an
//! [`AlignedBuffer`] from a bounded [`BufferPool`]; the caller writes it, and
//! reads the tail block when the plan asks for it (after an open or a cut).
#![allow(unsafe_code)]

/// The block a direct write is aligned to, in offset, length and memory: the
/// page size, a multiple of every common device's logical block.
pub const DIRECT_BLOCK_BYTES: usize = 4096;

const BLOCK: u64 = DIRECT_BLOCK_BYTES as u64;

/// Blocks a [`BufferPool`] keeps for reuse in all (32 MiB): enough for one
/// write in flight per file of a node writing to a few thousand files at once
/// (a direct file has one write in flight at a time), each buffer reused
/// without being allocated or zeroed again. Buffers returned beyond that are
/// dropped.
pub const POOLED_BLOCKS_MAX: usize = 8192;

/// The largest buffer a [`BufferPool`] keeps (256 KiB): a larger one (a
/// batch of several MiB) is dropped when returned.
pub const POOLED_BUFFER_BLOCKS_MAX: usize = 64;

/// The zeros written into a direct file's room: as many as the largest room
/// allocated at once, aligned to a block.
#[repr(C, align(4096))]
struct RoomZeros([u8; crate::preallocate::DIRECT_ROOM_BYTES_MAX as usize]);

static ROOM_ZEROS: RoomZeros = RoomZeros([0; crate::preallocate::DIRECT_ROOM_BYTES_MAX as usize]);

const _: () = assert!(crate::preallocate::DIRECT_ROOM_BYTES_MAX % BLOCK == 0);

/// Zeros to write room from: whole blocks, block-aligned, never written to.
pub fn room_zeros() -> &'static [u8] {
    &ROOM_ZEROS.0
}

/// One block of memory, aligned to its size.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Block([u8; DIRECT_BLOCK_BYTES]);

const _: () = assert!(std::mem::size_of::<Block>() == DIRECT_BLOCK_BYTES);
const _: () = assert!(std::mem::align_of::<Block>() == DIRECT_BLOCK_BYTES);

/// Whole blocks of block-aligned memory: the buffer of one direct write.
#[derive(Default)]
pub struct AlignedBuffer {
    /// Every block the buffer has held (reused ones keep old bytes).
    blocks: Vec<Block>,
    /// The blocks of the current write: the first `used` of `blocks`.
    used: usize,
}

impl AlignedBuffer {
    /// The buffer's bytes (a whole number of blocks, starting on a block).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `Block` is `repr(C)` around a byte array, its size equals its
        // alignment, so a slice of blocks is one run of initialized bytes with
        // no padding, living as long as `self.blocks` is borrowed.
        unsafe {
            std::slice::from_raw_parts(
                self.blocks.as_ptr().cast::<u8>(),
                self.used * DIRECT_BLOCK_BYTES,
            )
        }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, borrowed mutably through `self.blocks`.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.blocks.as_mut_ptr().cast::<u8>(),
                self.used * DIRECT_BLOCK_BYTES,
            )
        }
    }

    /// The buffer as one block, to read a tail block into.
    pub(crate) fn block_mut(&mut self) -> &mut [u8] {
        self.set_blocks(1);
        self.as_bytes_mut()
    }

    /// Makes the buffer exactly `blocks` blocks long. Reused blocks keep their
    /// old bytes (a plan writes every byte it hands out); only blocks the
    /// buffer never held are allocated.
    fn set_blocks(&mut self, blocks: usize) {
        let held = self.blocks.len();
        if held < blocks {
            // Zeroed in place: a block is never built on the stack (a 4 KiB
            // value there asks for stack probes, and a function of this module
            // whose frame had them once came out of the compiler without its
            // prologue).
            self.blocks.reserve_exact(blocks - held);
            // SAFETY: `reserve_exact` made room for `blocks` blocks; the new
            // ones are zeroed before the length covers them, and a block of
            // zero bytes is a valid `Block` (a plain byte array).
            unsafe {
                std::ptr::write_bytes(self.blocks.as_mut_ptr().add(held), 0, blocks - held);
                self.blocks.set_len(blocks);
            }
        }
        self.used = blocks;
    }

    /// Blocks of memory the buffer holds, used or not.
    fn held_blocks(&self) -> usize {
        self.blocks.len()
    }
}

impl std::fmt::Debug for AlignedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AlignedBuffer({} of {} blocks)",
            self.used,
            self.blocks.len()
        )
    }
}

/// Buffers of direct writes, reused rather than allocated per write. Bounded:
/// at most [`POOLED_BLOCKS_MAX`] blocks wait for reuse, in buffers of at most
/// [`POOLED_BUFFER_BLOCKS_MAX`] blocks; a buffer returned beyond that is
/// dropped.
#[derive(Debug, Default)]
pub struct BufferPool {
    free: Vec<AlignedBuffer>,
    /// Blocks held by the buffers in `free`.
    free_blocks: usize,
}

impl BufferPool {
    /// A buffer to plan one write into (empty; the plan sizes it).
    pub fn take(&mut self) -> AlignedBuffer {
        let Some(buffer) = self.free.pop() else {
            return AlignedBuffer::default();
        };
        self.free_blocks -= pool_weight(&buffer);
        buffer
    }

    /// Gives a buffer back once its write has completed.
    pub fn put(&mut self, buffer: AlignedBuffer) {
        let weight = pool_weight(&buffer);
        if buffer.held_blocks() <= POOLED_BUFFER_BLOCKS_MAX
            && self.free_blocks + weight <= POOLED_BLOCKS_MAX
        {
            self.free_blocks += weight;
            self.free.push(buffer);
        }
    }

    /// Buffers waiting for reuse.
    pub fn pooled(&self) -> usize {
        self.free.len()
    }
}

/// What a pooled buffer counts against [`POOLED_BLOCKS_MAX`]: its blocks, and
/// at least one, so that empty buffers are bounded too.
fn pool_weight(buffer: &AlignedBuffer) -> usize {
    buffer.held_blocks().max(1)
}

/// Where a planned direct write goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectWrite {
    /// The file offset of the buffer's first byte (a block boundary).
    pub offset: u64,
    /// Bytes to write: the whole buffer, a whole number of blocks.
    pub len: u64,
    /// Every block it covers was written before (by an append or the room's
    /// zeros): the write overwrites written blocks only.
    pub overwrite: bool,
}

impl DirectWrite {
    /// The offset just past the write (a block boundary).
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// Blocks of room to write zeros into, `start..end` (block boundaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zeroing {
    /// The first block's offset.
    pub start: u64,
    /// The offset just past the last block.
    pub end: u64,
}

/// What planning an append needs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Written into the buffer: write it.
    Ready(DirectWrite),
    /// The tail block is not known: read the block at `offset` and hand its
    /// bytes to [`DirectFile::set_tail`], then plan again.
    ReadTail {
        /// The block's offset in the file.
        offset: u64,
    },
}

/// One file appended to with direct writes: its end and the bytes of its last
/// partial block.
#[derive(Clone)]
pub struct DirectFile {
    /// Bytes the file holds (its frames), not counting padding past them.
    end: u64,
    /// The block holding `end`: the file's bytes below `end`, then zeros, when
    /// `tail_known`. On the heap, written in place: a block is never copied
    /// through the stack (see `AlignedBuffer::set_blocks`).
    tail: Box<[u8]>,
    /// Whether `tail` holds the file's bytes (known empty when `end` is on a
    /// block boundary).
    tail_known: bool,
    /// The blocks below this offset were written (by appends planned here,
    /// or by zeros written into the room); a block boundary.
    written_end: u64,
    /// Room allocated but not written yet, to be zeroed beside the next
    /// append.
    unzeroed: Option<Zeroing>,
}

impl std::fmt::Debug for DirectFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectFile")
            .field("end", &self.end)
            .field("tail_known", &self.tail_known)
            .field("written_end", &self.written_end)
            .field("unzeroed", &self.unzeroed)
            .finish()
    }
}

impl DirectFile {
    /// A file holding `end` bytes; its tail block is read before the first
    /// append unless `end` is on a block boundary.
    pub fn new(end: u64) -> DirectFile {
        DirectFile {
            end,
            tail: vec![0; DIRECT_BLOCK_BYTES].into_boxed_slice(),
            tail_known: end % BLOCK == 0,
            written_end: end.next_multiple_of(BLOCK),
            unzeroed: None,
        }
    }

    /// Bytes the file holds.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The offset of the block holding the end.
    fn tail_offset(&self) -> u64 {
        self.end - self.end % BLOCK
    }

    /// Bytes of the tail block below the end.
    fn tail_len(&self) -> usize {
        (self.end % BLOCK) as usize
    }

    /// Takes the tail block's bytes as read from the file (at `offset`, as
    /// [`Plan::ReadTail`] asked). A short read is fine as long as it reaches
    /// the end; bytes past the end are ignored. Fails when it does not reach
    /// the end: the file is shorter than we believe.
    pub fn set_tail(&mut self, offset: u64, read: &[u8]) -> Result<(), ShortTail> {
        assert_eq!(offset, self.tail_offset(), "the tail read at its block");
        let len = self.tail_len();
        if read.len() < len {
            return Err(ShortTail {
                offset,
                read: read.len(),
                needed: len,
            });
        }
        self.tail[..len].copy_from_slice(&read[..len]);
        self.tail[len..].fill(0);
        self.tail_known = true;
        Ok(())
    }

    /// Plans appending `parts` (in order) at `offset`, which must be the end:
    /// fills `buffer` with the tail block's bytes, the parts and zeros to the
    /// next block boundary, and moves the end past the parts. Asks for the
    /// tail block first when it is not known.
    ///
    /// Once planned, the write must be carried out (or the file given up on:
    /// a failed write poisons it): the tail kept here already holds its bytes.
    pub fn plan<'a, P>(&mut self, offset: u64, parts: P, buffer: &mut AlignedBuffer) -> Plan
    where
        P: IntoIterator<Item = &'a [u8]>,
        P::IntoIter: Clone,
    {
        assert_eq!(offset, self.end, "direct writes append at the end");
        let parts = parts.into_iter();
        if !self.tail_known {
            return Plan::ReadTail {
                offset: self.tail_offset(),
            };
        }
        let start = self.tail_offset();
        let head = self.tail_len();
        let added: usize = parts.clone().map(<[u8]>::len).sum();
        let new_end = self.end + added as u64;
        let blocks = (new_end - start).div_ceil(BLOCK) as usize;
        buffer.set_blocks(blocks);
        let bytes = buffer.as_bytes_mut();
        bytes[..head].copy_from_slice(&self.tail[..head]);
        let mut at = head;
        for part in parts {
            bytes[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        bytes[at..].fill(0);
        let last_block = bytes.len() - DIRECT_BLOCK_BYTES;
        let kept = (new_end % BLOCK) as usize;
        self.tail[..kept].copy_from_slice(&bytes[last_block..last_block + kept]);
        self.tail[kept..].fill(0);
        self.end = new_end;
        let write = DirectWrite {
            offset: start,
            len: bytes.len() as u64,
            overwrite: start + bytes.len() as u64 <= self.written_end,
        };
        self.written_end = self.written_end.max(write.end());
        self.assert_positions();
        Plan::Ready(write)
    }

    /// Notes room allocated at `offset..offset + len` (past the end), to be
    /// written with zeros beside the next append ([`DirectFile::take_zeroing`]).
    /// Blocks already written are left alone; room noted before and not
    /// zeroed yet is zeroed together with this.
    pub fn zero_room(&mut self, offset: u64, len: u64) {
        let start = offset.next_multiple_of(BLOCK).max(self.written_end);
        let end = (offset + len).next_multiple_of(BLOCK);
        if start >= end {
            return;
        }
        self.unzeroed = Some(match self.unzeroed {
            Some(noted) => Zeroing {
                start: noted.start.min(start),
                end: noted.end.max(end),
            },
            None => Zeroing { start, end },
        });
        self.assert_invariants();
    }

    /// The room to zero beside `write` (just planned): the blocks past it, so
    /// that the two never touch the same block and may run side by side.
    /// They count as written from now on (when they follow the written
    /// blocks): the caller keeps the file's next write until both are done,
    /// and a zeroing that failed only leaves blocks that read as zeros anyway
    /// (the next write into them is slower).
    pub fn take_zeroing(&mut self, write: DirectWrite) -> Option<Zeroing> {
        let noted = self.unzeroed.take()?;
        let start = noted.start.max(write.end());
        let zeroing = (start < noted.end).then_some(Zeroing {
            start,
            end: noted.end,
        })?;
        if zeroing.start <= self.written_end {
            self.written_end = self.written_end.max(zeroing.end);
        }
        self.assert_invariants();
        Some(zeroing)
    }

    /// The file was cut to `len` bytes: the tail is kept when the cut falls in
    /// its block, and read again otherwise.
    pub fn cut(&mut self, len: u64) {
        assert!(len <= self.end, "a cut shortens the file");
        let same_block = len - len % BLOCK == self.tail_offset();
        self.end = len;
        self.written_end = self.written_end.min(len.next_multiple_of(BLOCK));
        self.unzeroed = None;
        let kept = self.tail_len();
        if same_block && self.tail_known {
            self.tail[kept..].fill(0);
        } else if kept == 0 {
            self.tail.fill(0);
            self.tail_known = true;
        } else {
            self.tail_known = false;
        }
        self.assert_invariants();
    }

    /// The tail, when known, holds zeros from the end on; the rest as
    /// [`DirectFile::assert_positions`].
    pub fn assert_invariants(&self) {
        if self.tail_known {
            assert!(
                self.tail[self.tail_len()..].iter().all(|&byte| byte == 0),
                "the tail block holds zeros past the end {}",
                self.end
            );
        }
        self.assert_positions();
    }

    /// The invariants that cost nothing to check (every append checks them;
    /// the tail's zeros are checked where the tail is cut or read).
    fn assert_positions(&self) {
        assert_eq!(self.tail.len(), DIRECT_BLOCK_BYTES, "one block of tail");
        assert!(
            self.tail_known || self.end % BLOCK != 0,
            "a tail on a block boundary is known empty"
        );
        assert_eq!(self.written_end % BLOCK, 0, "written blocks end on a block");
        assert!(
            self.written_end >= self.end,
            "the blocks below the end were written"
        );
        if let Some(zeroing) = self.unzeroed {
            assert!(
                zeroing.start % BLOCK == 0 && zeroing.end % BLOCK == 0,
                "room is zeroed in whole blocks"
            );
            assert!(zeroing.start < zeroing.end, "room to zero is not empty");
        }
    }
}

/// The tail block read back from the file did not reach the end we keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the block at {offset} read {read} bytes, short of the {needed} below the file's end")]
pub struct ShortTail {
    /// The block's offset.
    pub offset: u64,
    /// Bytes read.
    pub read: usize,
    /// Bytes needed.
    pub needed: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_prng::Prng;

    /// A file as the device holds it: writes land as planned.
    #[derive(Default)]
    struct Device(Vec<u8>);

    impl Device {
        fn write(&mut self, write: DirectWrite, buffer: &AlignedBuffer) {
            assert_eq!(write.offset % BLOCK, 0, "offset on a block");
            assert_eq!(write.len % BLOCK, 0, "whole blocks");
            assert_eq!(write.len as usize, buffer.as_bytes().len());
            assert_eq!(
                buffer.as_bytes().as_ptr() as usize % DIRECT_BLOCK_BYTES,
                0,
                "memory on a block"
            );
            let (offset, len) = (write.offset as usize, write.len as usize);
            if self.0.len() < offset + len {
                self.0.resize(offset + len, 0);
            }
            self.0[offset..offset + len].copy_from_slice(buffer.as_bytes());
        }

        fn read_block(&self, offset: u64) -> &[u8] {
            let offset = offset as usize;
            let end = (offset + DIRECT_BLOCK_BYTES).min(self.0.len());
            &self.0[offset.min(end)..end]
        }
    }

    /// Appends through `file`, reading the tail from `device` when asked.
    fn append(
        file: &mut DirectFile,
        device: &mut Device,
        pool: &mut BufferPool,
        parts: &[&[u8]],
    ) -> DirectWrite {
        let mut buffer = pool.take();
        let write = loop {
            match file.plan(file.end(), parts.iter().copied(), &mut buffer) {
                Plan::Ready(write) => break write,
                Plan::ReadTail { offset } => file
                    .set_tail(offset, device.read_block(offset))
                    .expect("the device holds the tail"),
            }
        };
        device.write(write, &buffer);
        pool.put(buffer);
        write
    }

    #[test]
    fn appends_rewrite_the_tail_block_and_pad_with_zeros() {
        let (mut file, mut device, mut pool) =
            (DirectFile::new(0), Device::default(), BufferPool::default());
        let first = append(&mut file, &mut device, &mut pool, &[b"abc", &[7; 5000]]);
        assert_eq!(
            first,
            DirectWrite {
                offset: 0,
                len: 8192,
                overwrite: false,
            }
        );
        let second = append(&mut file, &mut device, &mut pool, &[b"xyz"]);
        assert_eq!(
            second,
            DirectWrite {
                offset: 4096,
                len: 4096,
                overwrite: true,
            },
            "the block the first append wrote"
        );
        assert_eq!(file.end(), 5006);
        assert_eq!(&device.0[..3], b"abc");
        assert!(device.0[3..5003].iter().all(|&byte| byte == 7));
        assert_eq!(&device.0[5003..5006], b"xyz");
        assert!(
            device.0[5006..].iter().all(|&byte| byte == 0),
            "zeros past the end"
        );
        assert_eq!(pool.pooled(), 1, "one buffer, reused");
    }

    #[test]
    fn room_is_zeroed_past_the_next_append_and_then_overwritten() {
        let (mut file, mut device, mut pool) =
            (DirectFile::new(0), Device::default(), BufferPool::default());
        append(&mut file, &mut device, &mut pool, &[&[1; 70_000]]);
        // Room as the preallocation asks for it: from the end, unaligned.
        file.zero_room(70_000, 64 << 10);
        let next = append(&mut file, &mut device, &mut pool, &[&[2; 5000]]);
        assert!(!next.overwrite, "past the blocks written so far");
        let zeroing = file.take_zeroing(next).expect("room past the append");
        assert_eq!(
            zeroing,
            Zeroing {
                start: next.end(),
                end: (70_000u64 + (64 << 10)).next_multiple_of(BLOCK),
            },
            "the blocks past the append, to the room's last block"
        );
        assert_eq!(file.take_zeroing(next), None, "zeroed once");
        let into_room = append(&mut file, &mut device, &mut pool, &[&[3; 20_000]]);
        assert!(into_room.overwrite, "zeroed room counts as written");
        let past_room = append(&mut file, &mut device, &mut pool, &[&[4; 64 << 10]]);
        assert!(!past_room.overwrite, "past the zeroed room");

        // Room that the next append covers whole leaves nothing to zero.
        file.zero_room(file.end(), 4096);
        let covering = append(&mut file, &mut device, &mut pool, &[&[5; 9000]]);
        assert_eq!(file.take_zeroing(covering), None);

        // A cut forgets room not zeroed yet, and the blocks past it.
        file.zero_room(file.end(), 1 << 20);
        file.cut(10_000);
        device.0.truncate(10_000);
        let after_cut = append(&mut file, &mut device, &mut pool, &[&[6; 8000]]);
        assert_eq!(after_cut.offset, 8192);
        assert!(!after_cut.overwrite, "blocks past the cut are gone");
        assert_eq!(
            file.take_zeroing(after_cut),
            None,
            "the room went with the cut"
        );
    }

    #[test]
    fn a_reopened_file_reads_its_tail_once() {
        let mut device = Device(vec![9; 6000]);
        let mut file = DirectFile::new(6000);
        let mut buffer = AlignedBuffer::default();
        assert_eq!(
            file.plan(6000, [&b"a"[..]], &mut buffer),
            Plan::ReadTail { offset: 4096 }
        );
        assert_eq!(
            file.set_tail(4096, &device.0[4096..5000]),
            Err(ShortTail {
                offset: 4096,
                read: 904,
                needed: 1904
            })
        );
        file.set_tail(4096, device.read_block(4096))
            .expect("whole tail");
        let Plan::Ready(write) = file.plan(6000, [&b"a"[..]], &mut buffer) else {
            panic!("the tail is known");
        };
        device.write(write, &buffer);
        assert!(device.0[..6000].iter().all(|&byte| byte == 9));
        assert_eq!(device.0[6000], b'a');
        assert_eq!(
            DirectFile::new(8192).plan(8192, [&b"b"[..]], &mut buffer),
            Plan::Ready(DirectWrite {
                offset: 8192,
                len: 4096,
                overwrite: false,
            })
        );
    }

    /// Random appends, cuts and reopens: the device always holds exactly the
    /// bytes appended (less those cut), then zeros to the block boundary.
    #[test]
    fn random_appends_cuts_and_reopens_keep_the_bytes() {
        for seed in 0..200 {
            let mut rng = Prng::new(seed);
            let (mut file, mut device, mut pool) =
                (DirectFile::new(0), Device::default(), BufferPool::default());
            let mut expected: Vec<u8> = Vec::new();
            for step in 0..40 {
                match rng.next_u64() % 10 {
                    0 => {
                        let len = rng.next_u64() % (expected.len() as u64 + 1);
                        file.cut(len);
                        expected.truncate(len as usize);
                        device.0.truncate(len as usize); // as `ftruncate` does
                    }
                    1 => file = DirectFile::new(file.end()),
                    _ => {
                        let parts: Vec<Vec<u8>> = (0..1 + rng.next_u64() % 4)
                            .map(|part| {
                                let len = (rng.next_u64() % 9000) as usize;
                                vec![(seed as u8) ^ (step as u8) ^ (part as u8) | 1; len]
                            })
                            .collect();
                        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
                        append(&mut file, &mut device, &mut pool, &slices);
                        parts
                            .iter()
                            .for_each(|part| expected.extend_from_slice(part));
                    }
                }
                assert_eq!(file.end(), expected.len() as u64, "seed {seed} step {step}");
                assert_eq!(
                    &device.0[..expected.len()],
                    &expected[..],
                    "seed {seed} step {step}"
                );
                assert!(
                    device.0[expected.len()..].iter().all(|&byte| byte == 0),
                    "seed {seed} step {step}"
                );
                file.assert_invariants();
            }
        }
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut pool = BufferPool::default();
        let buffers: Vec<AlignedBuffer> = (0..POOLED_BLOCKS_MAX / 4 + 5)
            .map(|_| {
                let mut buffer = pool.take();
                buffer.set_blocks(4);
                buffer
            })
            .collect();
        buffers.into_iter().for_each(|buffer| pool.put(buffer));
        assert_eq!(pool.pooled(), POOLED_BLOCKS_MAX / 4, "bounded by blocks");
        let mut reused = pool.take();
        reused.set_blocks(2);
        assert_eq!(reused.as_bytes().len(), 2 * DIRECT_BLOCK_BYTES);
        assert_eq!(reused.held_blocks(), 4, "a reused buffer keeps its memory");
        let mut pool = BufferPool::default();
        let (mut small, mut large) = (pool.take(), pool.take());
        small.set_blocks(POOLED_BUFFER_BLOCKS_MAX);
        large.set_blocks(POOLED_BUFFER_BLOCKS_MAX + 1);
        pool.put(large);
        assert_eq!(pool.pooled(), 0, "a buffer past the size bound is dropped");
        pool.put(small);
        assert_eq!(pool.pooled(), 1);
    }
}
