//! Sequenced clients: producers that number their produces by record, not
//! by request, as Kafka's idempotent producers do.
//!
//! A group's client table takes an ordinary client's request numbers 1, 2,
//! 3, … A sequenced client's produce instead takes one number per record:
//! a produce of `n` records numbered `r` is followed by `r + n`. Its
//! numbers are then the producer's own per-partition sequence (plus one),
//! so a producer that retries a batch at another node, with no state there,
//! names it the same way, and the table answers it from its replies; a
//! batch that skips or repeats part of a sequence is out of order.
//!
//! A sequenced client is told by its id: the high 64 bits are
//! [`SEQUENCED_CLIENT_MARK`]. The SDK never makes such an id.

use crate::operation::Operation;

/// The high 64 bits of every sequenced client's id ("STRNSEQC").
pub const SEQUENCED_CLIENT_MARK: u64 = 0x5354_524E_5345_5143;

/// The id of sequenced client `producer` (the caller packs its own
/// producer identity into the low 64 bits).
pub fn sequenced_client(producer: u64) -> u128 {
    (u128::from(SEQUENCED_CLIENT_MARK) << 64) | u128::from(producer)
}

/// Whether `client` numbers its produces by record.
pub fn is_sequenced_client(client: u128) -> bool {
    (client >> 64) as u64 == SEQUENCED_CLIENT_MARK
}

/// How many request numbers a request of `client` takes: the records of a
/// sequenced client's produce (at least one), one for anything else.
pub fn request_span(client: u128, operation: Operation, record_count: u32) -> u64 {
    match is_sequenced_client(client) && operation == Operation::Produce {
        true => u64::from(record_count.max(1)),
        false => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_ids_number_their_produces_by_record() {
        let client = sequenced_client(42);
        assert!(is_sequenced_client(client));
        assert_eq!(client as u64, 42);
        assert_eq!(request_span(client, Operation::Produce, 7), 7);
        assert_eq!(request_span(client, Operation::Fetch, 7), 1);
        assert_eq!(request_span(client, Operation::Produce, 0), 1);
        assert!(!is_sequenced_client(42));
        assert_eq!(request_span(42, Operation::Produce, 7), 1);
    }
}
