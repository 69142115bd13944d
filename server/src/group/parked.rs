//! A partition's long polls: fetches at the high watermark that wait for
//! records to commit, each until its deadline. Bounded: at most
//! [`PARKED_FETCHES_MAX`] wait per group; more are answered at once (empty).

use std::collections::VecDeque;
use std::time::Instant;

use strand_wire::RequestHeader;
use strand_wire::ops::FetchRequest;

/// Long polls that may wait per group.
pub const PARKED_FETCHES_MAX: usize = 1024;

/// A long poll waiting for records to commit.
pub(crate) struct ParkedFetch {
    /// The request's header, to answer it.
    pub(crate) request: RequestHeader,
    /// What it asks for.
    pub(crate) fetch: FetchRequest,
    /// When it is answered with what there is.
    deadline: Instant,
}

/// The long polls of one group, in the order they came.
#[derive(Default)]
pub(crate) struct ParkedFetches {
    waiting: VecDeque<ParkedFetch>,
}

impl ParkedFetches {
    /// Whether no long poll waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Whether another long poll may wait.
    pub(crate) fn has_room(&self) -> bool {
        self.waiting.len() < PARKED_FETCHES_MAX
    }

    /// Parks `fetch` until `deadline` (the caller checked
    /// [`ParkedFetches::has_room`]).
    pub(crate) fn park(&mut self, request: RequestHeader, fetch: FetchRequest, deadline: Instant) {
        assert!(
            self.has_room(),
            "{PARKED_FETCHES_MAX} long polls wait already"
        );
        self.waiting.push_back(ParkedFetch {
            request,
            fetch,
            deadline,
        });
    }

    /// Takes, in order, the long polls that records below `high_watermark`
    /// now answer; the rest wait on, in order.
    pub(crate) fn take_answerable(&mut self, high_watermark: u64) -> Vec<ParkedFetch> {
        self.take_where(|parked| parked.fetch.offset < high_watermark)
    }

    /// Takes, in order, the long polls whose deadline passed by `now`, or
    /// all of them when this replica no longer serves as primary.
    pub(crate) fn take_due(&mut self, now: Instant, serving: bool) -> Vec<ParkedFetch> {
        self.take_where(|parked| parked.deadline <= now || !serving)
    }

    fn take_where(&mut self, taken: impl Fn(&ParkedFetch) -> bool) -> Vec<ParkedFetch> {
        let mut waiting = VecDeque::with_capacity(self.waiting.len());
        let mut taken_now = Vec::new();
        while let Some(parked) = self.waiting.pop_front() {
            if taken(&parked) {
                taken_now.push(parked);
            } else {
                waiting.push_back(parked);
            }
        }
        self.waiting = waiting;
        taken_now
    }
}
