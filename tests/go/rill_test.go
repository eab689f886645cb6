// Package gotests runs Go Kafka clients (Sarama, franz-go) against a real rill (issue 30): each test starts
// target/debug/rill (RILL_BIN) on free loopback ports, as tests/e2e and tests/java do.
package gotests

import (
	"bytes"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rill is one broker process with its data and log under the test's temporary directory.
type rill struct {
	cmd       *exec.Cmd
	bootstrap string
	log       string
}

var (
	portMu   sync.Mutex
	portLock *os.File
	handed   = map[int]bool{}
)

// freePort hands out a loopback port below the ephemeral range, locked (one fcntl byte at its
// offset) in /tmp/rill-e2e-ports.lock, the file tests/e2e and tests/java lock: never one another
// live test process holds.
func freePort(t *testing.T) int {
	portMu.Lock()
	defer portMu.Unlock()
	high := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				high = v
			}
		}
	}
	if portLock == nil {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "rill-e2e-ports.lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		portLock = f
	}
	for {
		port := 10000 + rand.Intn(high-10000)
		if handed[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
		if err := syscall.FcntlFlock(portLock.Fd(), syscall.F_SETLK, &lk); err != nil {
			continue
		}
		handed[port] = true
		return port
	}
}

// startRill starts a broker (node.id 1, two shards, 100 ms initial rebalance delay) and waits for
// its "all shards listening" line; it is stopped with SIGTERM (and checked for a clean exit and no
// panic) when the test ends.
func startRill(t *testing.T) *rill {
	t.Helper()
	bin := os.Getenv("RILL_BIN")
	if bin == "" {
		t.Fatal("RILL_BIN is not set (tests/go/run.sh sets it)")
	}
	dir := t.TempDir()
	port, admin := freePort(t), freePort(t)
	conf := filepath.Join(dir, "rill.properties")
	if err := os.WriteFile(conf, []byte("node.id=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &rill{bootstrap: fmt.Sprintf("127.0.0.1:%d", port), log: filepath.Join(dir, "rill.log")}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "--listen", r.bootstrap, "--data-dir", filepath.Join(dir, "data"),
		"--shards", "2", "--admin-listen", fmt.Sprintf("127.0.0.1:%d", admin), "--default-partitions", "1",
		"--auto-create-topics", "true", "--group-initial-rebalance-delay-ms", "100", "--config", conf)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.Env = append(os.Environ(), "RUST_LOG=info", "NO_COLOR=1")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(r.log)
		if bytes.Contains(b, []byte("all shards listening")) {
			if c, err := net.DialTimeout("tcp", r.bootstrap, 500*time.Millisecond); err == nil {
				c.Close()
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("rill exited during start-up (%v); log:\n%s", err, tail(r.log))
		default:
		}
		if time.Now().After(deadline) {
			r.cmd.Process.Kill()
			t.Fatalf("rill did not listen within 30 s; log:\n%s", tail(r.log))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("rill exited with %v on SIGTERM; log:\n%s", err, tail(r.log))
			}
		case <-time.After(20 * time.Second):
			r.cmd.Process.Kill()
			t.Errorf("rill did not stop within 20 s of SIGTERM")
		}
		if b, _ := os.ReadFile(r.log); bytes.Contains(b, []byte("panicked")) {
			t.Errorf("rill panicked; log:\n%s", tail(r.log))
		}
		logf.Close()
	})
	return r
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return strings.Join(lines, "\n")
}
