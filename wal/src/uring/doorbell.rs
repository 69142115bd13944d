//! The [`Doorbell`]: how a submitter wakes the writer out of an io_uring
//! wait. An eventfd, counts of requests rung in and awaited, and the read of
//! it that the ring keeps armed while the writer waits.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering, fence};

use io_uring::{opcode, types};

use crate::storage::IoObserver;

use super::UringStorage;

/// The `user_data` of the doorbell's read; chains use `slot << 32 | op`.
pub(super) const DOORBELL_USER_DATA: u64 = u64::MAX;

/// Wakes the writer thread out of an io_uring wait.
///
/// An eventfd on which the ring keeps a read armed while the writer waits,
/// a count of requests submitted, and the count at which the parked writer
/// wants to be woken (one more request when it waits for I/O; the rest of
/// the group when it gathers one, so a group of n requests costs one wake,
/// not n). A submitter rings after queueing its request; only the ring that
/// reaches the mark costs a syscall.
#[derive(Debug)]
pub struct Doorbell {
    eventfd: File,
    /// Requests rung in so far.
    arrivals: AtomicU64,
    /// Wake the writer when `arrivals` reaches this; `NOT_PARKED` while it runs.
    wake_at: AtomicU64,
}

/// `Doorbell::wake_at` while the writer is not parked.
const NOT_PARKED: u64 = u64::MAX;

impl Doorbell {
    pub(super) fn new() -> io::Result<Doorbell> {
        // SAFETY: eventfd takes no pointers; its result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor we just created and nobody else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Doorbell {
            eventfd: File::from(owned),
            arrivals: AtomicU64::new(0),
            wake_at: AtomicU64::new(NOT_PARKED),
        })
    }

    /// Counts one queued request and wakes the writer if it is parked and
    /// this request is the one it waits for. Call after the request is queued.
    pub fn ring(&self) {
        let arrived = self.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
        // Pairs with the fence in `park`: either the writer sees the request
        // when it checks the queue after parking, or we see its mark.
        fence(Ordering::SeqCst);
        if arrived >= self.wake_at.load(Ordering::SeqCst) {
            self.ring_now();
        }
    }

    /// Wakes the writer if it is parked, whatever it waits for (an open or a
    /// shutdown must not wait for a group to fill).
    pub(crate) fn ring_now(&self) {
        if self.wake_at.swap(NOT_PARKED, Ordering::SeqCst) != NOT_PARKED {
            self.signal();
        }
    }

    /// Marks the writer as about to wait until `requests` more arrive (at
    /// least one). It must check its queue after this.
    pub(crate) fn park(&self, requests: usize) {
        let requests = requests.max(1) as u64;
        let mark = self
            .arrivals
            .load(Ordering::SeqCst)
            .saturating_add(requests);
        self.wake_at
            .store(mark.min(NOT_PARKED - 1), Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Marks the writer as running.
    pub(crate) fn unpark(&self) {
        self.wake_at.store(NOT_PARKED, Ordering::SeqCst);
    }

    pub(crate) fn signal(&self) {
        // EAGAIN means the counter is already non-zero: the wake is pending.
        let _ = (&self.eventfd).write(&1u64.to_ne_bytes());
    }

    fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.eventfd.as_raw_fd()
    }
}

impl UringStorage {
    /// Keeps a read of the doorbell's eventfd armed, so a ring ends a wait.
    pub(super) fn arm_doorbell(&mut self, observer: &dyn IoObserver) {
        if self.doorbell_armed {
            return;
        }
        self.make_room(1, 1, observer);
        let entry = opcode::Read::new(
            types::Fd(self.doorbell.raw_fd()),
            self.doorbell_buffer.as_mut_ptr(),
            8,
        )
        .build()
        .user_data(DOORBELL_USER_DATA);
        // SAFETY: the read fills `doorbell_buffer`, a heap buffer owned by the
        // storage and never touched elsewhere while the read is armed; `Drop`
        // completes the read before freeing it.
        unsafe { self.ring.submission().push(&entry) }.expect("room was made above");
        self.doorbell_armed = true;
        self.entries_in_flight += 1;
    }
}
