package rill.java;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * A test class with its own rill (started before its first test, stopped after its last: a non-zero exit
 * or a panic fails the class) and the client plumbing the cases share. A failing test prints the
 * broker's log tail to stderr (the class's surefire output file).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(RillCase.LogOnFailure.class)
public abstract class RillCase {
    /** How long a client call may take before a test fails (debug build, 2 loaded cores). */
    public static final Duration TIMEOUT = Duration.ofSeconds(30);

    protected Rill rill;
    private final List<AutoCloseable> closeAfterClass = new ArrayList<>();

    @BeforeAll
    void startRill() {
        rill = Rill.started(getClass().getSimpleName(), rillConfig());
    }

    /** Extra lines for the class's broker config file (none unless a class says otherwise). */
    protected String[] rillConfig() {
        return new String[0];
    }

    @AfterAll
    void stopRill() throws Exception {
        for (AutoCloseable c : closeAfterClass) {
            c.close();
        }
        if (rill != null) {
            rill.close();
        }
    }

    /** A Kafka-legal topic (or group) name unique to the running test. */
    public static String unique(TestInfo info) {
        String base = info.getTestMethod().map(m -> m.getName()).orElse("t")
                + info.getDisplayName().replaceAll("[^A-Za-z0-9]", "");
        return (base.length() > 80 ? base.substring(0, 80) : base) + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    protected Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", rill.bootstrap());
        p.put("request.timeout.ms", "30000");
        return p;
    }

    protected KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Properties p = common();
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    protected KafkaConsumer<String, String> consumer(Map<String, Object> extra) {
        Properties p = common();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    protected Admin admin() {
        Properties p = common();
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    /** An admin client closed after the class's last test. */
    protected Admin sharedAdmin() {
        Admin a = admin();
        closeAfterClass.add(a);
        return a;
    }

    protected void createTopic(String topic, int partitions, Map<String, String> configs) throws Exception {
        try (Admin a = admin()) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all()
                    .get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        }
    }

    protected void createTopic(String topic, int partitions) throws Exception {
        createTopic(topic, partitions, Map.of());
    }

    /** Sends `count` records "k<i>"/"v<i>" round-robin over `partitions` and waits for every ack. */
    protected static void produce(KafkaProducer<String, String> p, String topic, int partitions, int count)
            throws Exception {
        List<java.util.concurrent.Future<?>> acks = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            acks.add(p.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i)));
        }
        p.flush();
        for (var f : acks) {
            f.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        }
    }

    /** Polls until `count` records arrived (fails after TIMEOUT); returns them in arrival order. */
    protected static List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> c, int count) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (got.size() < count) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("got " + got.size() + " of " + count + " records within " + TIMEOUT);
            }
            c.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        return got;
    }

    /** Reads partition `tp` from the start to its end (read_uncommitted unless `extra` says otherwise). */
    protected List<ConsumerRecord<String, String>> readAll(Collection<TopicPartition> tps, Map<String, Object> extra) {
        try (KafkaConsumer<String, String> c = consumer(extra)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, TIMEOUT);
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (tps.stream().anyMatch(tp -> c.position(tp, TIMEOUT) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("not at the end offsets " + end + " within " + TIMEOUT);
                }
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
            return got;
        }
    }

    /** Waits until `condition` holds, failing with `what` after TIMEOUT. */
    protected static void waitFor(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(what + ": not within " + TIMEOUT);
            }
            Thread.sleep(50);
        }
    }

    /** Prints the class's broker log tail when a test fails. */
    public static final class LogOnFailure implements TestWatcher {
        @Override
        public void testFailed(ExtensionContext context, Throwable cause) {
            context.getTestInstance().filter(RillCase.class::isInstance).map(RillCase.class::cast)
                    .filter(c -> c.rill != null).ifPresent(c -> System.err.println(
                            "---- " + context.getDisplayName() + " failed: rill log tail (" + c.rill.log + ")\n"
                                    + c.rill.logTail(80)));
        }
    }
}
