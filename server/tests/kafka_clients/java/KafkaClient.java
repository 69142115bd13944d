// The Java Kafka client, with its default settings (bootstrap servers and,
// where given, SASL credentials aside), driven by server/tests/kafka.rs.
//
//   produce  <bootstrap> <topic> <count>          prints "acked <partition> <offset> <value>"
//   consume  <bootstrap> <topic> <group> <count>  prints "<partition> <offset> <value>" until
//                                                 <count> records, committing as it goes
//   member   <bootstrap> <topic> <group>          a group member that prints as it consumes,
//                                                 forever (until killed)
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.ArrayList;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaClient {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        properties.put("bootstrap.servers", args[1]);
        String sasl = System.getenv("KAFKA_SASL_PLAIN");
        if (sasl != null) {
            String[] parts = sasl.split(":", 2);
            properties.put("security.protocol", "SASL_SSL");
            properties.put("sasl.mechanism", "PLAIN");
            properties.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                + parts[0] + "\" password=\"" + parts[1] + "\";");
            properties.put("ssl.truststore.type", "PEM");
            properties.put("ssl.truststore.location", System.getenv("KAFKA_CA_PEM"));
        }
        switch (args[0]) {
            case "produce" -> produce(properties, args[2], Integer.parseInt(args[3]));
            case "consume" -> consume(properties, args[2], args[3], Integer.parseInt(args[4]));
            case "member" -> consume(properties, args[2], args[3], Integer.MAX_VALUE);
            default -> throw new IllegalArgumentException(args[0]);
        }
    }

    static void produce(Properties properties, String topic, int count) throws Exception {
        properties.put("key.serializer", StringSerializer.class.getName());
        properties.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(properties)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int index = 0; index < count; index++) {
                sent.add(producer.send(new ProducerRecord<>(topic, "key-" + index, "java-" + index)));
            }
            for (int index = 0; index < count; index++) {
                RecordMetadata acked = sent.get(index).get();
                System.out.println("acked " + acked.partition() + " " + acked.offset() + " java-" + index);
            }
        }
    }

    static void consume(Properties properties, String topic, String group, int count) {
        properties.put("key.deserializer", StringDeserializer.class.getName());
        properties.put("value.deserializer", StringDeserializer.class.getName());
        properties.put("group.id", group);
        properties.put("auto.offset.reset", "earliest");
        String session = System.getenv("KAFKA_SESSION_TIMEOUT_MS");
        if (session != null) {
            properties.put("session.timeout.ms", session);
            properties.put("heartbeat.interval.ms", "500");
        }
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(properties);
        // SIGTERM: leave the group cleanly (close sends LeaveGroup).
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                main.join(10_000);
            } catch (InterruptedException ignored) {
            }
        }));
        int seen = 0;
        try {
            consumer.subscribe(List.of(topic));
            while (seen < count) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println(record.partition() + " " + record.offset() + " " + record.value());
                    seen++;
                }
                System.out.flush();
            }
            consumer.commitSync();
        } catch (WakeupException stopping) {
            // Asked to stop.
        } finally {
            consumer.close();
        }
    }
}
