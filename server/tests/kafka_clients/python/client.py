"""A Python Kafka client with its default settings (bootstrap servers
aside), driven by server/tests/kafka.rs.

    client.py <library> produce <bootstrap> <topic> <count>
        prints "acked <partition> <offset> <value>" for each record
    client.py confluent-kafka through <bootstrap> <topic> <count>
        produces one record a millisecond or so with the idempotent producer,
        printing "acked <partition> <offset> <value> <ms>" as each is
        acknowledged (the failover test)
    client.py <library> consume <bootstrap> <topic> <group> <count>
        prints "<partition> <offset> <value>" until <count> records, committing

<library> is `kafka-python` or `confluent-kafka`.
"""

import sys


def produce_kafka_python(bootstrap, topic, count):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","))
    futures = [
        (index, producer.send(topic, key=b"key-%d" % index, value=b"py-%d" % index))
        for index in range(count)
    ]
    producer.flush()
    for index, future in futures:
        acked = future.get(timeout=60)
        print("acked %d %d py-%d" % (acked.partition, acked.offset, index))
    producer.close()


def consume_kafka_python(bootstrap, topic, group, count):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        auto_offset_reset="earliest",
    )
    seen = 0
    while seen < count:
        for records in consumer.poll(timeout_ms=200).values():
            for record in records:
                print("%d %d %s" % (record.partition, record.offset, record.value.decode()))
                seen += 1
        sys.stdout.flush()
    consumer.commit()
    consumer.close()


def produce_confluent(bootstrap, topic, count):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    acked = {}

    def delivered(error, message):
        if error is not None:
            raise RuntimeError(str(error))
        acked[message.value().decode()] = (message.partition(), message.offset())

    for index in range(count):
        producer.produce(topic, key=b"key-%d" % index, value=b"cf-%d" % index, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("records left unacknowledged")
    for index in range(count):
        partition, offset = acked["cf-%d" % index]
        print("acked %d %d cf-%d" % (partition, offset, index))


def produce_through_confluent(bootstrap, topic, count):
    import time

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def delivered(error, message):
        value = message.value().decode()
        if error is not None:
            print("failed %s %s" % (value, error))
        else:
            now_ms = int(time.time() * 1000)
            print("acked %d %d %s %d" % (message.partition(), message.offset(), value, now_ms))
        sys.stdout.flush()

    for index in range(count):
        producer.produce(topic, value=b"cf-%d" % index, on_delivery=delivered)
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(120)


def consume_confluent(bootstrap, topic, group, count):
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen = 0
    while seen < count:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            raise RuntimeError(str(message.error()))
        print("%d %d %s" % (message.partition(), message.offset(), message.value().decode()))
        sys.stdout.flush()
        seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()


def main():
    library, verb, bootstrap, topic = sys.argv[1:5]
    actions = {
        ("kafka-python", "produce"): lambda: produce_kafka_python(bootstrap, topic, int(sys.argv[5])),
        ("kafka-python", "consume"): lambda: consume_kafka_python(
            bootstrap, topic, sys.argv[5], int(sys.argv[6])
        ),
        ("confluent-kafka", "produce"): lambda: produce_confluent(bootstrap, topic, int(sys.argv[5])),
        ("confluent-kafka", "through"): lambda: produce_through_confluent(
            bootstrap, topic, int(sys.argv[5])
        ),
        ("confluent-kafka", "consume"): lambda: consume_confluent(
            bootstrap, topic, sys.argv[5], int(sys.argv[6])
        ),
    }
    actions[(library, verb)]()


if __name__ == "__main__":
    main()
