// Kafka's released Java client and raygroups' ACLs (tests/gateway/test_kafka_acls.py), over
// SASL/PLAIN: a consumer of `group.protocol` as alice (Read on the topic), refused until the
// admin (a super user) allows her group with Admin.createAcls; then it joins and commits; alice's Admin lists only the
// groups she may describe; the admin describes and deletes the ACLs.
// Prints key=value lines; exits 1 on anything unexpected.
//   java -cp kafka-clients.jar:slf4j-api.jar KafkaAclCheck.java BOOTSTRAP TOPIC GROUP PROTOCOL OTHER_GROUP

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

public class KafkaAclCheck {
    static Properties login(String bootstrap, String user, String password) {
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("security.protocol", "SASL_PLAINTEXT");
        config.put("sasl.mechanism", "PLAIN");
        config.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required "
            + "username=\"" + user + "\" password=\"" + password + "\";");
        return config;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String protocol) {
        Properties config = login(bootstrap, "alice", "alice-secret");
        config.put("group.id", group);
        config.put("group.protocol", protocol);
        config.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        config.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        config.put("enable.auto.commit", "false");
        if (protocol.equals("classic")) {
            config.put("session.timeout.ms", "6000");
            config.put("heartbeat.interval.ms", "300");
        }
        return new KafkaConsumer<>(config);
    }

    static AclBinding allow(ResourceType type, String name, AclOperation operation) {
        return new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
            new AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[3], other = args[4];
        TopicPartition first = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(login(bootstrap, "admin", "admin-secret"));
             Admin alice = Admin.create(login(bootstrap, "alice", "alice-secret"))) {
            // Read and Describe on the topic first: without them its Metadata is refused (Kafka's
            // TopicAuthorizationException), and this is about the group.
            admin.createAcls(List.of(allow(ResourceType.TOPIC, topic, AclOperation.READ),
                allow(ResourceType.TOPIC, topic, AclOperation.DESCRIBE))).all().get();
            long until = System.currentTimeMillis() + 30_000;
            while (true) {
                try {
                    alice.describeTopics(List.of(topic)).allTopicNames().get();
                    break;
                } catch (ExecutionException notYet) {
                    if (!(notYet.getCause() instanceof TopicAuthorizationException)
                            || System.currentTimeMillis() > until) {
                        throw notYet;
                    }
                    Thread.sleep(100);
                }
            }
            try (KafkaConsumer<byte[], byte[]> refused = consumer(bootstrap, group, protocol)) {
                refused.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60_000;
                while (System.currentTimeMillis() < deadline) {
                    refused.poll(Duration.ofMillis(100));
                }
                System.out.println("refused=none");
            } catch (GroupAuthorizationException expected) {
                System.out.println("refused=GroupAuthorizationException");
            } catch (RuntimeException unexpected) {
                System.out.println("refused=" + unexpected);
            }
            admin.createAcls(List.of(allow(ResourceType.GROUP, group, AclOperation.READ))).all().get();
            try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, group, protocol)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 90_000;
                while (consumer.assignment().isEmpty()) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("not assigned in time");
                    }
                    try {
                        consumer.poll(Duration.ofMillis(100));
                    } catch (GroupAuthorizationException notYet) {
                        // the group's ACL is not applied everywhere yet (within a second): poll again
                    }
                }
                // Its first position fetched (an OffsetFetch of its own): otherwise committed() below
                // may take that fetch's answer, sent before the commit, as the client reuses an
                // in-flight OffsetFetch for the same partitions.
                consumer.position(first);
                consumer.commitSync(Map.of(first, new OffsetAndMetadata(17)));
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(java.util.Set.of(first));
                System.out.println("committed=" + committed.get(first).offset());
                var described = alice.describeConsumerGroups(List.of(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all().get().get(group);
                System.out.println("alice_may=" + new java.util.TreeSet<>(
                    described.authorizedOperations().stream().map(Object::toString).toList()));
                for (GroupListing listing : alice.listGroups().all().get()) {
                    if (listing.groupId().equals(group) || listing.groupId().equals(other)) {
                        System.out.println("alice_listed=" + listing.groupId());
                    }
                }
            }
            AclBindingFilter mine = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
            System.out.println("described=" + admin.describeAcls(mine).values().get().size());
            System.out.println("deleted=" + admin.deleteAcls(List.of(mine)).all().get().size());
            System.out.println("left=" + admin.describeAcls(mine).values().get().size());
        }
    }
}
