//! The disks' side of the world. Each replica's partition lives on the
//! WAL's in-memory crash-modelling disk ([`MemoryDisk`]) with manual turns:
//! what a host asks of its disk happens one fsync latency later (a WAL turn
//! runs its writes and syncs). A crash is a process crash or a power loss.
//! A process crash keeps every written byte where reads see it, still
//! unsynced: a power loss later, before a sync covers it, can take it yet. A
//! power loss keeps, per file, what the crash model draws of the unsynced
//! writes (none, a prefix, a torn prefix). A crash may strike inside a WAL
//! turn (between a write and the fdatasync meant to cover it): a replica
//! that crashes with requests queued may die mid-turn, and crashes armed to
//! strike a few storage operations ahead count each write and sync of a
//! turn, at a running replica and inside a restart's open. A restart opens
//! the host over what is left, through the same `GroupHost::open` the node
//! runs. Storage faults are damage the partition can see at open: a flipped
//! bit in an entry that is not the log's last, a segment cut below what the
//! superblock records as durable, a flipped bit in the older superblock
//! copy, and the log's newest entry damaged (a flipped bit, or its segment
//! cut inside it), which bytes alone cannot tell from a write a crash cut
//! short. Like a lossy crash, a storage fault damages a replica: faults
//! strike a minority of the replicas at most, and only while fewer than W
//! are damaged at once (see `faults`).

use std::path::Path;

use strand_consensus::{Config, Timeouts};
use strand_host::group_host::{GroupHost, HostSpec, Mutations};
use strand_partition::durable_mark::MARK_BYTES;
use strand_partition::layout::superblock_path;
use strand_partition::{
    LogConfig, MemoryDisk, Partition, PartitionConfig, Recovery, RetentionPolicy,
};
use strand_wal::{CrashMode, FRAME_HEADER_BYTES};
use strand_wire::{Durability, HEADER_SIZE, Message};

use super::{CLUSTER, Device, GROUP, World};
use crate::checkers::{OpenDurable, Violation};
use crate::network::Packet;
use crate::options::Options;

/// Where every replica keeps its partition (each on its own disk).
pub(super) const DIR: &str = "/sim/partition";

/// Segment size: small, so runs seal and roll segments.
const SEGMENT_BYTES: u64 = 16 * 1024;
/// Segment size under a retention limit: a few simulated prepares.
const RETAINED_SEGMENT_BYTES: u64 = 2 * 1024;
/// Committed headers kept below the commit under a retention limit.
const RETAINED_HEADERS_COMMITTED_MAX: usize = 32;

/// One slot's storage and what the world knows of the replica there.
#[derive(Default)]
pub(super) struct SlotDisk {
    /// The disk while the replica is down.
    pub stored: Option<MemoryDisk>,
    /// The world's handle to the disk while the replica runs (its host
    /// holds the other).
    pub device: Option<Device>,
    /// A replica was ever started here (its directory may exist).
    pub created: bool,
    /// The assignment epoch this replica joined the group in (0 for the
    /// replicas the group was created with).
    pub joined_epoch: u32,
    /// The epoch that removed this replica, once it retired.
    pub retired_epoch: Option<u32>,
    /// The cursor log's length when checker 6 last looked.
    pub cursor_tail_checked: u64,
    /// The record offset checker 13 has read through on this replica.
    pub read_through: u64,
    /// The node's boot count: raised at every start (durable, as a node's
    /// own boot file is), so that a clean mark holds only in the boot after
    /// it.
    pub boots: u64,
    /// The disk's count of injected faults that struck, when the replica's
    /// group last opened: a storage failure with none struck since is a bug.
    pub faults_struck_at_open: u64,
    /// When the group, its storage failed, is opened again.
    pub reopen_at: Option<u64>,
    /// A read fault armed for the replica's next input, on this file.
    pub read_fault: Option<std::path::PathBuf>,
}

impl SlotDisk {
    /// The slot of a replica that joins the group in `epoch`.
    pub fn joining(epoch: u32) -> SlotDisk {
        SlotDisk {
            joined_epoch: epoch,
            ..SlotDisk::default()
        }
    }
}

/// A storage fault the partition can see at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StorageFault {
    /// A bit of op's entry (its prepare header or body) flipped.
    EntryFlip,
    /// A segment cut at an entry the superblock records as durable.
    Cut,
    /// A bit of the older superblock copy flipped.
    SuperblockCopy,
    /// The log's newest entry damaged: a bit of it flipped, or its segment
    /// cut inside it (after its frame header, so that what is left of it is
    /// never zeros alone).
    NewestEntry,
    /// A misdirected write: one op's entry landed over another's place (in
    /// its segment or another), leaving zeros where it belonged.
    Misdirected,
}

impl World {
    /// Hands `message` from endpoint `from` to the network for `to`.
    pub(super) fn post(&mut self, from: u16, to: u16, message: Message) {
        let packet = Packet { from, to, message };
        self.network
            .send(self.now, packet, &mut self.prng, self.faults_on);
    }

    pub(super) fn fsync_latency(&mut self) -> u64 {
        let spread = self.options.fsync_max_ticks - self.options.fsync_min_ticks;
        self.options.fsync_min_ticks + self.prng.below(spread + 1)
    }

    // ----- WAL turns -------------------------------------------------------------

    /// Schedules a WAL turn one fsync latency from now if the replica's disk
    /// has requests waiting and none is scheduled.
    pub(super) fn schedule_turn(&mut self, replica: u8) {
        let index = usize::from(replica);
        if self.turn_pending[index] {
            return;
        }
        let queued = self
            .device(index)
            .is_some_and(|disk| disk.get().has_queued());
        if !queued {
            return;
        }
        self.turn_pending[index] = true;
        let at = self.now + self.fsync_latency();
        self.turn_sequence += 1;
        self.turns
            .insert((at, self.turn_sequence), (replica, self.generation[index]));
    }

    /// Runs the WAL turns due now and hands their completions to the hosts.
    pub(super) fn run_due_turns(&mut self) -> Result<(), Violation> {
        let later = self.turns.split_off(&(self.now + 1, 0));
        let due = std::mem::replace(&mut self.turns, later);
        for (replica, generation) in due.into_values() {
            let index = usize::from(replica);
            if self.generation[index] != generation {
                continue; // scheduled for an earlier run of the slot
            }
            self.turn_pending[index] = false;
            let Some(disk) = self.device(index) else {
                continue;
            };
            disk.get_mut().run_turn();
            // The host holds the only other handle while it runs.
            drop(disk);
            self.run_host(replica, |_, _| {})?;
        }
        Ok(())
    }

    // ----- starting and stopping ---------------------------------------------

    /// What the node knows of the group when the replica at `replica` opens.
    fn host_spec(&self, replica: u8) -> HostSpec {
        HostSpec {
            replica: Config {
                cluster: CLUSTER,
                group: GROUP,
                replica,
                memberships: self.memberships_for(),
                durability: self.options.durability,
                cursor_durability: self.options.durability,
                timeouts: Timeouts::default(),
                seed: self.options.seed ^ (u64::from(replica) << 32) ^ self.now,
            },
            confirm: self.options.confirm,
            dir: DIR.into(),
            catalog_nodes: None,
            storage: PartitionConfig {
                boot: self.disks[usize::from(replica)].boots,
                ..partition_config(&self.options)
            },
            retention: RetentionPolicy {
                retention_bytes: (self.options.retention_bytes > 0)
                    .then_some(self.options.retention_bytes),
                retention_ms: None,
            },
        }
    }

    /// The storage protections this run switches off.
    fn mutations(&self) -> Mutations {
        Mutations {
            trust_unclean: self.options.mutation_trust_unclean,
            skip_cut: self.options.mutation_skip_cut,
            install_unmarked: self.options.mutation_install_unmarked,
            resume_any_stop: self.options.mutation_resume_any_stop,
            trust_damaged_tail: self.options.mutation_trust_damaged_tail,
            superblock_unsynced: self.options.mutation_superblock_unsynced,
            page_cache_trusted: self.options.mutation_page_cache_trusted,
            trusted_gate_off: self.options.mutation_untrusted_gate,
            reads_uncommitted: self.options.mutation_reads_uncommitted,
            old_quorum_off: self.options.mutation_new_quorum_only,
        }
    }

    /// Starts the replica at `replica` over its disk (a fresh one the first
    /// time), as a node opens a group.
    pub(super) fn start(&mut self, replica: u8) {
        self.disks[usize::from(replica)].boots += 1;
        self.open_host(replica, false);
    }

    /// Opens the group at `replica` over its stored disk, as a node does at
    /// its start or, `after_failed_write`, again in the same process after
    /// the group's storage failed (see `io_faults`).
    pub(super) fn open_host(&mut self, replica: u8, after_failed_write: bool) {
        let index = usize::from(replica);
        let seed = self.options.seed ^ (u64::from(replica) << 40) ^ self.now;
        let mut disk = self.disks[index]
            .stored
            .take()
            .unwrap_or_else(|| MemoryDisk::new(seed));
        disk.set_manual_turns(true);
        disk.storage_mut().clear_faults();
        self.disks[index].faults_struck_at_open = disk.storage().faults_struck();
        if self.disks[index].created {
            self.maybe_arm_crash_at_open(replica, &mut disk);
        }
        let mut spec = self.host_spec(replica);
        spec.storage.drop_unsynced = after_failed_write;
        // A failed quarantine or install hands its disk back, and the host
        // reopens from that: a simulated disk's files live only in it.
        let device = Device::new(disk);
        self.disks[index].device = Some(device.clone());
        let reopen = Box::new(|| -> Device {
            panic!("a simulated disk is never made anew: a failed swap hands it back")
        });
        #[cfg(feature = "mutations")]
        let opened = GroupHost::open_mutated(&spec, device, reopen, self.mutations());
        #[cfg(not(feature = "mutations"))]
        let opened = {
            let _ = self.mutations();
            GroupHost::open(&spec, device, reopen)
        };
        let (host, recovery) = match opened {
            Ok(opened) => opened,
            Err(error) => panic!("replica {replica} cannot open its partition: {error}"),
        };
        if self.disks[index].created
            && let Some(disk) = self.device(index)
            && let Err(violation) =
                OpenDurable.opened(replica, disk.get().storage(), Path::new(DIR))
        {
            self.opened_violation.get_or_insert(violation);
        }
        self.disks[index].created = true;
        self.disks[index].cursor_tail_checked = u64::MAX;
        self.disks[index].read_through = 0;
        let live = host.inspect_replica();
        self.trace.record(
            self.now,
            u16::from(replica),
            if after_failed_write {
                "reopen"
            } else {
                "start"
            },
            &[
                live.view().packed(),
                live.op(),
                live.commit(),
                u64::from(live.trusted()),
                recovery.headers.first().map_or(0, |header| header.op.get()),
                recovery.faulty.first().copied().unwrap_or(0),
                recovery.faulty.len() as u64,
            ],
        );
        self.hosts[index] = Some(host);
        self.down_until[index] = None;
        self.liveness.started(replica, self.now);
        // Effects at start cannot break a checker before any traffic; keep going.
        let _ = self.run_host(replica, |host, _| host.start());
        self.after_start(replica);
    }

    /// Stops the replica at `replica`: a clean shutdown (everything synced,
    /// the clean mark written) or a crash of its disk.
    pub(super) fn stop(&mut self, replica: u8, clean: bool) {
        let index = usize::from(replica);
        let Some(host) = self.hosts[index].take() else {
            return;
        };
        // Only a trusted replica may mark its log cleanly shut down: an
        // untrusted one still lacks what it lost in an earlier crash, so it
        // is left running rather than stopped beyond the promise.
        if clean && !host.progress().trusted {
            self.hosts[index] = Some(host);
            return;
        }
        self.forget_turns(replica);
        self.disks[index].reopen_at = None;
        self.disks[index].read_fault = None;
        if host.storage_open() {
            // What was armed and has not struck goes with the process.
            self.disks[index]
                .device
                .as_ref()
                .expect("a running replica's disk")
                .get_mut()
                .storage_mut()
                .clear_faults();
        }
        // A node that stops while a group's storage has failed closes it
        // without a mark (the close may fail): its files are left as a
        // process crash leaves them.
        let failed = host.storage_failed();
        let op_before = host.inspect_partition().expect("open").op();
        // The world lets go of its handle: the host hands the disk back.
        self.disks[index].device = None;
        let disk = self.close_host(replica, host, clean, failed);
        let clean = clean && !failed;
        if !clean && self.options.durability == Durability::Replicated {
            self.note_loss_at_stop(replica, disk.as_ref(), op_before);
        }
        self.disks[index].stored = disk;
        self.network.forget(u16::from(replica));
        let down = self.options.down_min_ticks
            + self
                .prng
                .below(self.options.down_max_ticks - self.options.down_min_ticks + 1);
        self.down_until[index] = Some(self.now + down);
        self.stats.stops += 1;
        self.trace.record(
            self.now,
            u16::from(replica),
            if clean { "shutdown" } else { "crash" },
            &[],
        );
    }

    /// Closes the host of the stopping replica as its process ends: a clean
    /// shutdown closes it (a power loss armed and not yet struck is called
    /// off: the shutdown completed), one whose storage failed is left as a
    /// process crash leaves it, a crash maybe inside a WAL turn. The disk
    /// as the next process finds it.
    fn close_host(
        &mut self,
        replica: u8,
        mut host: GroupHost<Device>,
        clean: bool,
        failed: bool,
    ) -> Option<MemoryDisk> {
        assert!(
            self.disks[usize::from(replica)].device.is_none(),
            "the world let go of the disk first"
        );
        if clean && failed {
            return host.abandon().map(Device::into_disk).map(|mut disk| {
                disk.restore_power();
                disk.crash(CrashMode::ProcessCrash);
                disk
            });
        }
        if clean {
            return match host.close() {
                Ok(closed) => closed.disk.map(Device::into_disk).map(|mut disk| {
                    disk.restore_power();
                    disk
                }),
                Err(error) => panic!("replica {replica} could not close its partition: {error}"),
            };
        }
        host.abandon().map(Device::into_disk).map(|mut disk| {
            self.interrupt_turn(&mut disk);
            disk.crash(CrashMode::Random);
            disk
        })
    }

    /// After an unclean stop under `replicated`: the replica counts as
    /// damaged up to the op it held if a restart would find less, or
    /// damaged entries.
    fn note_loss_at_stop(&mut self, replica: u8, disk: Option<&MemoryDisk>, op_before: u64) {
        let recovered = disk.and_then(|disk| probe(disk, &self.options));
        let lost = recovered
            .is_none_or(|(_, recovery)| recovery.op < op_before || !recovery.faulty.is_empty());
        if lost {
            let previous = self.damaged.get(&replica).copied().unwrap_or(0);
            self.damaged.insert(replica, op_before.max(previous));
        }
    }

    /// A replica that crashes with WAL requests queued may die while its
    /// writer is inside a turn: part of the turn runs first (its writes may
    /// then be in the page cache only, their fdatasync never issued), and
    /// the crash (of the process, or a power loss) strikes there.
    fn interrupt_turn(&mut self, disk: &mut MemoryDisk) {
        if !disk.has_queued() || !self.prng.chance(1, 2) {
            return;
        }
        disk.lose_power_after(1 + self.prng.below(4), CrashMode::Random);
        disk.run_turn();
    }

    /// Maybe arms a crash (a process crash or a power loss) to strike while
    /// the replica at `replica` opens its partition after a restart: inside
    /// the open's own syncs and superblock writes.
    fn maybe_arm_crash_at_open(&mut self, replica: u8, disk: &mut MemoryDisk) {
        if !self.faults_on
            || self.options.power_loss_ppm == 0
            || !self.prng.chance(1, 4)
            || !self.may_crash(replica)
        {
            return;
        }
        let ops = 1 + self.prng.below(12);
        disk.lose_power_after(ops, CrashMode::Random);
        self.trace
            .record(self.now, u16::from(replica), "crash_at_open_armed", &[ops]);
    }

    /// Maybe arms a crash (a power loss, or a process crash) at the running
    /// replica `replica`: it strikes a few storage operations later (a WAL
    /// turn's writes and syncs count one each), wherever the replica then is.
    pub(super) fn maybe_arm_power_loss(&mut self, replica: u8) {
        let index = usize::from(replica);
        let Some(host) = self.hosts[index].as_ref() else {
            return;
        };
        // A replica receiving a state transfer loses power more often, and
        // further ahead: the install at its end (closing the partition's
        // files, the swap's renames) is many storage operations long.
        let (ppm, ops_ahead_max) = if host.receiving_transfer() {
            (self.options.power_loss_ppm * 10, 32)
        } else {
            (self.options.power_loss_ppm, 12)
        };
        if !self.prng.chance(ppm, 1_000_000) || !self.may_crash(replica) {
            return;
        }
        let ops = self.prng.below(ops_ahead_max);
        if let Some(disk) = self.device(index) {
            disk.get_mut().lose_power_after(ops, CrashMode::Random);
        }
        self.trace
            .record(self.now, u16::from(replica), "power_loss_armed", &[ops]);
    }

    /// Calls off every power loss armed and not yet struck: the quiet phase
    /// has no faults, and one striking there would stop a replica that the
    /// quiescence checker takes for a live, idle one.
    pub(super) fn call_off_power_losses(&mut self) {
        for index in 0..self.hosts.len() {
            if let Some(disk) = self.device(index) {
                disk.get_mut().restore_power();
                // I/O faults armed and not struck too.
                disk.get_mut().storage_mut().clear_faults();
            }
        }
        for disk in &mut self.disks {
            disk.read_fault = None;
        }
    }

    /// Whether the replica's disk lost power during its last input: the
    /// process died at that instant, so nothing it put out since counts.
    pub(super) fn power_lost(&mut self, replica: u8) -> bool {
        self.device(usize::from(replica))
            .is_some_and(|disk| disk.get().power_lost())
    }

    /// A power loss struck the replica: it crashes with the image the loss
    /// left (true), or, beyond the durability promise by now, the loss is
    /// called off and the replica runs on (false).
    pub(super) fn power_loss_strikes(&mut self, replica: u8) -> bool {
        if self.may_crash(replica) {
            self.trace
                .record(self.now, u16::from(replica), "power_loss", &[]);
            self.stop(replica, false);
            return true;
        }
        if let Some(disk) = self.device(usize::from(replica)) {
            disk.get_mut().restore_power();
        }
        false
    }

    /// The world's handle to the disk of the replica at `index`, while it
    /// runs with its partition open (a group given up holds none).
    pub(super) fn device(&self, index: usize) -> Option<Device> {
        let host = self.hosts[index].as_ref()?;
        if !host.storage_open() {
            return None;
        }
        self.disks[index].device.clone()
    }

    /// WAL turns scheduled for the slot's current run no longer fire.
    pub(super) fn forget_turns(&mut self, replica: u8) {
        let index = usize::from(replica);
        self.generation[index] += 1;
        self.turn_pending[index] = false;
    }

    // ----- storage faults ------------------------------------------------------

    /// Damages the stopped replica's disk in a way its partition sees at
    /// open; false if there was nothing to damage.
    pub(super) fn damage_storage(&mut self, replica: u8) -> bool {
        let index = usize::from(replica);
        let Some(disk) = self.disks[index].stored.as_ref() else {
            return false;
        };
        let Some((partition, recovery)) = probe(disk, &self.options) else {
            return false;
        };
        // Without lost writes, the draw is the one seeds were run with
        // before they existed.
        let kinds = if self.options.lost_writes { 5 } else { 4 };
        let fault = match self.prng.below(kinds) {
            0 => StorageFault::EntryFlip,
            1 => StorageFault::Cut,
            2 => StorageFault::SuperblockCopy,
            3 => StorageFault::NewestEntry,
            _ => StorageFault::Misdirected,
        };
        let damage = match fault {
            StorageFault::EntryFlip => self.entry_flip(&partition, &recovery),
            StorageFault::Cut => self.cut(&partition, &recovery),
            StorageFault::SuperblockCopy => self.superblock_flip(&partition, &recovery),
            StorageFault::NewestEntry => self.newest_entry(&partition, &recovery),
            StorageFault::Misdirected => self.misdirected(&partition, &recovery),
        };
        let Some((path, action, op)) = damage else {
            return false;
        };
        let storage = self.disks[index]
            .stored
            .as_mut()
            .expect("checked above")
            .storage_mut();
        let target = match &action {
            Damage::Misdirect { to, .. } => to,
            _ => &path,
        };
        if storage.contents(&path).is_none() || storage.contents(target).is_none() {
            // The probe's open created it (a copy the replica never wrote,
            // or one an interrupted install it finished put in place).
            return false;
        }
        let applied = match &action {
            Damage::Flip { offset, bit } => storage.flip_bit(&path, *offset, *bit),
            Damage::Cut { len } => storage.cut(&path, *len),
            Damage::Misdirect {
                offset,
                len,
                to,
                to_offset,
            } => storage.misdirect(&path, *offset, *len, to, *to_offset),
        };
        assert!(applied.is_ok(), "damaging {}: {applied:?}", path.display());
        self.trace.record(
            self.now,
            u16::from(replica),
            "storage_fault",
            &[fault as u64, op],
        );
        true
    }

    /// A flipped bit in the prepare (header or body) of an op that is not
    /// the log's last: the scan finds it between good entries.
    fn entry_flip(
        &mut self,
        partition: &Partition<MemoryDisk>,
        recovery: &Recovery,
    ) -> Option<(std::path::PathBuf, Damage, u64)> {
        let first = partition.head_op().max(1);
        if recovery.op <= first {
            return None;
        }
        let op = first + self.prng.below(recovery.op - first);
        let location = partition.entry_location(op)?;
        let payload = location.frame_len - FRAME_HEADER_BYTES as u64;
        let within = if self.prng.chance(1, 2) || payload <= HEADER_SIZE as u64 {
            self.prng.below(HEADER_SIZE as u64)
        } else {
            HEADER_SIZE as u64 + self.prng.below(payload - HEADER_SIZE as u64)
        };
        let offset = location.position + FRAME_HEADER_BYTES as u64 + within;
        let bit = self.prng.below(8) as u8;
        Some((location.path, Damage::Flip { offset, bit }, op))
    }

    /// The log's newest entry damaged, as a failing disk may damage an entry
    /// long durable and acked: a flipped bit in its prepare (header or
    /// body), or its segment cut inside it. From bytes alone it looks like a
    /// write a crash cut short; the open must not count it as never had.
    fn newest_entry(
        &mut self,
        partition: &Partition<MemoryDisk>,
        recovery: &Recovery,
    ) -> Option<(std::path::PathBuf, Damage, u64)> {
        let op = recovery.op;
        if op < partition.head_op().max(1) {
            return None;
        }
        let location = partition.entry_location(op)?;
        let payload = location.frame_len - FRAME_HEADER_BYTES as u64;
        let body = location.position + FRAME_HEADER_BYTES as u64;
        if self.prng.chance(1, 3) {
            // Whatever is left of the entry holds its frame header, whose
            // length is never zero.
            let len = body + self.prng.below(payload);
            return Some((location.path, Damage::Cut { len }, op));
        }
        let within = if self.prng.chance(1, 2) || payload <= HEADER_SIZE as u64 {
            self.prng.below(HEADER_SIZE as u64)
        } else {
            HEADER_SIZE as u64 + self.prng.below(payload - HEADER_SIZE as u64)
        };
        let bit = self.prng.below(8) as u8;
        let flip = Damage::Flip {
            offset: body + within,
            bit,
        };
        Some((location.path, flip, op))
    }

    /// A segment cut at an entry: ops lost from a sealed segment, or from the
    /// active one below the superblock's durable checkpoint, are reported.
    fn cut(
        &mut self,
        partition: &Partition<MemoryDisk>,
        recovery: &Recovery,
    ) -> Option<(std::path::PathBuf, Damage, u64)> {
        let first = partition.head_op().max(1);
        if recovery.op < first {
            return None;
        }
        let op = first + self.prng.below(recovery.op - first + 1);
        let location = partition.entry_location(op)?;
        let last = partition.entry_location(recovery.op)?;
        let sealed = location.path != last.path;
        if !sealed && recovery.op > recovery.op_checkpoint && !self.options.lost_writes {
            // Newest entries gone without a trace: only the durable mark
            // (in the model with lost writes) says they were there.
            return None;
        }
        Some((
            location.path,
            Damage::Cut {
                len: location.position,
            },
            op,
        ))
    }

    /// A misdirected write: the entry of one op (its whole frame) landed at
    /// another op's place, in the same segment or another, leaving zeros
    /// where it belonged. The landing place then holds a valid frame of the
    /// wrong op, or a torn piece of one. Zeros ending the active segment
    /// past the durable checkpoint would read as a log that ends earlier, a
    /// loss no open can see from the bytes (README's known limit), so the
    /// zeroed entry is one the superblock vouches for, as for a cut.
    fn misdirected(
        &mut self,
        partition: &Partition<MemoryDisk>,
        recovery: &Recovery,
    ) -> Option<(std::path::PathBuf, Damage, u64)> {
        let first = partition.head_op().max(1);
        if recovery.op <= first {
            return None;
        }
        let span = recovery.op - first + 1;
        let (op, victim_op) = (first + self.prng.below(span), first + self.prng.below(span));
        if op == victim_op {
            return None;
        }
        let source = partition.entry_location(op)?;
        let victim = partition.entry_location(victim_op)?;
        let last = partition.entry_location(recovery.op)?;
        if source.path == last.path && recovery.op > recovery.op_checkpoint {
            return None;
        }
        let misdirect = Damage::Misdirect {
            offset: source.position,
            len: source.frame_len,
            to: victim.path,
            to_offset: victim.position,
        };
        Some((source.path, misdirect, op))
    }

    /// A flipped bit in the superblock copy that is not the newest: open
    /// falls back to nothing older than what it had.
    fn superblock_flip(
        &mut self,
        partition: &Partition<MemoryDisk>,
        recovery: &Recovery,
    ) -> Option<(std::path::PathBuf, Damage, u64)> {
        // The sequence read at open, before the probe wrote anything.
        let older = ((recovery.superblock_sequence + 1) % 2) as u8;
        let path = superblock_path(Path::new(DIR), older);
        let len = partition.disk().storage().contents(&path)?.len() as u64;
        if len == 0 {
            return None;
        }
        let offset = self.prng.below(len);
        let bit = self.prng.below(8) as u8;
        Some((path, Damage::Flip { offset, bit }, 0))
    }
}

/// What a storage fault does to a file.
#[derive(Debug, Clone)]
enum Damage {
    Flip {
        offset: u64,
        bit: u8,
    },
    Cut {
        len: u64,
    },
    /// `len` bytes meant for the file at `offset` landed at `to_offset` of
    /// `to` instead.
    Misdirect {
        offset: u64,
        len: u64,
        to: std::path::PathBuf,
        to_offset: u64,
    },
}

/// The partition layout the simulator's replicas use: segments of a few
/// ops under a retention limit (so that retention drops some within a run),
/// of a few dozen otherwise.
pub(super) fn partition_config(options: &Options) -> PartitionConfig {
    let segment_bytes_max = if options.retention_bytes > 0 {
        RETAINED_SEGMENT_BYTES
    } else {
        SEGMENT_BYTES
    };
    // A reopened replica reads back the last `headers_committed_max`
    // committed headers: fewer under retention, so that its client table
    // must come from the superblock.
    let headers_committed_max = if options.retention_bytes > 0 {
        RETAINED_HEADERS_COMMITTED_MAX
    } else {
        PartitionConfig::default().headers_committed_max
    };
    PartitionConfig {
        log: LogConfig {
            segment_bytes_max,
            ..LogConfig::default()
        },
        headers_committed_max,
        // A few marks a file, so that runs of a few dozen ops move them.
        durable_mark_rotate_bytes: 8 * MARK_BYTES as u64,
        ..PartitionConfig::default()
    }
}

/// Opens a copy of `disk`'s storage to see what a restart would find,
/// leaving the disk itself untouched.
fn probe(disk: &MemoryDisk, options: &Options) -> Option<(Partition<MemoryDisk>, Recovery)> {
    let copy = MemoryDisk::from_storage(disk.storage().clone());
    Partition::open(copy, Path::new(DIR), partition_config(options)).ok()
}
