//! The shard's unit tests: opens on input, storage-check spreading.

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
