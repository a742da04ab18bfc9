// Kafka's released Java client against raygroups (tests/gateway/test_java_client.py).
// A consumer of `group.protocol` (classic or consumer) joins `group`, takes every
// partition of `topic`, commits `offset` to partition 0 and reads it back; while it is
// in the group an Admin client lists the groups, describes it and lists its offsets.
// Prints key=value lines; exits 1 on anything unexpected.
//   java -cp kafka-clients.jar:slf4j-api.jar KafkaGroupCheck.java BOOTSTRAP TOPIC GROUP PROTOCOL PARTITIONS OFFSET

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

public class KafkaGroupCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[3];
        int partitions = Integer.parseInt(args[4]);
        long offset = Long.parseLong(args[5]);
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("group.protocol", protocol);
        config.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        config.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        config.put("enable.auto.commit", "false");
        config.put("auto.offset.reset", "earliest");
        config.put("client.id", "java-" + protocol);
        if (protocol.equals("classic")) {
            config.put("session.timeout.ms", "6000");
            config.put("heartbeat.interval.ms", "300");
        }
        Properties adminConfig = new Properties();
        adminConfig.put("bootstrap.servers", bootstrap);
        TopicPartition first = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config);
             Admin admin = Admin.create(adminConfig)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 90_000;
            while (consumer.assignment().size() < partitions) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not assigned in time: " + consumer.assignment());
                }
                consumer.poll(Duration.ofMillis(100));
            }
            System.out.println("assigned=" + consumer.assignment().size());
            consumer.commitSync(Map.of(first, new OffsetAndMetadata(offset, "java")));
            System.out.println("committed=" + consumer.committed(Set.of(first)).get(first).offset());

            for (GroupListing listing : admin.listGroups().all().get()) {
                if (listing.groupId().equals(group)) {
                    System.out.println("listed=" + listing.type().map(Object::toString).orElse("?"));
                }
            }
            ConsumerGroupDescription described =
                admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            System.out.println("state=" + described.groupState());
            System.out.println("members=" + described.members().size());
            System.out.println("type=" + described.type());
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            System.out.println("offset=" + offsets.get(first).offset());
            long latest = admin.listOffsets(Map.of(first, OffsetSpec.latest())).partitionResult(first).get().offset();
            System.out.println("latest=" + latest);
            // offsetsForTimes: no record is known after the epoch start on a topic never written.
            long atTime = admin.listOffsets(Map.of(first, OffsetSpec.forTimestamp(0L))).partitionResult(first).get()
                .offset();
            System.out.println("at_time=" + atTime);
        }
        System.out.println("closed=true");
    }
}
