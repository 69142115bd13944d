//! The one mapping between Kafka's flat topic names and Strand's
//! `stream/topic`.
//!
//! - A Kafka name with a dot splits at its first dot: `payments.orders` is
//!   stream `payments`, topic `orders`; `payments.orders.v2` is stream
//!   `payments`, topic `orders.v2`.
//! - A Kafka name without a dot names a topic of the default stream
//!   (`default` unless the node's `[kafka] stream` says otherwise): `orders`
//!   is `default/orders`.
//! - Going back, a topic of the default stream is listed by its own name;
//!   any other as `stream.topic`. A stream whose name holds a dot cannot be
//!   told apart this way, so its topics are not listed to Kafka clients.
//!
//! Both sides' names allow the same characters (ASCII letters, digits, `.`,
//! `_`, `-`), so every Kafka name a client may create maps to a valid one.

use strand_wire::codec::validate_name;

/// A Kafka topic name's Strand stream and topic, or `None` when it makes
/// no valid Strand name (empty, or a part Strand refuses).
pub fn to_strand(kafka_name: &str, default_stream: &str) -> Option<(String, String)> {
    let (stream, topic) = match kafka_name.split_once('.') {
        Some((stream, topic)) => (stream, topic),
        None => (default_stream, kafka_name),
    };
    validate_name("stream", stream).ok()?;
    validate_name("topic", topic).ok()?;
    Some((stream.to_owned(), topic.to_owned()))
}

/// The Kafka name of Strand topic `stream/topic`, or `None` when its stream
/// cannot be named in Kafka's flat space (its name holds a dot).
pub fn to_kafka(stream: &str, topic: &str, default_stream: &str) -> Option<String> {
    if stream == default_stream && !topic.contains('.') {
        return Some(topic.to_owned());
    }
    if stream.contains('.') {
        return None;
    }
    Some(format!("{stream}.{topic}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_maps_back_to_its_topic() {
        let cases = [
            ("default", "orders"),
            ("default", "orders.v2"),
            ("payments", "orders"),
            ("payments", "orders.v2"),
        ];
        for (stream, topic) in cases {
            let kafka = to_kafka(stream, topic, "default").expect("listed");
            let back = to_strand(&kafka, "default").expect("valid");
            assert_eq!(back, (stream.to_owned(), topic.to_owned()), "{kafka}");
        }
        assert_eq!(to_kafka("a.b", "c", "default"), None);
    }

    #[test]
    fn names_strand_refuses_are_unknown_topics() {
        assert_eq!(to_strand("", "default"), None);
        assert_eq!(to_strand("payments.", "default"), None);
        assert_eq!(
            to_strand("orders", "default"),
            Some(("default".into(), "orders".into()))
        );
    }
}
