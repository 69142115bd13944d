//! The "view change waits" warning is rate-limited
//! (`docs/reference-points.md`, point 5): a stuck view change re-runs its
//! merge on every DoViewChange and retransmit, but each replica warns at
//! most once per `Timeouts::warning_ticks` while it waits, and warns again
//! after that while the wait lasts. The node logs one line per warning, so
//! this is what keeps a stuck partition from flooding the log.

mod harness;

use harness::Cluster;
use strand_consensus::*;
use strand_wire::Durability;

/// How many `ViewChangeWaiting` events replica `index` has put out.
fn warnings(cluster: &Cluster, index: u8) -> usize {
    cluster
        .events_of(index, |event| {
            matches!(event, Event::ViewChangeWaiting { .. }).then_some(())
        })
        .len()
}

#[test]
fn a_waiting_view_change_warns_at_most_once_per_warning_interval() {
    // E=3, majority: R=2. Every replica crashes under `replicated`; two come
    // back untrusted and wait for the third for as long as the test runs.
    let mut cluster = Cluster::new(3, ConfirmPolicy::MajorityDurable, Durability::Replicated);
    cluster.produce(1, 1);
    cluster.deliver_all();
    cluster.tick(10);
    for index in 0..3 {
        cluster.crash(index);
    }
    cluster.restart(1);
    cluster.restart(2);

    let interval = Timeouts::default().warning_ticks;
    let ticks = interval * 10;
    let mut seen = [0usize; 3];
    let mut warned_at: Vec<Vec<u64>> = vec![Vec::new(); 3];
    for tick in 0..ticks {
        cluster.tick(1);
        for index in [1u8, 2] {
            let count = warnings(&cluster, index);
            let new = count - seen[usize::from(index)];
            assert!(
                new <= 1,
                "replica {index} warned {new} times at tick {tick}"
            );
            if new == 1 {
                warned_at[usize::from(index)].push(tick);
            }
            seen[usize::from(index)] = count;
        }
    }
    assert_eq!(cluster.primary(), None, "the view change waited throughout");
    for index in [1usize, 2] {
        for pair in warned_at[index].windows(2) {
            assert!(
                pair[1] - pair[0] >= interval,
                "replica {index} warned at ticks {} and {}, closer than {interval}",
                pair[0],
                pair[1]
            );
        }
    }
    let total = warned_at[1].len() + warned_at[2].len();
    assert!(
        total >= 2,
        "the warning repeats while the wait lasts: {warned_at:?}"
    );
    assert!(
        total as u64 <= 2 * (ticks / interval + 1),
        "at most one warning per interval per replica: {warned_at:?}"
    );
}
