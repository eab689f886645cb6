package rill.java;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.stream.IntStream;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Kafka Streams, exactly once (processing.guarantee=exactly_once_v2): a word count whose topology has a
 * source, a repartition topic, a state store with its compacted changelog, and a sink, all on rill.
 */
class StreamsTest extends RillCase {

    private KafkaStreams wordCount(String app, String in, String out) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, rill.bootstrap());
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, rill.dir.resolve("streams-state").toString());
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        return new KafkaStreams(b.build(), p);
    }

    @Test
    void exactlyOnceWordCount(TestInfo info) throws Exception {
        String app = unique(info);
        String in = app + "-lines";
        String out = app + "-counts";
        createTopic(in, 2);
        createTopic(out, 2);
        List<String> words = List.of("alpha", "beta", "gamma", "delta", "epsilon");
        Map<String, Long> expected = new HashMap<>();
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < 200; i++) {
                StringBuilder line = new StringBuilder();
                for (int j = 0; j <= i % 4; j++) {
                    String w = words.get((i + j) % words.size());
                    line.append(w).append(' ');
                    expected.merge(w, 1L, Long::sum);
                }
                p.send(new ProducerRecord<>(in, i % 2, "line" + i, line.toString().trim()));
            }
            p.flush();
        }
        try (KafkaStreams streams = wordCount(app, in, out)) {
            streams.start();
            Map<String, Long> latest = new HashMap<>();
            Properties cp = new Properties();
            cp.put("bootstrap.servers", rill.bootstrap());
            cp.put("isolation.level", "read_committed");
            cp.put("auto.offset.reset", "earliest");
            try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(cp, new StringDeserializer(),
                    new LongDeserializer())) {
                List<TopicPartition> tps = IntStream.range(0, 2).mapToObj(i -> new TopicPartition(out, i)).toList();
                c.assign(tps);
                c.seekToBeginning(tps);
                long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
                while (!latest.equals(expected)) {
                    if (System.nanoTime() > deadline) {
                        throw new AssertionError("counts " + latest + ", expected " + expected + "; streams state "
                                + streams.state());
                    }
                    for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                        latest.put(r.key(), r.value());
                    }
                }
            }
            assertEquals(expected, latest);
            assertEquals(KafkaStreams.State.RUNNING, streams.state());
        }
    }
}
