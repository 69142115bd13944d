//! A shard: one of a fixed set of threads per node (default one per core;
//! the node holds them as its `shards`), hosting many groups'
//! actors. A group lives on one shard for its whole life, so its inputs are
//! handled in order; a shard drains a batch of
//! inputs, then lets each group it touched settle its host once (batching
//! at the shard), and its groups' frames to each peer leave as one batch
//! ([`crate::net::outbox`]). On the node's tick it visits only the groups due on
//! that tick ([`strand_host::ticks`]): a group whose next timeout is five
//! ticks away is visited once, told of the four it skipped, and a quiet
//! group (idle, its replica's timers stopped) is due on no tick until its
//! next input, so an idle group costs nothing. The periodic storage check
//! (age retention, cursor compaction, a quiet group's commit persisted) is
//! spread over the ticks of its period, a few groups per tick. Node-level
//! liveness changes of a peer reach every group of the shard once, through
//! the control queue (quiet groups rely on them to notice a dead primary).
//!
//! Bounds: a shard's inbox is bounded ([`crate::runtime::inbox`]); nothing
//! is allocated per group up front. Starting and stopping groups goes
//! through the unbounded control queue, polled on every turn and at least
//! once per tick, so neither is ever lost to a full inbox; groups waiting
//! to open are opened `OPENS_PER_TURN_MAX` per turn in order and
//! `OPENS_ON_INPUT_PER_TURN_MAX` more on a frame or request for them, and
//! at the node's stop they are closed `CLOSERS_PER_SHARD` at a time.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::group::Actor;
use crate::metrics;
use crate::net::outbox::Outbox;
use crate::net::replies::error_frame;
use crate::runtime::balance::{Balancer, HANDOVERS_PER_ROUND_MAX, LeadingChange};
use crate::runtime::contain::{self, Failed};
use crate::runtime::inbox::{Control, GroupInbox, ShardQueues, Start};
use crate::runtime::input::Input;
use crate::runtime::storage_retries::StorageRetries;
use crate::shared::Shared;
use strand_host::group_host::OpenError;
use strand_host::ticks::TickSchedule;
use strand_wire::ops::ErrorBody;

/// A turn that takes this long is logged: every group of the shard waited
/// for it, and a backup's primary timeout is a few of them.
const SLOW_TURN: Duration = Duration::from_millis(100);

/// Inputs drained per turn before the touched groups settle.
const INPUTS_PER_TURN_MAX: usize = 1024;

/// Groups opened per turn at most. Opening creates or reads a partition's
/// files (and syncs them): a node told to host thousands of groups at once
/// opens them a few per turn, so the groups it already hosts keep their
/// timers and answer their peers in between, rather than waiting seconds
/// and being replaced by view changes. A group that gets a peer's frame or a
/// client's request while it waits is opened at once, up to
/// `OPENS_ON_INPUT_PER_TURN_MAX` per turn.
const OPENS_PER_TURN_MAX: usize = 4;

/// Groups a shard opens per turn at most because an input came for them
/// (a peer's frame or a client's request), beyond the `OPENS_PER_TURN_MAX`
/// it opens in order.
const OPENS_ON_INPUT_PER_TURN_MAX: usize = 16;

/// The retry hint to a request for a group still waiting to open.
const UNOPENED_RETRY_AFTER_MS: u32 = 20;

/// Threads a shard closes its groups on when the node stops. Closing one
/// waits for its syncs and its clean mark's write: thousands closed one after
/// another would pay each wait in turn, while a few at once share the WAL's
/// turns.
const CLOSERS_PER_SHARD: usize = 8;

/// Closes every actor (clean marks where trusted), a few at once, and
/// unregisters each; what they send on the way out goes to the peers.
fn close_all(shared: &Shared, actors: BTreeMap<u64, Actor>, outbox: &Mutex<Outbox>) {
    let queue = std::sync::Mutex::new(actors.into_iter());
    let next = || queue.lock().expect("close queue lock").next();
    std::thread::scope(|scope| {
        for _ in 0..CLOSERS_PER_SHARD {
            scope.spawn(|| {
                while let Some((group, mut actor)) = next() {
                    let span = actor.span();
                    let _entered = span.enter();
                    if let Err(message) = contain::catch(|| actor.shut_down()) {
                        tracing::error!(group, message, "group: closing it panicked");
                    }
                    outbox.lock().expect("outbox lock").flush(shared);
                    metrics::groups_hosted(-1.0);
                    shared.unregister(group);
                }
            });
        }
    });
}

/// `group`'s actor, told first of the ticks it skipped since its last tick
/// or input (see `strand_host::ticks`): every input reaches a group whose
/// timers stand where ticking it on every tick would have left them.
fn caught_up<'a>(
    ticks: &mut TickSchedule,
    actors: &'a mut BTreeMap<u64, Actor>,
    group: u64,
) -> Option<&'a mut Actor> {
    let actor = actors.get_mut(&group)?;
    actor.skip_ticks(ticks.skipped_before_input(group));
    Some(actor)
}

/// Whether an input for a group still waiting to open opens it now, when
/// `opened_this_turn` groups were opened on input this turn. A wakeup does
/// not (each group hosted sends one: at a restart of thousands, opening each
/// on its wakeup made turns of seconds, during which the shard's open groups
/// heard nothing and left their views); a peer's frame or a client's request
/// does, `OPENS_ON_INPUT_PER_TURN_MAX` per turn; anything else always does.
fn opens_on_input(input: &Input, opened_this_turn: usize) -> bool {
    match input {
        Input::Storage => false,
        Input::Peer(_) | Input::Request(_) => opened_this_turn < OPENS_ON_INPUT_PER_TURN_MAX,
        Input::AcceptLoss(_) | Input::Placement | Input::Shutdown | Input::PeerVouch { .. } => true,
        #[cfg(feature = "fault-injection")]
        Input::InjectPanic => true,
    }
}

/// One shard thread's state.
pub(crate) struct Shard {
    shared: Arc<Shared>,
    /// Its own queues' sending sides, for the groups it opens, and the
    /// bytes waiting in its inbox (see [`GroupInbox`]).
    queues: ShardQueues,
    inputs: Receiver<(u64, Input)>,
    controls: Receiver<Control>,
    actors: BTreeMap<u64, Actor>,
    /// When each group next needs a tick (a quiet one: never until an
    /// input); the ticks in between are skipped.
    ticks: TickSchedule,
    /// Groups that took inputs (or a tick) this turn, settled once each
    /// after the inputs and again after the tick.
    touched: Vec<u64>,
    /// Groups it was asked to host and has not opened yet, in order.
    opening: VecDeque<Start>,
    /// Groups opened this turn because an input came for them.
    opens_on_input_this_turn: usize,
    /// Where its groups lead, and which hand over to their preferred
    /// primary ([`crate::runtime::balance`]).
    balancer: Balancer,
    tick: Duration,
    /// How often each group's age limits are applied (and its commit
    /// persisted if behind), and the group checked last: each tick checks
    /// the next few groups, spreading a period's checks over its ticks.
    retention_check: Duration,
    checked_last: Option<u64>,
    /// Groups whose storage failed, to be opened again from disk.
    storage_retries: StorageRetries,
    /// Groups whose code panicked, to be opened again from disk.
    failed: Failed<Start>,
    /// Its groups' frames to peers this turn, handed on at the turn's end.
    outbox: Arc<Mutex<Outbox>>,
    stop_requested: bool,
}

impl Shard {
    /// A shard over `queues`, reading `inputs` and `controls`, hosting
    /// nothing yet.
    pub(crate) fn new(
        shared: &Arc<Shared>,
        queues: ShardQueues,
        inputs: Receiver<(u64, Input)>,
        controls: Receiver<Control>,
    ) -> Shard {
        Shard {
            shared: Arc::clone(shared),
            queues,
            inputs,
            controls,
            actors: BTreeMap::new(),
            ticks: TickSchedule::new(),
            touched: Vec::new(),
            opening: VecDeque::new(),
            opens_on_input_this_turn: 0,
            balancer: Balancer::new(Instant::now()),
            tick: Duration::from_millis(shared.config.tick_ms),
            retention_check: Duration::from_millis(shared.config.retention_check_ms),
            checked_last: None,
            storage_retries: StorageRetries::default(),
            failed: Failed::default(),
            outbox: Arc::default(),
            stop_requested: false,
        }
    }

    /// Runs turns until told to stop, then closes every group.
    pub(crate) fn run(&mut self) {
        let mut next_tick = Instant::now() + self.tick;
        loop {
            if self.take_controls() {
                break;
            }
            self.open_some();
            let wait = if self.opening.is_empty() {
                next_tick.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            self.opens_on_input_this_turn = 0;
            let Some((turn_started, inputs)) = self.take_inputs(wait) else {
                break;
            };
            let delivered = turn_started.elapsed();
            // Settled before the tick, so that the tick finds each group
            // scheduled by what its inputs did.
            self.settle_touched();
            let now = Instant::now();
            if now >= next_tick {
                next_tick += self.tick;
                if next_tick < now {
                    next_tick = now + self.tick;
                }
                self.on_tick(now);
            }
            self.flush_outbox();
            let turn = turn_started.elapsed();
            if turn >= SLOW_TURN {
                tracing::warn!(
                    turn_ms = turn.as_millis() as u64,
                    deliver_ms = delivered.as_millis() as u64,
                    inputs,
                    "shard: a slow turn (its groups' timers and peers waited)"
                );
            }
        }
        self.close();
    }

    /// Waits up to `wait` for an input, then delivers it and up to
    /// [`INPUTS_PER_TURN_MAX`] in all: when the turn started, and how many
    /// inputs it took. `None` once the inbox is gone.
    fn take_inputs(&mut self, wait: Duration) -> Option<(Instant, usize)> {
        match self.inputs.recv_timeout(wait) {
            Ok((group, input)) => {
                let turn_started = Instant::now();
                self.deliver(group, input);
                let mut inputs = 1;
                for _ in 1..INPUTS_PER_TURN_MAX {
                    let Ok((group, input)) = self.inputs.try_recv() else {
                        break;
                    };
                    self.deliver(group, input);
                    inputs += 1;
                }
                Some((turn_started, inputs))
            }
            Err(RecvTimeoutError::Timeout) => Some((Instant::now(), 0)),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The node's tick: the groups due on it ticked (told first of the
    /// ticks they skipped), a balance round, failed groups reopened when
    /// due, the next slice of storage checks, and every group touched
    /// settled.
    fn on_tick(&mut self, now: Instant) {
        for (group, skipped) in self.ticks.tick() {
            let ticked = self.guarded(group, |actor| {
                actor.skip_ticks(skipped);
                actor.on_tick();
            });
            if ticked {
                self.touched.push(group);
            }
        }
        self.balance(now);
        self.reopen_failed_storage(now);
        for start in self.failed.due(now) {
            self.open(start);
        }
        self.check_storage_slice();
        self.settle_touched();
    }

    /// The shard stops: groups waiting to open (or to reopen after a
    /// panic) are forgotten, every open one is closed.
    fn close(&mut self) {
        for start in std::mem::take(&mut self.opening)
            .into_iter()
            .chain(self.failed.drain())
        {
            self.shared.unregister(start.spec.group);
        }
        let actors = std::mem::take(&mut self.actors);
        for group in actors.keys() {
            if !self.ticks.is_awake(*group) {
                metrics::groups_quiet(-1.0);
            }
        }
        close_all(&self.shared, actors, &self.outbox);
    }

    /// Hands the turn's frames to each peer's bus queue, one batch per peer.
    fn flush_outbox(&self) {
        self.outbox.lock().expect("outbox lock").flush(&self.shared);
    }

    /// Opens the groups it was asked to host; true once told to stop.
    fn take_controls(&mut self) -> bool {
        while let Ok(control) = self.controls.try_recv() {
            match control {
                Control::Start(start) => self.opening.push_back(*start),
                Control::Deliver(group, input) => {
                    self.open_now(group);
                    if !self.take_for_failed(group, &input) {
                        self.run_group(group, |actor| actor.on_input(input));
                    }
                }
                Control::Liveness { node, alive } => {
                    self.balancer.liveness(node, alive, Instant::now());
                    let groups: Vec<u64> = self.actors.keys().copied().collect();
                    for group in groups {
                        self.run_group(group, |actor| actor.on_peer_liveness(node, alive));
                    }
                }
                Control::Stop => self.stop_requested = true,
            }
        }
        self.stop_requested
    }

    /// Opens the next few groups waiting to open.
    fn open_some(&mut self) {
        for _ in 0..OPENS_PER_TURN_MAX {
            let Some(start) = self.opening.pop_front() else {
                return;
            };
            self.open(start);
        }
    }

    /// Opens `group` now if it waits to open (an input arrived for it).
    fn open_now(&mut self, group: u64) {
        if let Some(at) = self
            .opening
            .iter()
            .position(|start| start.spec.group == group)
        {
            let start = self.opening.remove(at).expect("a position in the queue");
            self.open(start);
        }
    }

    fn open(&mut self, start: Start) {
        let Start { spec, wal, hosted } = start;
        let group = spec.group;
        // The group's own span (with its replica, view and trust) exists once
        // the actor does: opening runs in one naming the group, starting
        // outside it, so that the lines of its first events are not nested
        // in two spans of one group.
        let span = tracing::info_span!("group", group);
        let inbox = GroupInbox::new(group, &self.queues);
        let down = spec.clone();
        let again = Start {
            spec: spec.clone(),
            wal: wal.clone(),
            hosted: hosted.clone(),
        };
        let outbox = Arc::clone(&self.outbox);
        let shared = Arc::clone(&self.shared);
        let opened = contain::catch(|| {
            let opened = span.in_scope(|| Actor::open(shared, wal, spec, inbox, outbox, hosted));
            let mut actor = opened?;
            actor.start();
            Ok(actor)
        });
        let opened = match opened {
            Ok(opened) => opened,
            Err(message) => return self.failed.record(&self.shared, &down, again, &message),
        };
        match opened {
            Ok(actor) => {
                self.shared.vouching.restore(group);
                self.actors.insert(group, actor);
                // Every group starts awake; settling decides.
                self.ticks.add(group);
                metrics::groups_hosted(1.0);
                self.touched.push(group);
            }
            Err(error) => {
                let _entered = span.enter();
                tracing::error!(%error, "group: cannot open its storage; the group stays down");
                self.shared.unregister(group);
                if matches!(error, OpenError::Storage(_)) {
                    let me = self.shared.config.node;
                    let view =
                        crate::group::attention::failed_open_view(&down, me, &error.to_string());
                    self.shared.publish(view);
                }
            }
        }
    }

    fn deliver(&mut self, group: u64, input: Input) {
        self.queues.backlog.remove(&input);
        if self.take_for_failed(group, &input) {
            return;
        }
        if !self.actors.contains_key(&group) {
            // Its handle was registered before the shard opened it.
            self.take_controls();
            if !opens_on_input(&input, self.opens_on_input_this_turn) {
                return self.turn_away_unopened(input);
            }
            self.opens_on_input_this_turn += 1;
            self.open_now(group);
        }
        // Not hosted (any more): peers retransmit, clients retry.
        self.run_group(group, |actor| actor.on_input(input));
    }

    /// An input for a group that waits to open, past this turn's opens: a
    /// peer's frame is dropped (consensus retransmits), a request is
    /// answered `Busy` (the group opens in its turn, soon).
    fn turn_away_unopened(&self, input: Input) {
        if let Input::Request(request) = input {
            let header = request.header();
            let busy = ErrorBody::Busy {
                retry_after_ms: UNOPENED_RETRY_AFTER_MS,
            };
            let _ = self
                .shared
                .reply(header.client.get(), error_frame(header, &busy));
        }
    }

    /// Lets every group that took inputs run its host's effects; closes the
    /// ones that stopped.
    fn settle_touched(&mut self) {
        self.touched.sort_unstable();
        self.touched.dedup();
        let now = Instant::now();
        for group in std::mem::take(&mut self.touched) {
            if !self.guarded(group, Actor::after_inputs) {
                continue;
            }
            let Some(actor) = self.actors.get_mut(&group) else {
                continue;
            };
            if actor.stopping() {
                let mut actor = self.remove_actor(group);
                if let Err(message) = contain::catch(|| actor.shut_down()) {
                    tracing::error!(group, message, "group: closing it panicked");
                }
                self.storage_retries.forget(group);
                self.shared.unregister(group);
                continue;
            }
            if actor.storage_failed() {
                self.storage_retries.failed(group, now);
            }
            match self
                .balancer
                .note(group, actor.leading(), actor.leads_in_place_of(), now)
            {
                LeadingChange::Gained => metrics::groups_leading(1.0),
                LeadingChange::Lost => metrics::groups_leading(-1.0),
                LeadingChange::Same => {}
            }
            let due = actor.ticks_until_due();
            let was_awake = self.ticks.reschedule(group, due);
            match (was_awake, due.is_some()) {
                (false, true) => metrics::groups_quiet(-1.0),
                (true, false) => {
                    // Gone quiet: no tick publishes its status from now on.
                    metrics::groups_quiet(1.0);
                    actor.publish();
                }
                _ => {}
            }
        }
    }

    /// Takes a group's actor out of the shard, with its bookkeeping (its
    /// handle stays registered).
    fn remove_actor(&mut self, group: u64) -> Actor {
        let actor = self.actors.remove(&group).expect("present");
        if self.balancer.forget(group) {
            metrics::groups_leading(-1.0);
        }
        if !self.ticks.is_awake(group) {
            metrics::groups_quiet(-1.0);
        }
        self.ticks.remove(group);
        metrics::groups_hosted(-1.0);
        actor
    }

    /// Opens again, from disk, each group whose storage failed and whose
    /// wait is over, unless the data disk is still full: a write that found
    /// the disk full poisons the group's files, and a reopen is the restart
    /// of that one group (its log recovered as after a crash, untrusted
    /// until it rejoins its peers).
    fn reopen_failed_storage(&mut self, now: Instant) {
        if self.storage_retries.is_empty() || self.shared.disk.is_full() {
            return;
        }
        for group in self.storage_retries.take_due(now) {
            if !self.actors.contains_key(&group) {
                self.storage_retries.forget(group);
                continue;
            }
            let span = self
                .actors
                .get(&group)
                .map_or_else(tracing::Span::none, Actor::span);
            let entered = span.enter();
            tracing::warn!("group: storage failed earlier; the disk has room: opening it again");
            let actor = self.remove_actor(group);
            let again = actor.parts();
            match contain::catch(|| actor.close_for_reopen()) {
                Ok((spec, wal, hosted)) => {
                    drop(entered);
                    self.open(Start { spec, wal, hosted });
                }
                Err(message) => {
                    let (spec, wal, hosted) = again;
                    let start = Start {
                        spec: spec.clone(),
                        wal,
                        hosted,
                    };
                    self.failed.record(&self.shared, &spec, start, &message);
                }
            }
        }
    }

    /// Applies the next groups' age limits, compacts their cursor logs and
    /// persists their commits if behind (ages pass with no input, so a timer
    /// looks). Each tick takes as many groups, in turn, as spread all of
    /// them over one `retention_check` period: every group is checked once
    /// a period, and a few per tick, never every idle group at once. (All
    /// at once, a node's 1,000 quiet groups wrote 1,000 superblocks in one
    /// burst, and a busy partition's fsyncs waited behind the shared syncs
    /// that carried them.) Each group settles after it, as after any input.
    fn check_storage_slice(&mut self) {
        let count = storage_checks_per_tick(self.actors.len(), self.retention_check, self.tick);
        for _ in 0..count {
            let after = self.checked_last.map_or(Bound::Unbounded, Bound::Excluded);
            let next = self
                .actors
                .range((after, Bound::Unbounded))
                .next()
                .or_else(|| self.actors.iter().next())
                .map(|(group, _)| *group);
            let Some(group) = next else {
                return;
            };
            self.checked_last = Some(group);
            self.run_group(group, Actor::check_storage);
        }
    }

    /// Asks a few groups that lead in place of their preferred primary to
    /// hand over, when a round is due ([`crate::runtime::balance`]).
    fn balance(&mut self, now: Instant) {
        let mut started = 0;
        for group in self.balancer.round(now) {
            if started == HANDOVERS_PER_ROUND_MAX {
                break;
            }
            let mut handed = false;
            self.run_group(group, |actor| handed = actor.hand_over_to_preferred());
            if handed {
                started += 1;
                metrics::handover_started();
            }
        }
    }
}

/// Groups a tick checks so that `groups` are all checked within one
/// `period` of ticks of `tick` (at least one while there are groups).
fn storage_checks_per_tick(groups: usize, period: Duration, tick: Duration) -> usize {
    let ticks = (period.as_nanos() / tick.as_nanos().max(1)).max(1);
    let ticks = usize::try_from(ticks).unwrap_or(usize::MAX);
    groups.div_ceil(ticks)
}

mod guard;

#[cfg(test)]
mod tests;
