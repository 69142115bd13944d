// The Java Kafka client, with its default settings (bootstrap servers and,
// where given, SASL credentials aside), driven by server/tests/kafka.rs.
//
//   produce  <bootstrap> <topic> <count>          prints "acked <partition> <offset> <value>"
//   consume  <bootstrap> <topic> <group> <count>  prints "<partition> <offset> <value>" until
//                                                 <count> records, committing as it goes
//   member   <bootstrap> <topic> <group>          a group member that prints as it consumes,
//                                                 forever (until killed)
//   through  <bootstrap> <topic> <count>          produces one record a millisecond or so,
//                                                 printing "acked <partition> <offset> <value> <ms>"
//                                                 as each is acknowledged (the failover test)
//   groups   <bootstrap> <topic> <group>          a member joins; the admin client lists and
//                                                 describes the group, the member leaves, the
//                                                 group is deleted ("<what> <value>" lines)
//   admin    <bootstrap> <topic>                  creates, describes, alters, grows and deletes
//                                                 the topic with the admin client, printing
//                                                 "<what> <value>" lines
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.ArrayList;
import java.util.Map;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;

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
            case "admin" -> admin(properties, args[2]);
            case "groups" -> groups(properties, args[2], args[3]);
            case "through" -> produceThrough(properties, args[2], Integer.parseInt(args[3]));
            default -> throw new IllegalArgumentException(args[0]);
        }
    }

    static void admin(Properties properties, String topic) throws Exception {
        try (Admin admin = Admin.create(properties)) {
            NewTopic created = new NewTopic(topic, 4, (short) 3).configs(Map.of("retention.ms", "3600000"));
            admin.createTopics(List.of(created)).all().get();
            System.out.println("created " + topic);
            System.out.println("partitions " + partitions(admin, topic, 4));
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            System.out.println("retention.ms " + config.get("retention.ms").value());
            System.out.println("min.insync.replicas " + config.get("min.insync.replicas").value());
            AlterConfigOp longer = new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(longer))).all().get();
            config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            System.out.println("altered retention.ms " + config.get("retention.ms").value());
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(6))).all().get();
            System.out.println("grown partitions " + partitions(admin, topic, 6));
            System.out.println("nodes " + admin.describeCluster().nodes().get().size());
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 3))).all().get();
            } catch (ExecutionException exists) {
                System.out.println("again " + exists.getCause().getClass().getSimpleName());
            }
            admin.deleteTopics(List.of(topic)).all().get();
            System.out.println("deleted " + !admin.listTopics().names().get().contains(topic));
        }
    }

    static void groups(Properties properties, String topic, String group) throws Exception {
        Properties consumerProperties = new Properties();
        consumerProperties.putAll(properties);
        consumerProperties.put("key.deserializer", StringDeserializer.class.getName());
        consumerProperties.put("value.deserializer", StringDeserializer.class.getName());
        consumerProperties.put("group.id", group);
        try (Admin admin = Admin.create(properties)) {
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProperties)) {
                consumer.subscribe(List.of(topic));
                while (consumer.assignment().isEmpty()) {
                    consumer.poll(Duration.ofMillis(100));
                }
                boolean listed = admin.listConsumerGroups().all().get().stream()
                    .anyMatch(listing -> listing.groupId().equals(group));
                System.out.println("listed " + listed);
                var description = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                System.out.println("state " + description.groupState());
                System.out.println("members " + description.members().size());
                System.out.println("assigned " + description.members().iterator().next().assignment().topicPartitions().size());
            }
            admin.deleteConsumerGroups(List.of(group)).all().get();
            System.out.println("deleted true");
        }
    }

    // A broker may not know a topic created (or grown) a moment ago, as
    // with Kafka's own brokers: ask again for a while, until it shows
    // `expected` partitions.
    static int partitions(Admin admin, String topic, int expected) throws Exception {
        int seen = -1;
        for (int attempt = 0; attempt < 50 && seen != expected; attempt++) {
            try {
                seen = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
            } catch (ExecutionException unknown) {
                seen = -1;
            }
            if (seen != expected) {
                Thread.sleep(100);
            }
        }
        return seen;
    }

    static void produceThrough(Properties properties, String topic, int count) throws Exception {
        properties.put("key.serializer", StringSerializer.class.getName());
        properties.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(properties)) {
            for (int index = 0; index < count; index++) {
                String value = "java-" + index;
                producer.send(new ProducerRecord<>(topic, null, value), (acked, error) -> {
                    if (error != null) {
                        System.out.println("failed " + value + " " + error);
                    } else {
                        System.out.println("acked " + acked.partition() + " " + acked.offset() + " " + value
                            + " " + System.currentTimeMillis());
                    }
                    System.out.flush();
                });
                Thread.sleep(1);
            }
            producer.flush();
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
