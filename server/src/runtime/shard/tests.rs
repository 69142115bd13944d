//! The shard's unit tests: inbox accounting, opens on input, storage-check spreading.

use bytes::Bytes;
use strand_wire::{CommandHeader, Msg, Operation, RequestHeader, ViewId};

use super::*;

#[test]
fn storage_checks_spread_every_group_over_one_period() {
    let tick = Duration::from_millis(10);
    let period = Duration::from_secs(30);
    assert_eq!(storage_checks_per_tick(0, period, tick), 0);
    assert_eq!(storage_checks_per_tick(1, period, tick), 1);
    assert_eq!(storage_checks_per_tick(3_000, period, tick), 1);
    assert_eq!(storage_checks_per_tick(10_001, period, tick), 4);
    // A period shorter than a tick checks every group on each tick.
    let short = Duration::from_millis(5);
    assert_eq!(storage_checks_per_tick(7, short, tick), 7);
    // Within one period's ticks, every group's turn comes.
    for groups in [1, 7, 999, 10_000] {
        let per_tick = storage_checks_per_tick(groups, Duration::from_millis(100), tick);
        assert!(
            per_tick * 10 >= groups,
            "{groups} groups, {per_tick} per tick"
        );
    }
}

fn produce(body_bytes: usize) -> Input {
    let mut header = RequestHeader::new(0, 0, ViewId::ZERO, 0);
    header.operation = Operation::Produce as u8;
    header.client.set(5);
    header.request.set(1);
    Input::Request(Msg::new(header, Bytes::from(vec![0u8; body_bytes])))
}

fn inbox(capacity: usize) -> (GroupInbox, Receiver<(u64, Input)>) {
    let (shard, inputs) = sync_channel(capacity);
    let (control, _controls) = channel();
    let inbox = GroupInbox {
        group: 9,
        shard,
        control,
        backlog: Arc::new(Backlog::default()),
    };
    (inbox, inputs)
}

/// A shard's inbox counts the client request bytes it holds, so the
/// client port can stop reading before a backlog of requests delays the
/// peers' frames behind it; frames from peers do not count.
#[test]
fn a_shard_inbox_counts_the_request_bytes_it_holds() {
    let (inbox, inputs) = inbox(64);
    let half = SHARD_REQUEST_BYTES_ADMIT as usize / 2;
    inbox.try_send(produce(half)).expect("room");
    inbox.try_send(Input::Storage).expect("room");
    assert!(!inbox.requests_backed_up());
    inbox.try_send(produce(half + 1)).expect("room");
    assert!(inbox.requests_backed_up());
    let (_, first) = inputs.recv().expect("an input");
    inbox.backlog.remove(&first);
    assert!(!inbox.requests_backed_up());
    assert!(!inbox.peers_backed_up());
}

/// Groups waiting to open are opened on a frame or a request a few per
/// turn, never on a wakeup, and always on what must not be lost.
#[test]
fn inputs_open_a_waiting_group_a_few_per_turn() {
    assert!(opens_on_input(&produce(1), 0));
    assert!(!opens_on_input(&produce(1), OPENS_ON_INPUT_PER_TURN_MAX));
    assert!(!opens_on_input(&Input::Storage, 0));
    assert!(opens_on_input(
        &Input::Placement,
        OPENS_ON_INPUT_PER_TURN_MAX
    ));
    assert!(opens_on_input(
        &Input::Shutdown,
        OPENS_ON_INPUT_PER_TURN_MAX
    ));
}

/// A request refused by a full inbox is not counted.
#[test]
fn a_refused_request_is_not_counted() {
    let (inbox, _inputs) = inbox(1);
    inbox.try_send(produce(10)).expect("room");
    assert!(matches!(inbox.try_send(produce(20)), Err(Refused::Full)));
    assert_eq!(inbox.backlog.requests.load(Ordering::Relaxed), 10);
}
