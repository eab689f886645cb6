package rill.java;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The Java producer: acks, idempotence, transactions (commit, abort, fencing, offsets), codecs, headers. */
class ProducerTest extends RillCase {
    private static final Map<String, Object> READ_COMMITTED = Map.of("isolation.level", "read_committed");

    @ParameterizedTest(name = "acks={0}")
    @ValueSource(strings = {"0", "1", "all"})
    void plainProducerEveryAcks(String acks, TestInfo info) throws Exception {
        String topic = unique(info);
        createTopic(topic, 2);
        try (KafkaProducer<String, String> p = producer(Map.of("acks", acks, "enable.idempotence", "false",
                "linger.ms", "5"))) {
            produce(p, topic, 2, 200);
        }
        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        List<ConsumerRecord<String, String>> got = readAll(tps, Map.of());
        assertEquals(200, got.size());
        for (int part = 0; part < 2; part++) {
            final int pt = part;
            List<String> values = got.stream().filter(r -> r.partition() == pt).map(ConsumerRecord::value).toList();
            List<String> expected = IntStream.range(0, 200).filter(i -> i % 2 == pt).mapToObj(i -> "v" + i).toList();
            assertEquals(expected, values, "partition " + part + " in order");
        }
    }

    @Test
    void idempotentProducerWritesEachRecordOnce(TestInfo info) throws Exception {
        String topic = unique(info);
        try (KafkaProducer<String, String> p = producer(Map.of("enable.idempotence", "true", "acks", "all",
                "max.in.flight.requests.per.connection", "5", "linger.ms", "1", "batch.size", "2000"))) {
            List<RecordMetadata> metas = new ArrayList<>();
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 2000; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)));
            }
            for (var f : fs) {
                metas.add(f.get());
            }
            for (int i = 0; i < metas.size(); i++) {
                assertEquals(i, metas.get(i).offset(), "offsets are dense and in send order");
            }
        }
        List<ConsumerRecord<String, String>> got = readAll(List.of(new TopicPartition(topic, 0)), Map.of());
        assertEquals(IntStream.range(0, 2000).mapToObj(i -> "v" + i).toList(),
                got.stream().map(ConsumerRecord::value).toList());
    }

    @Test
    void transactionsCommitAndAbort(TestInfo info) throws Exception {
        String topic = unique(info);
        createTopic(topic, 2);
        try (KafkaProducer<String, String> p = producer(Map.of("transactional.id", topic + "-txn"))) {
            p.initTransactions();
            for (String outcome : List.of("commit", "abort", "commit")) {
                p.beginTransaction();
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(topic, i % 2, outcome, outcome + i));
                }
                if (outcome.equals("commit")) {
                    p.commitTransaction();
                } else {
                    p.flush();
                    p.abortTransaction();
                }
            }
        }
        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        List<ConsumerRecord<String, String>> committed = readAll(tps, READ_COMMITTED);
        assertEquals(20, committed.size(), "read_committed sees the two committed transactions");
        assertTrue(committed.stream().allMatch(r -> r.key().equals("commit")));
        List<ConsumerRecord<String, String>> all = readAll(tps, Map.of());
        assertEquals(30, all.size(), "read_uncommitted sees the aborted records too");
        try (KafkaConsumer<String, String> c = consumer(Map.of())) {
            // Each partition: 15 records and 3 control markers.
            assertEquals(Map.of(tps.get(0), 18L, tps.get(1), 18L), c.endOffsets(tps, TIMEOUT));
        }
    }

    @Test
    void openTransactionHoldsReadCommittedAtTheLastStableOffset(TestInfo info) throws Exception {
        String topic = unique(info);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> plain = producer(Map.of());
                KafkaProducer<String, String> txn = producer(Map.of("transactional.id", topic + "-txn"))) {
            produce(plain, topic, 1, 3);
            txn.initTransactions();
            txn.beginTransaction();
            txn.send(new ProducerRecord<>(topic, 0, "open", "open")).get();
            produce(plain, topic, 1, 2);
            try (KafkaConsumer<String, String> rc = consumer(READ_COMMITTED);
                    KafkaConsumer<String, String> ru = consumer(Map.of())) {
                assertEquals(3L, rc.endOffsets(List.of(tp), TIMEOUT).get(tp), "LSO: the open transaction's start");
                assertEquals(6L, ru.endOffsets(List.of(tp), TIMEOUT).get(tp), "high watermark");
                rc.assign(List.of(tp));
                rc.seekToBeginning(List.of(tp));
                assertEquals(3, pollUntil(rc, 3).size());
                txn.commitTransaction();
                List<String> rest = pollUntil(rc, 3).stream().map(ConsumerRecord::value).toList();
                assertEquals(List.of("open", "v0", "v1"), rest);
            }
        }
    }

    @Test
    void consumeTransformProduceCommitsOffsetsInTheTransaction(TestInfo info) throws Exception {
        String in = unique(info) + "-in";
        String out = in.replace("-in", "-out");
        String group = in + "-g";
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            produce(p, in, 1, 20);
        }
        try (KafkaConsumer<String, String> c = consumer(Map.of("group.id", group, "isolation.level", "read_committed"));
                KafkaProducer<String, String> txn = producer(Map.of("transactional.id", group + "-txn"))) {
            txn.initTransactions();
            c.subscribe(List.of(in));
            List<ConsumerRecord<String, String>> batch = pollUntil(c, 20);
            txn.beginTransaction();
            for (ConsumerRecord<String, String> r : batch) {
                txn.send(new ProducerRecord<>(out, 0, r.key(), r.value().toUpperCase()));
            }
            txn.sendOffsetsToTransaction(Map.of(new TopicPartition(in, 0), new OffsetAndMetadata(20)),
                    c.groupMetadata());
            txn.commitTransaction();
            assertEquals(20L, c.committed(Set.of(new TopicPartition(in, 0)), TIMEOUT)
                    .get(new TopicPartition(in, 0)).offset());
        }
        List<String> values = readAll(List.of(new TopicPartition(out, 0)), READ_COMMITTED).stream()
                .map(ConsumerRecord::value).toList();
        assertEquals(IntStream.range(0, 20).mapToObj(i -> "V" + i).toList(), values);
    }

    @Test
    void aSecondProducerWithTheSameTransactionalIdFencesTheFirst(TestInfo info) throws Exception {
        String topic = unique(info);
        try (KafkaProducer<String, String> first = producer(Map.of("transactional.id", topic + "-txn"));
                KafkaProducer<String, String> second = producer(Map.of("transactional.id", topic + "-txn"))) {
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, "first", "first")).get();
            second.initTransactions(); // aborts the first's open transaction, bumps the epoch
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, "second", "second")).get();
            second.commitTransaction();
            Exception fenced = assertThrows(Exception.class, () -> {
                first.send(new ProducerRecord<>(topic, 0, "late", "late")).get();
                first.commitTransaction();
            });
            Throwable t = fenced;
            while (t != null && !(t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException)) {
                t = t.getCause();
            }
            assertTrue(t != null, "fenced: " + fenced);
        }
        List<String> values = readAll(List.of(new TopicPartition(topic, 0)), READ_COMMITTED).stream()
                .map(ConsumerRecord::value).toList();
        assertEquals(List.of("second"), values);
    }

    @ParameterizedTest(name = "compression.type={0}")
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void codecsAndHeadersRoundTrip(String codec, TestInfo info) throws Exception {
        String topic = unique(info);
        try (KafkaProducer<String, String> p = producer(Map.of("compression.type", codec, "linger.ms", "20",
                "batch.size", "65536"))) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                List<Header> headers = List.of(new RecordHeader("i", Integer.toString(i).getBytes()),
                        new RecordHeader("codec", codec.getBytes()), new RecordHeader("empty", new byte[0]),
                        new RecordHeader("null", null));
                String key = i % 7 == 0 ? null : "k" + i;
                String value = i % 11 == 0 ? null : ("value " + i + " ").repeat(1 + i % 20);
                fs.add(p.send(new ProducerRecord<>(topic, 0, 1_700_000_000_000L + i, key, value, headers)));
            }
            for (var f : fs) {
                f.get();
            }
        }
        List<ConsumerRecord<String, String>> got = readAll(List.of(new TopicPartition(topic, 0)), Map.of());
        assertEquals(300, got.size());
        for (int i = 0; i < 300; i++) {
            ConsumerRecord<String, String> r = got.get(i);
            assertEquals(i, r.offset());
            assertEquals(i % 7 == 0 ? null : "k" + i, r.key());
            assertEquals(i % 11 == 0 ? null : ("value " + i + " ").repeat(1 + i % 20), r.value());
            assertEquals(1_700_000_000_000L + i, r.timestamp());
            List<String> names = new ArrayList<>();
            r.headers().forEach(h -> names.add(h.key()));
            assertEquals(List.of("i", "codec", "empty", "null"), names);
            assertEquals(Integer.toString(i), new String(r.headers().lastHeader("i").value()));
            assertEquals(codec, new String(r.headers().lastHeader("codec").value()));
            assertEquals(0, r.headers().lastHeader("empty").value().length);
            assertEquals(null, r.headers().lastHeader("null").value());
        }
    }

    @Test
    void sendsToManyPartitionsAcrossShardsKeepKeyOrder(TestInfo info) throws Exception {
        String topic = unique(info);
        createTopic(topic, 8);
        try (KafkaProducer<String, String> p = producer(Map.of("linger.ms", "5"))) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 800; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, "key" + (i % 16), Integer.toString(i))));
            }
            for (var f : fs) {
                f.get();
            }
        }
        List<TopicPartition> tps = IntStream.range(0, 8).mapToObj(i -> new TopicPartition(topic, i)).toList();
        List<ConsumerRecord<String, String>> got = readAll(tps, Map.of());
        assertEquals(800, got.size());
        Map<String, List<Integer>> byKey = got.stream().collect(Collectors.groupingBy(ConsumerRecord::key,
                Collectors.mapping(r -> Integer.parseInt(r.value()), Collectors.toList())));
        for (var e : byKey.entrySet()) {
            List<Integer> sorted = new ArrayList<>(e.getValue());
            sorted.sort(null);
            assertEquals(sorted, e.getValue(), "records of " + e.getKey() + " in send order");
        }
        assertEquals(16, byKey.size());
    }
}
