//! The run's trace: a hash of every event (the determinism check) and, on
//! request, the last events as readable lines.

use std::collections::VecDeque;

/// FNV-1a over the events, plus a ring of the last lines.
#[derive(Debug, Clone)]
pub struct Trace {
    hash: u64,
    lines: VecDeque<String>,
    keep: usize,
    live: bool,
}

impl Trace {
    /// A trace keeping the last `keep` lines (0: hash only).
    pub fn new(keep: usize) -> Trace {
        // STRAND_SIM_LIVE_TRACE=1 prints every event to stderr as it happens
        // (for runs that never finish).
        let live = std::env::var_os("STRAND_SIM_LIVE_TRACE").is_some();
        Trace {
            hash: 0xcbf2_9ce4_8422_2325,
            lines: VecDeque::new(),
            keep,
            live,
        }
    }

    fn mix(&mut self, value: u64) {
        for byte in value.to_le_bytes() {
            self.hash ^= u64::from(byte);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Records one event at `tick` on `endpoint`.
    pub fn record(&mut self, tick: u64, endpoint: u16, what: &'static str, values: &[u64]) {
        self.mix(tick);
        self.mix(u64::from(endpoint));
        for byte in what.bytes() {
            self.mix(u64::from(byte));
        }
        for value in values {
            self.mix(*value);
        }
        if self.live {
            eprintln!("{tick:>7} {endpoint:>4} {what} {values:?}");
        }
        if self.keep > 0 {
            self.lines
                .push_back(format!("{tick:>7} {endpoint:>4} {what} {values:?}"));
            if self.lines.len() > self.keep {
                self.lines.pop_front();
            }
        }
    }

    /// The hash of everything recorded.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The last lines kept.
    pub fn lines(&self) -> impl Iterator<Item = &String> {
        self.lines.iter()
    }
}
