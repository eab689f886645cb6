package rill.java;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The Java consumer: classic groups (assignors, static members), KIP-848 groups, assign mode. */
class ConsumerTest extends RillCase {
    /**
     * KIP-848 members learn of a new assignment on their next heartbeat: 500 ms instead of Kafka's 5 s
     * default (and minimum), so that a join and a leave cost the suite about a second each.
     */
    @Override
    protected String[] rillConfig() {
        return new String[] {"group.consumer.min.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms=500"};
    }

    /** Polls every consumer in turn until each holds `each` partitions; returns what they polled. */
    private static List<ConsumerRecord<String, String>> pollUntilBalanced(List<KafkaConsumer<String, String>> cs,
            int each) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (!cs.stream().allMatch(c -> c.assignment().size() == each)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("assignments " + cs.stream().map(KafkaConsumer::assignment).toList()
                        + ", not " + each + " partitions each, within " + TIMEOUT);
            }
            for (KafkaConsumer<String, String> c : cs) {
                c.poll(Duration.ofMillis(100)).forEach(got::add);
            }
        }
        return got;
    }

    /** Polls every consumer in turn until `count` records arrived between them. */
    private static List<ConsumerRecord<String, String>> pollAll(List<KafkaConsumer<String, String>> cs, int count) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (got.size() < count) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("got " + got.size() + " of " + count + " records within " + TIMEOUT);
            }
            for (KafkaConsumer<String, String> c : cs) {
                c.poll(Duration.ofMillis(100)).forEach(got::add);
            }
        }
        return got;
    }

    private static Set<String> values(List<ConsumerRecord<String, String>> rs) {
        return rs.stream().map(ConsumerRecord::value).collect(Collectors.toSet());
    }

    private static Set<String> expected(int from, int to) {
        return IntStream.range(from, to).mapToObj(i -> "v" + i).collect(Collectors.toSet());
    }

    /** Two members share four partitions, one leaves, the other takes them all; no record twice. */
    private void twoMembersThenOne(String topic, Map<String, Object> config, GroupType type) throws Exception {
        String group = topic + "-g";
        createTopic(topic, 4);
        Map<String, Object> cfg = new HashMap<>(config);
        cfg.put("group.id", group);
        try (KafkaConsumer<String, String> a = consumer(cfg); KafkaConsumer<String, String> b = consumer(cfg);
                KafkaProducer<String, String> p = producer(Map.of())) {
            a.subscribe(List.of(topic));
            pollUntilBalanced(List.of(a), 4);
            b.subscribe(List.of(topic));
            pollUntilBalanced(List.of(a, b), 2);
            Set<TopicPartition> both = new HashSet<>(a.assignment());
            both.addAll(b.assignment());
            assertEquals(4, both.size(), "disjoint assignments covering the topic");
            produce(p, topic, 4, 100);
            List<ConsumerRecord<String, String>> got = pollAll(List.of(a, b), 100);
            assertEquals(100, got.size(), "each record once");
            assertEquals(expected(0, 100), values(got));
            a.commitSync(TIMEOUT);
            b.commitSync(TIMEOUT);
            try (Admin admin = admin()) {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                assertEquals(2, d.members().size());
                assertEquals(type, d.type());
            }
            b.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(TIMEOUT));
            pollUntilBalanced(List.of(a), 4);
            produce(p, topic, 4, 40);
            List<ConsumerRecord<String, String>> rest = pollAll(List.of(a), 40);
            assertEquals(values(rest), expected(0, 40));
            assertEquals(40, rest.size());
            a.commitSync(TIMEOUT);
            Map<TopicPartition, OffsetAndMetadata> committed = a.committed(new HashSet<>(a.assignment()), TIMEOUT);
            assertEquals(140L, committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum());
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"cooperative-sticky", "range"})
    void classicGroupWithAssignor(String assignor, TestInfo info) throws Exception {
        String cls = assignor.equals("range") ? RangeAssignor.class.getName() : CooperativeStickyAssignor.class.getName();
        twoMembersThenOne(unique(info), Map.of("group.protocol", "classic", "partition.assignment.strategy", cls),
                GroupType.CLASSIC);
    }

    @ParameterizedTest(name = "group.remote.assignor={0}")
    @ValueSource(strings = {"uniform", "range"})
    void consumerGroupProtocolKip848(String assignor, TestInfo info) throws Exception {
        twoMembersThenOne(unique(info), Map.of("group.protocol", "consumer", "group.remote.assignor", assignor),
                GroupType.CONSUMER);
    }

    @Test
    void staticMemberRejoinsWithoutARebalance(TestInfo info) throws Exception {
        String topic = unique(info);
        String group = topic + "-g";
        createTopic(topic, 2);
        Map<String, Object> cfg = Map.of("group.id", group, "group.protocol", "classic",
                "group.instance.id", "static-1", "session.timeout.ms", "30000");
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            produce(p, topic, 2, 10);
            int generation;
            Set<TopicPartition> assigned;
            try (KafkaConsumer<String, String> c = consumer(cfg)) {
                c.subscribe(List.of(topic));
                assertEquals(10, pollUntil(c, 10).size());
                c.commitSync(TIMEOUT);
                generation = c.groupMetadata().generationId();
                assigned = new HashSet<>(c.assignment());
                assertEquals(2, assigned.size());
            }
            try (Admin admin = admin()) {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                assertEquals(1, d.members().size(), "a closed static member stays in the group");
                assertEquals("static-1", d.members().iterator().next().groupInstanceId().orElse(null));
            }
            produce(p, topic, 2, 6);
            try (KafkaConsumer<String, String> c = consumer(cfg)) {
                c.subscribe(List.of(topic));
                List<ConsumerRecord<String, String>> got = pollUntil(c, 6);
                assertEquals(expected(0, 6), values(got), "resumes from the committed offsets");
                assertEquals(assigned, c.assignment());
                assertEquals(generation, c.groupMetadata().generationId(), "no rebalance for a known static member");
            }
        }
    }

    @Test
    void assignModeSeeksCommitsAndLooksUpOffsets(TestInfo info) throws Exception {
        String topic = unique(info);
        String group = topic + "-g";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = producer(Map.of("linger.ms", "0"))) {
            for (int i = 0; i < 20; i++) {
                p.send(new ProducerRecord<>(topic, 0, 1_700_000_000_000L + 1000L * i, "k" + i, "v" + i)).get();
            }
        }
        try (KafkaConsumer<String, String> c = consumer(Map.of("group.id", group))) {
            c.assign(List.of(tp));
            assertEquals(Map.of(tp, 0L), c.beginningOffsets(List.of(tp), TIMEOUT));
            assertEquals(Map.of(tp, 20L), c.endOffsets(List.of(tp), TIMEOUT));
            Map<TopicPartition, OffsetAndTimestamp> byTime = c.offsetsForTimes(
                    Map.of(tp, 1_700_000_000_000L + 7500L), TIMEOUT);
            assertEquals(8L, byTime.get(tp).offset());
            assertEquals(1_700_000_000_000L + 8000L, byTime.get(tp).timestamp());
            assertEquals(null, c.offsetsForTimes(Map.of(tp, 1_750_000_000_000L), TIMEOUT).get(tp));
            c.seek(tp, 12);
            List<ConsumerRecord<String, String>> got = pollUntil(c, 8);
            assertEquals(IntStream.range(12, 20).mapToObj(i -> "v" + i).toList(),
                    got.stream().map(ConsumerRecord::value).toList());
            c.commitSync(Map.of(tp, new OffsetAndMetadata(15, "meta")), TIMEOUT);
            OffsetAndMetadata committed = c.committed(Set.of(tp), TIMEOUT).get(tp);
            assertEquals(15L, committed.offset());
            assertEquals("meta", committed.metadata());
            c.pause(List.of(tp));
            c.seekToBeginning(List.of(tp));
            assertTrue(c.poll(Duration.ofMillis(300)).isEmpty(), "paused");
            c.resume(List.of(tp));
            assertEquals("v0", pollUntil(c, 1).get(0).value());
            c.seekToEnd(List.of(tp));
            assertEquals(20L, c.position(tp, TIMEOUT));
        }
        try (KafkaConsumer<String, String> c = consumer(Map.of("group.id", group))) {
            c.assign(List.of(tp));
            assertEquals(15L, c.position(tp, TIMEOUT), "a new consumer starts at the committed offset");
        }
    }

    /** The README's "Use it" Java snippet, as written there (the poll repeated until the record came). */
    @Test
    void readmeSnippet() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", rill.bootstrap());
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic("orders", 3, (short) 1))).all().get();
        }
        try (var producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.send(new ProducerRecord<>("orders", "k1", "order 1")).get();
        }
        p.put("group.id", "demo");
        p.put("group.protocol", "consumer");
        p.put("auto.offset.reset", "earliest");
        try (var consumer = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of("orders"));
            List<ConsumerRecord<String, String>> got = pollUntil(consumer, 1);
            assertEquals("order 1", got.get(0).value());
        }
    }
}
