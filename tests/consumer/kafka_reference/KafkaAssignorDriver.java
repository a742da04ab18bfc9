// Runs Kafka's own server-side assignors on the cases read from stdin and prints their results.
//
// Used once by generate_golden.py to record Kafka's answers; not run by the tests.
// Compile against Kafka's sources (see generate_golden.py). Input, one case per block:
//   CASE <name> <uniform|range> <HOMOGENEOUS|HETEROGENEOUS>
//   TOPIC <kafka uuid> <partition count>
//   MEMBER <member id> <instance id or -> <subscribed uuids, comma separated, or ->
//   ASSIGN <member id> <kafka uuid> <partitions, comma separated>
//   END
// Members, subscriptions and assignment maps keep the order written (LinkedHashMap /
// LinkedHashSet); partition sets are `new HashSet<>(list)` as Kafka's tests build them.
// Output per case: "RESULT <name>" then "M <member> <uuid>:<p,p,...>;..." lines, or "ERROR <name>".

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.MemberAssignmentImpl;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

public class KafkaAssignorDriver {
    static final class Member implements MemberSubscription {
        final Optional<String> instanceId;
        final Set<Uuid> subscribed = new LinkedHashSet<>();
        final Map<Uuid, Set<Integer>> assignment = new LinkedHashMap<>();

        Member(Optional<String> instanceId) {
            this.instanceId = instanceId;
        }

        public Optional<String> rackId() { return Optional.empty(); }
        public Optional<String> instanceId() { return instanceId; }
        public Set<Uuid> subscribedTopicIds() { return subscribed; }
    }

    static final class Spec implements GroupSpec {
        final Map<String, Member> members;
        final SubscriptionType type;
        final Map<Uuid, Set<Integer>> assigned = new HashMap<>();

        Spec(Map<String, Member> members, SubscriptionType type) {
            this.members = members;
            this.type = type;
            members.values().forEach(m -> m.assignment.forEach((t, ps) ->
                assigned.computeIfAbsent(t, k -> new HashSet<>()).addAll(ps)));
        }

        public Collection<String> memberIds() { return members.keySet(); }
        public SubscriptionType subscriptionType() { return type; }
        public boolean isPartitionAssigned(Uuid topicId, int partitionId) {
            Set<Integer> ps = assigned.get(topicId);
            return ps != null && ps.contains(partitionId);
        }
        public MemberSubscription memberSubscription(String memberId) { return members.get(memberId); }
        public MemberAssignment memberAssignment(String memberId) {
            return new MemberAssignmentImpl(Collections.unmodifiableMap(members.get(memberId).assignment));
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String name = null;
        ConsumerGroupPartitionAssignor assignor = null;
        SubscriptionType type = null;
        Map<Uuid, Integer> topics = new HashMap<>();
        Map<String, Member> members = new LinkedHashMap<>();
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.split(" ");
            switch (f[0]) {
                case "CASE":
                    name = f[1];
                    assignor = f[2].equals("range") ? new RangeAssignor() : new UniformAssignor();
                    type = SubscriptionType.valueOf(f[3]);
                    topics = new HashMap<>();
                    members = new LinkedHashMap<>();
                    break;
                case "TOPIC":
                    topics.put(Uuid.fromString(f[1]), Integer.parseInt(f[2]));
                    break;
                case "MEMBER":
                    Member m = new Member(f[2].equals("-") ? Optional.empty() : Optional.of(f[2]));
                    if (!f[3].equals("-")) for (String t : f[3].split(",")) m.subscribed.add(Uuid.fromString(t));
                    members.put(f[1], m);
                    break;
                case "ASSIGN":
                    List<Integer> ps = new ArrayList<>();
                    for (String p : f[3].split(",")) ps.add(Integer.parseInt(p));
                    members.get(f[1]).assignment.put(Uuid.fromString(f[2]),
                        Collections.unmodifiableSet(new HashSet<>(ps)));
                    break;
                case "END":
                    out.append(run(name, assignor, new Spec(members, type), topics));
                    break;
                default:
                    throw new IllegalArgumentException(line);
            }
        }
        System.out.print(out);
    }

    static String run(String name, ConsumerGroupPartitionAssignor assignor, Spec spec, Map<Uuid, Integer> topics) {
        SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
            public int numPartitions(Uuid topicId) { return topics.getOrDefault(topicId, -1); }
            public Set<String> racksForPartition(Uuid topicId, int partition) { return Collections.emptySet(); }
        };
        GroupAssignment result;
        try {
            result = assignor.assign(spec, describer);
        } catch (PartitionAssignorException e) {
            return "ERROR " + name + "\n";
        }
        StringBuilder sb = new StringBuilder("RESULT " + name + "\n");
        result.members().forEach((member, assignment) -> {
            List<String> parts = new ArrayList<>();
            assignment.partitions().forEach((t, ps) -> {
                StringBuilder p = new StringBuilder(t.toString() + ":");
                new TreeSet<>(ps).forEach(x -> p.append(x).append(","));
                parts.add(p.substring(0, p.length() - 1));
            });
            Collections.sort(parts);
            sb.append("M ").append(member).append(" ").append(String.join(";", parts)).append("\n");
        });
        return sb.toString();
    }
}
