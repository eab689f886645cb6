package rill.java;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One real `rill` process (the debug binary test.sh builds, -Drill.bin) on free loopback ports with its
 * own data directory under the module's work dir, as tests/e2e/broker.py starts them: node.id 1 (the
 * Kafka peer's, so tool outputs compare), one partition per auto-created topic, a 100 ms initial
 * rebalance delay. A start waits for THIS start's "all shards listening" line.
 */
public final class Rill implements AutoCloseable {
    /** What rill logs once every shard listens (server/src/shard/runtime.rs). */
    static final String READY_LINE = "all shards listening";
    static final Duration START_TIMEOUT = Duration.ofSeconds(30);
    static final Duration STOP_TIMEOUT = Duration.ofSeconds(20);

    public final String host = "127.0.0.1";
    public final int port = Ports.free();
    public final int adminPort = Ports.free();
    public final Path dir;
    public final Path log;
    private final int shards;
    private final List<String> config;
    private Process process;
    private int starts;

    /** A broker named `name` (its directory under the work dir), `shards` shards, extra config lines. */
    public Rill(String name, int shards, String... configLines) {
        Path work = Path.of(System.getProperty("rill.java.work", "target/java/work"));
        this.dir = work.resolve(name + "-" + port);
        this.log = dir.resolve("rill.log");
        this.shards = shards;
        this.config = new ArrayList<>(List.of("node.id=1"));
        this.config.addAll(List.of(configLines));
    }

    /** Starts a broker with two shards (the e2e suite's default). */
    public static Rill started(String name, String... configLines) {
        Rill r = new Rill(name, 2, configLines);
        r.start();
        return r;
    }

    public String bootstrap() {
        return host + ":" + port;
    }

    private static Path binary() {
        String bin = System.getProperty("rill.bin");
        if (bin == null || bin.isBlank() || bin.startsWith("${")) {
            bin = System.getenv("RILL_BIN");
        }
        if (bin == null || bin.isBlank()) {
            throw new IllegalStateException("no rill binary: pass -Drill.bin=target/debug/rill (run.sh does)");
        }
        return Path.of(bin);
    }

    public List<String> command() {
        return List.of(binary().toString(), "--listen", bootstrap(), "--data-dir", dir.resolve("data").toString(),
                "--shards", Integer.toString(shards), "--admin-listen", host + ":" + adminPort,
                "--default-partitions", "1", "--auto-create-topics", "true",
                "--group-initial-rebalance-delay-ms", "100", "--config", dir.resolve("rill.properties").toString());
    }

    public synchronized void start() {
        if (process != null && process.isAlive()) {
            throw new IllegalStateException("already running");
        }
        try {
            Files.createDirectories(dir.resolve("data"));
            Files.write(dir.resolve("rill.properties"), config, StandardCharsets.UTF_8);
            starts++;
            Files.writeString(log, "\n===== start #" + starts + ": " + String.join(" ", command()) + "\n",
                    StandardCharsets.UTF_8, java.nio.file.StandardOpenOption.CREATE,
                    java.nio.file.StandardOpenOption.APPEND);
            long logStart = Files.size(log);
            ProcessBuilder pb = new ProcessBuilder(command()).directory(dir.toFile())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
            pb.environment().putIfAbsent("RUST_LOG", "info");
            pb.environment().putIfAbsent("RUST_BACKTRACE", "1");
            pb.environment().put("NO_COLOR", "1");
            process = pb.start();
            long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
            while (System.nanoTime() < deadline) {
                if (!process.isAlive()) {
                    throw new IllegalStateException("rill exited with " + process.exitValue()
                            + " during start-up; log tail:\n" + logTail(40));
                }
                if (loggedSince(logStart, READY_LINE) && accepts()) {
                    return;
                }
                Thread.sleep(50);
            }
            process.destroyForcibly().waitFor();
            throw new IllegalStateException("rill did not listen on " + bootstrap() + " within " + START_TIMEOUT
                    + " (killed); log tail:\n" + logTail(40));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private boolean accepts() {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 500);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private boolean loggedSince(long offset, String needle) throws IOException {
        byte[] all = Files.readAllBytes(log);
        if (all.length <= offset) {
            return false;
        }
        return new String(all, (int) offset, all.length - (int) offset, StandardCharsets.UTF_8).contains(needle);
    }

    public boolean alive() {
        return process != null && process.isAlive();
    }

    /** SIGTERM and wait; SIGKILL (and an exception) if it does not exit in time. The exit code. */
    public synchronized int stop() {
        if (process == null) {
            return 0;
        }
        try {
            if (process.isAlive()) {
                process.destroy();
                if (!process.waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor();
                    throw new IllegalStateException("rill did not stop within " + STOP_TIMEOUT + " of SIGTERM");
                }
            }
            return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** SIGKILL: the process dies without flushing or closing anything. */
    public synchronized void kill9() throws InterruptedException {
        process.destroyForcibly().waitFor();
    }

    public String logText() {
        try {
            return Files.readString(log, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    public String logTail(int lines) {
        String[] all = logText().split("\n");
        return String.join("\n", java.util.Arrays.copyOfRange(all, Math.max(0, all.length - lines), all.length));
    }

    /** Stops the broker; fails on a non-zero exit or a panic in its log (what e2e's fixture checks). */
    @Override
    public void close() {
        int code = stop();
        if (code != 0) {
            throw new AssertionError("rill exited with " + code + " on SIGTERM; log tail:\n" + logTail(60));
        }
        if (logText().contains("panicked")) {
            throw new AssertionError("rill panicked; log tail:\n" + logTail(60));
        }
    }
}
