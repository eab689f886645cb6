package rill.java;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Kafka's command-line tools, run from their main classes in this JVM (what bin/kafka-*.sh run), each
 * scenario against the Kafka peer (-Dkafka.bootstrap, started by run.sh) and against rill with the same
 * names; the transcripts (command, exit code, stdout, stderr) are normalised where the two must differ
 * (ports, topic/cluster/producer/member ids, times, directories) and must then be equal.
 */
@org.junit.jupiter.api.Order(Integer.MAX_VALUE) // last: after every class without an @Order
class ToolsTest extends RillCase {
    private static final String TOPICS = "org.apache.kafka.tools.TopicCommand";
    private static final String GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    private static final String CONFIGS = "org.apache.kafka.tools.ConfigCommand";
    private static final String TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand";
    private static final String GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell";
    private static final String DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand";
    private static final String LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand";
    private static final String LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand";
    private static final String CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer";
    private static final String CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer";
    private static final String VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer";
    private static final String VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer";
    private static final String METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand";

    /** One side of a comparison: a broker's bootstrap and the transcript of what ran against it. */
    private static final class Side {
        final String bootstrap;
        final StringBuilder transcript = new StringBuilder();

        Side(String bootstrap) {
            this.bootstrap = bootstrap;
        }

        /** Runs a tool with --bootstrap-server first (the tools that take it that way). */
        Tool.Result tool(String main, String... args) {
            return record(Tool.run(main, withBootstrap(args)));
        }

        /** Runs a tool with --bootstrap-server first and masks the cells of `columns` in its tables. */
        Tool.Result toolMasked(List<String> columns, String main, String... args) {
            return record(mask(Tool.run(main, withBootstrap(args)), columns));
        }

        /**
         * Runs a tool until `done` holds for its stdout (at most 10 s), recording the last run: Kafka
         * applies a dynamic broker config through its metadata log, so a describe right after the
         * alter may still show the old value ("log.retention.ms=null", the new one only in its synonyms).
         */
        Tool.Result toolUntil(java.util.function.Predicate<String> done, String main, String... args)
                throws InterruptedException {
            long deadline = System.nanoTime() + 10_000_000_000L;
            Tool.Result r = Tool.run(main, withBootstrap(args));
            while (!done.test(r.out()) && System.nanoTime() < deadline) {
                Thread.sleep(250);
                r = Tool.run(main, withBootstrap(args));
            }
            return record(r);
        }

        Tool.Result toolWithInput(String main, String stdin, String... args) {
            return record(Tool.runWithInput(main, stdin, withBootstrap(args)));
        }

        /** Runs a tool whose arguments name the broker themselves. */
        Tool.Result toolRaw(String main, String... args) {
            return record(Tool.run(main, args));
        }

        private String[] withBootstrap(String... args) {
            List<String> all = new ArrayList<>(List.of("--bootstrap-server", bootstrap));
            all.addAll(List.of(args));
            return all.toArray(String[]::new);
        }

        Tool.Result record(Tool.Result r) {
            transcript.append(r.transcript()).append('\n');
            return r;
        }

        void note(String line) {
            transcript.append("# ").append(line).append('\n');
        }

        Properties props() {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            return p;
        }

        KafkaProducer<String, String> producer(Map<String, String> extra) {
            Properties p = props();
            p.remove(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG);
            p.remove(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG);
            p.putAll(extra);
            return new KafkaProducer<>(p);
        }

        KafkaConsumer<String, String> consumer(Map<String, String> extra) {
            Properties p = props();
            p.remove(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG);
            p.remove(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG);
            p.put("auto.offset.reset", "earliest");
            p.put("enable.auto.commit", "false");
            p.putAll(extra);
            return new KafkaConsumer<>(p);
        }

        Admin admin() {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            return Admin.create(p);
        }

        void createTopic(String topic, int partitions) throws Exception {
            try (Admin a = admin()) {
                a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            }
        }

        /** Sends "v0".."v{n-1}" round-robin over `partitions`, keys "k<i>", timestamps 1s apart. */
        void produce(String topic, int partitions, int n) throws Exception {
            try (KafkaProducer<String, String> p = producer(Map.of("linger.ms", "0"))) {
                for (int i = 0; i < n; i++) {
                    p.send(new ProducerRecord<>(topic, i % partitions, 1_700_000_000_000L + 1000L * i, "k" + i, "v" + i))
                            .get();
                }
            }
        }
    }

    /** How long the tools wait for the Kafka peer run.sh starts in the background (a loaded machine). */
    private static final long PEER_WAIT_SECONDS = 180;
    private static String kafkaBootstrap;

    /**
     * The Kafka peer's bootstrap: -Dkafka.bootstrap, else KAFKA_BOOTSTRAP=... from the -Dkafka.env file
     * that run.sh's background `kafka.sh start-single` writes (waited for; kafka.failed next to it says
     * the start failed).
     */
    private static synchronized String kafkaBootstrap() throws Exception {
        if (kafkaBootstrap != null) {
            return kafkaBootstrap;
        }
        String k = System.getProperty("kafka.bootstrap");
        if (k != null && !k.isBlank() && !k.startsWith("${")) {
            return kafkaBootstrap = k;
        }
        String env = System.getProperty("kafka.env");
        if (env == null || env.isBlank() || env.startsWith("${")) {
            throw new IllegalStateException("no Kafka peer: -Dkafka.bootstrap=HOST:PORT or -Dkafka.env=FILE"
                    + " (tests/java/run.sh starts one)");
        }
        Path file = Path.of(env);
        Path failed = file.resolveSibling("kafka.failed");
        long deadline = System.nanoTime() + PEER_WAIT_SECONDS * 1_000_000_000L;
        while (!Files.exists(file)) {
            if (Files.exists(failed)) {
                throw new IllegalStateException("the Kafka peer did not start:\n" + Files.readString(failed));
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the Kafka peer did not start within " + PEER_WAIT_SECONDS + " s");
            }
            Thread.sleep(100);
        }
        for (String line : Files.readAllLines(file)) {
            if (line.startsWith("KAFKA_BOOTSTRAP=")) {
                return kafkaBootstrap = line.substring("KAFKA_BOOTSTRAP=".length()).trim();
            }
        }
        throw new IllegalStateException(file + " names no KAFKA_BOOTSTRAP");
    }

    private static final List<Map.Entry<Pattern, String>> NORMALISE = List.of(
            // Kafka's 22-character base64 Uuids (topic ids, cluster ids, member ids of KIP-848 groups).
            Map.entry(Pattern.compile("(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])"), "<uuid>"),
            // Classic member ids: <client id>-<UUID>.
            Map.entry(Pattern.compile("-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "-<uuid>"),
            Map.entry(Pattern.compile("\"timestamp\":\\d+"), "\"timestamp\":<t>"),
            Map.entry(Pattern.compile("\"(avg_throughput|target_throughput|sent|acked)\":[0-9.E-]+"), "\"$1\":<n>"),
            // Stack frames of a tool's error: this test's own lines and reflection differ by run.
            Map.entry(Pattern.compile("(?m)^\\s+(at |\\.\\.\\. \\d+ more).*\n"), ""),
            // COMPATIBILITY.md C7: Kafka 4 writes a cluster-level min.insync.replicas=1 at format
            // (KIP-966), which its topic listings and the cluster defaults show; Rill has none.
            Map.entry(Pattern.compile("min\\.insync\\.replicas=1,"), ""),
            Map.entry(Pattern.compile("(?m)^ +min\\.insync\\.replicas=1 sensitive=false "
                    + "synonyms=\\{DYNAMIC_DEFAULT_BROKER_CONFIG:min\\.insync\\.replicas=1\\}\n"), ""),
            // COMPATIBILITY.md C6: the default behind retention.ms is log.retention.hours=168 in Kafka
            // (log.retention.ms has no default), log.retention.ms=604800000 in Rill.
            Map.entry(Pattern.compile(", DEFAULT_CONFIG:log\\.retention\\.(ms=604800000|hours=168)"), ""),
            // Whitespace runs: column widths follow the widest cell, which ids make differ.
            Map.entry(Pattern.compile("[ \\t]+"), " "),
            Map.entry(Pattern.compile(" +\n"), "\n"));

    /** The transcript with what must differ between two brokers replaced by placeholders. */
    private static String normalise(Side side, String text, List<String> extra) {
        String t = text.replace(side.bootstrap, "<bootstrap>");
        for (int i = 0; i < extra.size(); i++) {
            t = t.replace(extra.get(i), "<value " + i + ">");
        }
        for (Map.Entry<Pattern, String> e : NORMALISE) {
            t = e.getKey().matcher(t).replaceAll(e.getValue());
        }
        return t;
    }

    /** The scenario run against both brokers: the normalised transcripts must be equal. */
    private interface Scenario {
        /** Runs against `s`, all names derived from `name`; returns values to normalise away. */
        List<String> run(Side s, String name) throws Exception;
    }

    private void compare(TestInfo info, Scenario scenario) throws Exception {
        String name = unique(info);
        Side kafka = new Side(kafkaBootstrap());
        Side rillSide = new Side(rill.bootstrap());
        List<String> kafkaExtra = scenario.run(kafka, name);
        List<String> rillExtra = scenario.run(rillSide, name);
        String k = normalise(kafka, kafka.transcript.toString(), kafkaExtra);
        String r = normalise(rillSide, rillSide.transcript.toString(), rillExtra);
        Path work = rill.dir.resolve("tools");
        Files.createDirectories(work);
        String method = info.getTestMethod().map(m -> m.getName()).orElse("scenario");
        Files.writeString(work.resolve(method + ".kafka.txt"), kafka.transcript, StandardCharsets.UTF_8);
        Files.writeString(work.resolve(method + ".rill.txt"), rillSide.transcript, StandardCharsets.UTF_8);
        assertEquals(k, r, "normalised transcripts, Kafka (expected) vs rill (actual); raw in " + work);
    }

    /**
     * Masks the cells of `columns` in a tool's tables (a header row of column names, then rows with as
     * many cells): producer ids, epochs and times, which two brokers hand out differently.
     */
    private static Tool.Result mask(Tool.Result r, List<String> columns) {
        StringBuilder out = new StringBuilder();
        List<Integer> masked = List.of();
        int width = -1;
        for (String line : r.out().lines().toList()) {
            String[] cells = line.trim().split("\\s+");
            List<Integer> here = new ArrayList<>();
            for (int i = 0; i < cells.length; i++) {
                if (columns.contains(cells[i])) {
                    here.add(i);
                }
            }
            if (!here.isEmpty()) {
                masked = here;
                width = cells.length;
                out.append(line).append('\n');
                continue;
            }
            if (cells.length == width) {
                for (int i : masked) {
                    cells[i] = "<masked>";
                }
                out.append(String.join(" ", cells)).append('\n');
            } else {
                out.append(line).append('\n');
            }
        }
        return new Tool.Result(r.command(), r.code(), out.toString(), r.err());
    }

    /** Keeps only the lines mentioning `needle` (listings on a shared broker hold others' names). */
    private static Tool.Result only(Tool.Result r, String needle) {
        String out = r.out().lines().filter(l -> l.contains(needle)).map(l -> l + "\n").collect(Collectors.joining());
        return new Tool.Result(r.command(), r.code(), out, r.err());
    }

    @Test
    void kafkaTopics(TestInfo info) throws Exception {
        compare(info, (s, name) -> {
            s.tool(TOPICS, "--create", "--topic", name, "--partitions", "2", "--replication-factor", "1",
                    "--config", "retention.ms=3600000");
            s.tool(TOPICS, "--create", "--topic", name, "--partitions", "1");
            s.record(only(Tool.run(TOPICS, "--bootstrap-server", s.bootstrap, "--list"), name));
            s.tool(TOPICS, "--describe", "--topic", name);
            s.tool(TOPICS, "--alter", "--topic", name, "--partitions", "4");
            s.tool(TOPICS, "--alter", "--topic", name, "--partitions", "4");
            s.tool(TOPICS, "--alter", "--topic", name, "--partitions", "3");
            s.tool(TOPICS, "--describe", "--topic", name);
            s.tool(TOPICS, "--describe", "--topic", name + "-missing");
            s.tool(TOPICS, "--delete", "--topic", name);
            Thread.sleep(500);
            s.record(only(Tool.run(TOPICS, "--bootstrap-server", s.bootstrap, "--list"), name));
            return List.of();
        });
    }

    @Test
    void kafkaConsumerGroups(TestInfo info) throws Exception {
        compare(info, (s, name) -> {
            String group = name + "-g";
            s.createTopic(name, 2);
            s.produce(name, 2, 10);
            String member;
            try (KafkaConsumer<String, String> c = s.consumer(Map.of("group.id", group, "group.protocol", "classic",
                    "client.id", "tools-client"))) {
                c.subscribe(List.of(name));
                long deadline = System.nanoTime() + TIMEOUT.toNanos();
                while (c.assignment().size() < 2 && System.nanoTime() < deadline) {
                    c.poll(java.time.Duration.ofMillis(100));
                }
                c.commitSync(Map.of(new TopicPartition(name, 0), new OffsetAndMetadata(3),
                        new TopicPartition(name, 1), new OffsetAndMetadata(2)));
                member = c.groupMetadata().memberId();
                s.record(only(Tool.run(GROUPS, "--bootstrap-server", s.bootstrap, "--list"), group));
                s.tool(GROUPS, "--describe", "--group", group);
                s.tool(GROUPS, "--describe", "--group", group, "--members");
                s.tool(GROUPS, "--describe", "--group", group, "--state");
                s.tool(GROUPS, "--reset-offsets", "--group", group, "--topic", name, "--to-earliest", "--execute");
            }
            s.tool(GROUPS, "--describe", "--group", group);
            s.tool(GROUPS, "--reset-offsets", "--group", group, "--topic", name, "--to-earliest", "--execute");
            s.tool(GROUPS, "--reset-offsets", "--group", group, "--all-topics", "--to-offset", "4", "--dry-run");
            s.tool(GROUPS, "--describe", "--group", group, "--offsets");
            s.tool(GROUPS, "--delete-offsets", "--group", group, "--topic", name + ":1");
            s.tool(GROUPS, "--delete", "--group", group);
            s.tool(GROUPS, "--describe", "--group", group);
            return List.of(member);
        });
    }

    @Test
    void kafkaConfigs(TestInfo info) throws Exception {
        compare(info, (s, name) -> {
            s.createTopic(name, 1);
            s.tool(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", name);
            s.tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name, "--add-config",
                    "retention.ms=7200000,cleanup.policy=compact,max.message.bytes=200000");
            s.tool(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", name);
            s.tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name, "--delete-config",
                    "cleanup.policy");
            s.tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", name, "--add-config",
                    "no.such.config=1");
            s.tool(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", name);
            s.tool(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1");
            s.tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config",
                    "log.retention.ms=86400000");
            s.toolUntil(out -> out.contains(" log.retention.ms=86400000 sensitive"), CONFIGS, "--describe", "--entity-type", "brokers",
                    "--entity-name", "1");
            s.tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config",
                    "log.retention.ms");
            s.toolUntil(out -> !out.contains("log.retention.ms"), CONFIGS, "--describe", "--entity-type", "brokers",
                    "--entity-name", "1");
            s.tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                    "log.retention.bytes=1073741824");
            s.toolUntil(out -> out.contains(" log.retention.bytes=1073741824 sensitive"), CONFIGS, "--describe", "--entity-type", "brokers",
                    "--entity-default");
            s.tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
                    "log.retention.bytes");
            s.toolUntil(out -> !out.contains("log.retention.bytes"), CONFIGS, "--describe", "--entity-type",
                    "brokers", "--entity-default");
            return List.of();
        });
    }

    /** The columns of kafka-transactions' tables that two brokers fill differently. */
    private static final List<String> TXN_VARYING = List.of("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
            "LastTimestamp", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "CoordinatorEpoch");

    @Test
    void kafkaTransactions(TestInfo info) throws Exception {
        compare(info, (s, name) -> {
            String txnId = name + "-txn";
            s.createTopic(name, 1);
            s.produce(name, 1, 2);
            try (KafkaProducer<String, String> p = s.producer(Map.of("transactional.id", txnId))) {
                p.initTransactions();
                p.beginTransaction();
                p.send(new ProducerRecord<>(name, 0, "k", "open")).get();
                s.record(only(mask(Tool.run(TRANSACTIONS, "--bootstrap-server", s.bootstrap, "list"), TXN_VARYING),
                        txnId));
                s.toolMasked(TXN_VARYING, TRANSACTIONS, "describe", "--transactional-id", txnId);
                s.toolMasked(TXN_VARYING, TRANSACTIONS, "describe-producers", "--topic", name, "--partition", "0");
                s.toolMasked(TXN_VARYING, TRANSACTIONS, "find-hanging", "--broker-id", "1");
                s.toolMasked(TXN_VARYING, TRANSACTIONS, "abort", "--topic", name, "--partition", "0",
                        "--start-offset", "2");
                s.toolMasked(TXN_VARYING, TRANSACTIONS, "describe-producers", "--topic", name, "--partition", "0");
            }
            return List.of();
        });
    }

    @Test
    void kafkaGetOffsetsDeleteRecordsLogDirsLeaderElection(TestInfo info) throws Exception {
        compare(info, (s, name) -> {
            s.createTopic(name, 2);
            s.produce(name, 2, 10);
            s.tool(GET_OFFSETS, "--topic", name);
            s.tool(GET_OFFSETS, "--topic", name, "--time", "earliest");
            s.tool(GET_OFFSETS, "--topic", name, "--time", "max-timestamp");
            s.tool(GET_OFFSETS, "--topic", name, "--time", "earliest-local");
            s.tool(GET_OFFSETS, "--topic", name, "--time", "latest-tiered");
            s.tool(GET_OFFSETS, "--topic", name, "--time", "1700000003500");
            s.tool(GET_OFFSETS, "--topic-partitions", name + ":1");
            Path json = rill.dir.resolve(name + "-delete.json");
            Files.writeString(json, "{\"version\":1,\"partitions\":[{\"topic\":\"" + name
                    + "\",\"partition\":0,\"offset\":3}]}");
            s.tool(DELETE_RECORDS, "--offset-json-file", json.toString());
            s.tool(GET_OFFSETS, "--topic", name, "--time", "earliest");
            Tool.Result dirs = s.tool(LOG_DIRS, "--describe", "--topic-list", name);
            s.tool(LEADER_ELECTION, "--election-type", "preferred", "--topic", name, "--partition", "0");
            s.tool(LEADER_ELECTION, "--election-type", "unclean", "--topic", name, "--partition", "1");
            List<String> extra = new ArrayList<>();
            Matcher m = Pattern.compile("\"logDir\":\"([^\"]+)\"").matcher(dirs.out());
            while (m.find()) {
                extra.add(m.group(1));
            }
            extra.add(json.toString());
            return extra;
        });
    }

    @Test
    void consoleAndVerifiableProducersAndConsumers(TestInfo info) throws Exception {
        compare(info, (s, name) -> {
            s.createTopic(name, 1);
            s.toolWithInput(CONSOLE_PRODUCER, "a:one\nb:two\nc:three\n", "--topic", name, "--property",
                    "parse.key=true", "--property", "key.separator=:", "--producer-property", "acks=all");
            s.tool(CONSOLE_CONSUMER, "--topic", name, "--from-beginning", "--max-messages", "3", "--timeout-ms",
                    "20000", "--property", "print.key=true", "--property", "print.offset=true", "--property",
                    "print.partition=true");
            String verifiable = name + "-v";
            s.createTopic(verifiable, 1);
            // Their own JVMs: VerifiableProducer prints its summary from a JVM shutdown hook.
            s.record(Tool.runJvm(VERIFIABLE_PRODUCER, "--bootstrap-server", s.bootstrap, "--topic", verifiable,
                    "--max-messages", "20", "--acks", "-1"));
            Tool.Result consumed = Tool.runJvm(VERIFIABLE_CONSUMER, "--bootstrap-server", s.bootstrap, "--topic",
                    verifiable, "--group-id", verifiable + "-g", "--group-protocol", "classic", "--max-messages", "20",
                    "--reset-policy", "earliest");
            s.note("VerifiableConsumer exit " + consumed.code() + ": " + verifiableSummary(consumed.out()));
            return List.of();
        });
    }

    /** What a VerifiableConsumer run reports, independent of how its fetches were batched. */
    private static String verifiableSummary(String out) {
        long consumed = 0;
        long lastCommitted = -1;
        List<String> events = new ArrayList<>();
        Pattern name = Pattern.compile("\"name\":\"([a-z_]+)\"");
        Pattern count = Pattern.compile("\"count\":(\\d+),\"partitions\"");
        Pattern offset = Pattern.compile("\"offset\":(\\d+)");
        for (String line : out.lines().toList()) {
            Matcher n = name.matcher(line);
            if (!n.find()) {
                continue;
            }
            String event = n.group(1);
            if (events.isEmpty() || !events.get(events.size() - 1).equals(event)) {
                events.add(event);
            }
            Matcher c = count.matcher(line);
            if (event.equals("records_consumed") && c.find()) {
                consumed += Long.parseLong(c.group(1));
            }
            Matcher o = offset.matcher(line);
            if (event.equals("offsets_committed") && o.find()) {
                lastCommitted = Long.parseLong(o.group(1));
            }
        }
        return "events " + events + ", records consumed " + consumed + ", last committed offset " + lastCommitted;
    }

    @Test
    void kafkaMetadataQuorumDescribeIsAClearError() throws Exception {
        Tool.Result r = Tool.run(METADATA_QUORUM, "--bootstrap-server", rill.bootstrap(), "describe", "--status");
        assertEquals(1, r.code(), r.transcript());
        assertTrue(r.err().contains("UnsupportedVersionException") || r.err().contains("does not support"),
                r.transcript());
        Tool.Result k = Tool.run(METADATA_QUORUM, "--bootstrap-server", kafkaBootstrap(), "describe", "--status");
        assertEquals(0, k.code(), k.transcript());
    }
}
