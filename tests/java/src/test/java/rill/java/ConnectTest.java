package rill.java;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.runtime.Connect;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Kafka Connect in distributed mode on rill: a worker whose config, offset and status topics (compacted,
 * made by the worker's AdminClient) and whose "connect" group live on rill, running a source connector
 * (100 lines to a topic, with source offsets) and a sink connector (the topic back, committed through the
 * sink's consumer group). The worker is stopped part-way and a second one takes over from what the first
 * stored on rill: the sink gets every line exactly once, in order. The connectors are the test's own:
 * connect-file is not published for 4.4.0.
 */
class ConnectTest extends RillCase {
    static final int LINES = 100;
    /** The lines a source emits before it waits for its topic to be in RESUMED. */
    static final int FIRST_PART = 40;
    /** What each sink (by its "sink.id" config) received, in order. */
    static final Map<String, List<String>> SUNK = new ConcurrentHashMap<>();
    /**
     * Topics whose source may go past FIRST_PART: the test stops the first worker while its
     * source waits there, so the second worker always has the rest to carry on with, however
     * long the first one's stop takes (it once took longer than the whole 1 s of lines).
     */
    static final Set<String> RESUMED = ConcurrentHashMap.newKeySet();

    /** Emits "line 0".."line 99" to its "topic", each with its source offset, then idles. */
    public static class LinesSource extends SourceConnector {
        private Map<String, String> props;

        @Override public void start(Map<String, String> props) { this.props = props; }
        @Override public Class<? extends Task> taskClass() { return LinesTask.class; }
        @Override public List<Map<String, String>> taskConfigs(int max) { return List.of(props); }
        @Override public void stop() { }
        @Override public ConfigDef config() { return new ConfigDef(); }
        @Override public String version() { return "1"; }
    }

    /** LinesSource's task: resumes after the last offset the worker committed for it. */
    public static class LinesTask extends SourceTask {
        private String topic;
        private int next;

        @Override public String version() { return "1"; }

        @Override
        public void start(Map<String, String> props) {
            topic = props.get("topic");
            Map<String, Object> done = context.offsetStorageReader().offset(Map.of("source", "lines"));
            next = done == null ? 0 : ((Number) done.get("line")).intValue() + 1;
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            if (next >= LINES || (next >= FIRST_PART && !RESUMED.contains(topic))) {
                Thread.sleep(100);
                return null;
            }
            Thread.sleep(50);
            List<SourceRecord> batch = new ArrayList<>();
            for (int i = 0; i < 5 && next < LINES; i++, next++) {
                batch.add(new SourceRecord(Map.of("source", "lines"), Map.of("line", next), topic,
                        Schema.STRING_SCHEMA, "line " + next));
            }
            return batch;
        }

        @Override public void stop() { }
    }

    /** Hands what it receives to SUNK under its "sink.id". */
    public static class ListSink extends SinkConnector {
        private Map<String, String> props;

        @Override public void start(Map<String, String> props) { this.props = props; }
        @Override public Class<? extends Task> taskClass() { return ListTask.class; }
        @Override public List<Map<String, String>> taskConfigs(int max) { return List.of(props); }
        @Override public void stop() { }
        @Override public ConfigDef config() { return new ConfigDef(); }
        @Override public String version() { return "1"; }
    }

    /** ListSink's task. */
    public static class ListTask extends SinkTask {
        private List<String> into;

        @Override public String version() { return "1"; }

        @Override
        public void start(Map<String, String> props) {
            into = SUNK.computeIfAbsent(props.get("sink.id"), k -> new CopyOnWriteArrayList<>());
        }

        @Override
        public void put(Collection<SinkRecord> records) {
            records.forEach(r -> into.add((String) r.value()));
        }

        @Override public void stop() { }
    }

    private static String rest(HttpClient http, String method, URI uri, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri).header("Content-Type", "application/json");
        b = body == null ? b.method(method, HttpRequest.BodyPublishers.noBody())
                : b.method(method, HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() / 100 != 2) {
            throw new AssertionError(method + " " + uri + ": " + r.statusCode() + " " + r.body());
        }
        return r.body();
    }

    private static Connect<?> startWorker(Map<String, String> worker, HttpClient http, URI base) throws Exception {
        Connect<?> connect = new ConnectDistributed().startConnect(worker);
        waitFor("the Connect REST API", () -> {
            try {
                rest(http, "GET", base, null);
                return true;
            } catch (Exception e) {
                return false;
            }
        });
        return connect;
    }

    @Test
    void aSourceToATopicAndBackThroughASink(TestInfo info) throws Exception {
        String app = unique(info);
        String topic = app + "-lines";
        createTopic(topic, 1);
        int port = Ports.free();
        Map<String, String> worker = new HashMap<>();
        worker.put("bootstrap.servers", rill.bootstrap());
        worker.put("group.id", app + "-workers");
        worker.put("config.storage.topic", app + "-configs");
        worker.put("offset.storage.topic", app + "-offsets");
        worker.put("status.storage.topic", app + "-status");
        worker.put("config.storage.replication.factor", "1");
        worker.put("offset.storage.replication.factor", "1");
        worker.put("status.storage.replication.factor", "1");
        worker.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        worker.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        worker.put("listeners", "http://127.0.0.1:" + port);
        worker.put("offset.flush.interval.ms", "500");
        HttpClient http = HttpClient.newHttpClient();
        URI base = URI.create("http://127.0.0.1:" + port + "/connectors");
        Connect<?> connect = startWorker(worker, http, base);
        try {
            rest(http, "POST", base, "{\"name\":\"" + app + "-source\",\"config\":{"
                    + "\"connector.class\":\"" + LinesSource.class.getName() + "\","
                    + "\"tasks.max\":\"1\",\"topic\":\"" + topic + "\"}}");
            rest(http, "POST", base, "{\"name\":\"" + app + "-sink\",\"config\":{"
                    + "\"connector.class\":\"" + ListSink.class.getName() + "\","
                    + "\"tasks.max\":\"1\",\"sink.id\":\"" + app + "\",\"topics\":\"" + topic + "\"}}");
            waitFor("the sink to receive the first part",
                    () -> SUNK.getOrDefault(app, List.of()).size() >= FIRST_PART);
            connect.stop();
            connect.awaitStop();
            int before = SUNK.get(app).size();
            if (before != FIRST_PART) {
                throw new AssertionError("the first worker's sink got " + before + " lines, not " + FIRST_PART);
            }
            RESUMED.add(topic);
            // A new worker (same group and topics) reads the connectors' configs, the source's offsets and
            // the sink group's commits back from rill and carries on.
            connect = startWorker(worker, http, base);
            waitFor("the sink to receive every line", () -> SUNK.get(app).size() >= LINES);
            Thread.sleep(1000); // and nothing again after that
            List<String> want = new ArrayList<>();
            for (int i = 0; i < LINES; i++) {
                want.add("line " + i);
            }
            assertEquals(want, SUNK.get(app));
            for (String name : List.of(app + "-source", app + "-sink")) {
                String status = rest(http, "GET", URI.create(base + "/" + name + "/status"), null);
                if (!status.contains("\"RUNNING\"") || status.contains("FAILED")) {
                    throw new AssertionError(name + " status: " + status);
                }
            }
        } finally {
            connect.stop();
            connect.awaitStop();
        }
    }
}
