package rill.java;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Free listener ports, handed out as tests/e2e/broker.py's free_port does: below the kernel's
 * ephemeral range (no outgoing connection can take one between the probe and rill's bind) and locked
 * with a one-byte fcntl lock at the port's offset of /tmp/rill-e2e-ports.lock, the file the e2e
 * workers lock, so that this JVM and the pytest-xdist workers never hand out the same port.
 */
public final class Ports {
    private static final int FLOOR = 10_000;
    private static final Path LOCKS = Path.of(System.getProperty("java.io.tmpdir"), "rill-e2e-ports.lock");
    private static final SecureRandom RNG = new SecureRandom();
    private static final Set<Integer> HANDED_OUT = new HashSet<>();
    /** Held until the JVM exits: a lock released early would let another process take the port. */
    private static final List<FileLock> HELD = new ArrayList<>();
    private static FileChannel channel;

    private Ports() {}

    /** A port on 127.0.0.1 nobody listens on now that no other live test process handed out. */
    public static synchronized int free() {
        int high = ephemeralLow();
        while (true) {
            int port = FLOOR + RNG.nextInt(high - FLOOR);
            if (HANDED_OUT.contains(port) || !bindable(port)) {
                continue;
            }
            if (claim(port)) {
                HANDED_OUT.add(port);
                return port;
            }
        }
    }

    private static boolean bindable(int port) {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(false);
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static boolean claim(int port) {
        try {
            if (channel == null) {
                channel = FileChannel.open(LOCKS, StandardOpenOption.CREATE, StandardOpenOption.READ,
                        StandardOpenOption.WRITE);
            }
            FileLock lock = channel.tryLock(port, 1, false);
            if (lock == null) {
                return false;
            }
            HELD.add(lock);
            return true;
        } catch (OverlappingFileLockException e) {
            return false;
        } catch (IOException e) {
            throw new IllegalStateException("cannot lock " + LOCKS, e);
        }
    }

    private static int ephemeralLow() {
        try {
            // Not Files.readString: it trusts the size /proc reports and reads a byte or so.
            String range;
            try (var in = Files.newInputStream(Path.of("/proc/sys/net/ipv4/ip_local_port_range"))) {
                range = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.US_ASCII).trim();
            }
            return Integer.parseInt(range.split("\\s+")[0]);
        } catch (IOException | RuntimeException e) {
            return 32768;
        }
    }
}
