"""The test's own network: one namespace per rill node, and one for the bridge and the clients.

    namespace rill-jepsen-<id>-c (bridge + clients)   node namespaces rill-jepsen-<id>-n<i>
    br0 10.A.B.1/24 ---+--- h1 <-veth-> eth0 10.A.B.11   rill node 1
                       +--- h2 <-veth-> eth0 10.A.B.12   rill node 2
                       +--- h3 <-veth-> eth0 10.A.B.13   rill node 3

Nothing is added to the root namespace. The runner moves itself into the client namespace
(`enter_clients`) before it makes any client, so every client thread (librdkafka's included)
reaches the nodes through the bridge, and nothing else: that namespace has no default route,
so a client still running while the network is torn down can reach no other address.

A partition is made inside the nodes' namespaces with iptables DROP rules on the peers'
addresses (both directions), so an isolated node still answers clients, as in Jepsen: a deposed
leader that keeps acknowledging is exactly what the test must catch. Healing flushes those rules.

Namespaces carry a 4-hex run id. Each run writes its pid to STATE_DIR/<id>.pid; `sweep_stale`
removes every run's leftovers whose pid is gone, so a run killed with SIGKILL is cleaned up by the
next one.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import random
import signal
import subprocess
from pathlib import Path

#: Where live runs record their pid (one file per run id).
STATE_DIR = Path("/run/rill-jepsen")
#: Second octet range of the test subnets: 10.200.0.0 - 10.250.255.0.
SUBNET_SECOND_OCTETS = range(200, 251)
#: setns(2)'s flag for a network namespace (<sched.h>).
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
#: Host part of node i's address is NODE_HOST_BASE + i.
NODE_HOST_BASE = 10


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one ip/iptables command; a failure raises with its stderr."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


class Network:
    """The bridge, the namespaces and the veths of one run; `close` removes them all."""

    def __init__(self, nodes: int, rng: random.Random | None = None):
        rng = rng or random.Random()
        self.run_id = f"{rng.randrange(1 << 16):04x}"
        self.nodes = nodes
        # The subnet exists only inside the run's namespaces; random, so two runs' logs differ.
        self.subnet = ipaddress.ip_network(
            f"10.{rng.choice(SUBNET_SECOND_OCTETS)}.{rng.randrange(256)}.0/24")
        self.created = False

    def namespace(self, node_id: int) -> str:
        return f"rill-jepsen-{self.run_id}-n{node_id}"

    def address(self, node_id: int) -> str:
        return str(self.subnet.network_address + NODE_HOST_BASE + node_id)

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def client_namespace(self) -> str:
        return f"rill-jepsen-{self.run_id}-c"

    def create(self) -> None:
        """Make the client namespace with its bridge and every node's namespace; on any failure
        remove what was made."""
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / f"{self.run_id}.pid").write_text(str(os.getpid()))
        self.created = True
        try:
            prefix, c = self.subnet.prefixlen, self.client_namespace
            run("ip", "netns", "add", c)
            run("ip", "-n", c, "link", "set", "lo", "up")
            run("ip", "-n", c, "link", "add", "br0", "type", "bridge")
            run("ip", "-n", c, "addr", "add", f"{self.gateway}/{prefix}", "dev", "br0")
            run("ip", "-n", c, "link", "set", "br0", "up")
            for i in range(1, self.nodes + 1):
                ns, host = self.namespace(i), f"h{i}"
                run("ip", "netns", "add", ns)
                run("ip", "-n", c, "link", "add", host, "type", "veth",
                    "peer", "name", "eth0", "netns", ns)
                run("ip", "-n", c, "link", "set", host, "master", "br0")
                run("ip", "-n", c, "link", "set", host, "up")
                run("ip", "-n", ns, "addr", "add", f"{self.address(i)}/{prefix}", "dev", "eth0")
                run("ip", "-n", ns, "link", "set", "eth0", "up")
                run("ip", "-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def enter_clients(self) -> None:
        """Move the calling thread into the client namespace: threads it starts later (client
        workers, librdkafka's) are born there; subprocesses (ip, iptables, rill) too, which
        name their own namespace anyway."""
        fd = os.open(f"/run/netns/{self.client_namespace}", os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns({self.client_namespace}): {os.strerror(err)}")
        finally:
            os.close(fd)

    def exec_prefix(self, node_id: int) -> list[str]:
        """The command prefix that runs a program inside node `node_id`'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node_id)]

    def isolate(self, node_id: int) -> None:
        """Cut node `node_id` off from every other node (both directions); clients still reach it."""
        for other in range(1, self.nodes + 1):
            if other == node_id:
                continue
            self._drop(node_id, self.address(other))
            self._drop(other, self.address(node_id))

    def _drop(self, node_id: int, peer: str) -> None:
        ns = self.namespace(node_id)
        run("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-s", peer, "-j", "DROP")
        run("ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-d", peer, "-j", "DROP")

    def heal(self) -> None:
        """Remove every DROP rule in every node's namespace."""
        for i in range(1, self.nodes + 1):
            ns = self.namespace(i)
            run("ip", "netns", "exec", ns, "iptables", "-F", "INPUT")
            run("ip", "netns", "exec", ns, "iptables", "-F", "OUTPUT")

    def rules(self) -> dict[int, list[str]]:
        """Each namespace's DROP rules (for reports)."""
        out = {}
        for i in range(1, self.nodes + 1):
            text = run("ip", "netns", "exec", self.namespace(i), "iptables", "-S").stdout
            out[i] = [line for line in text.splitlines() if "DROP" in line and line.startswith("-A")]
        return out

    def close(self) -> None:
        """Remove the namespaces (their veths go with them) and the bridge. Idempotent."""
        if not self.created:
            return
        remove_run(self.run_id)
        self.created = False


def remove_run(run_id: str) -> None:
    """Kill (SIGKILL) every process still in `run_id`'s node namespaces, then delete every
    namespace of the run (their veths and the bridge go with them), and its pid file."""
    for line in run("ip", "netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(f"rill-jepsen-{run_id}-"):
            continue
        if name.endswith("-c"):
            continue                                 # last: the runner may live in it
        for pid in run("ip", "netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        run("ip", "netns", "del", name, check=False)
    run("ip", "netns", "del", f"rill-jepsen-{run_id}-c", check=False)
    (STATE_DIR / f"{run_id}.pid").unlink(missing_ok=True)


def sweep_stale() -> list[str]:
    """Remove the leftovers of earlier runs whose process is gone; returns their run ids."""
    swept = []
    if not STATE_DIR.exists():
        return swept
    for pid_file in STATE_DIR.glob("*.pid"):
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, 0)
            continue                                   # still running: not ours to touch
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError):
            continue
        remove_run(pid_file.stem)
        swept.append(pid_file.stem)
    return swept
