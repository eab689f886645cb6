//! Several voters on a simulated network and clock, from a seed (the style of
//! `engine/src/io/sim.rs` and `server/src/group/state.rs`): messages are delayed, dropped and
//! cut by partitions; nodes crash (their disks keep a random prefix of what was not synced) and
//! restart. Checked throughout:
//! - **agreement**: every node that applied index `i` has the same image digest there;
//! - **durability**: every CreateTopics answered with success is in every final image;
//! - **liveness**: after the faults stop, a leader is elected and every node converges.
//!
//! A failure prints its seed; `RILL_SIM_SEED=<n>` reruns one seed, `RILL_SIM_SEEDS=<n>` more.

use std::collections::{BTreeMap, BTreeSet};

use crate::controller::ControllerConfig;
use crate::files::sim::{SimDisk, SimFiles};
use crate::quorum::{QuorumConfig, QuorumNode};
use crate::request::{ControllerRequest, ControllerResponse, NewTopic};
use crate::types::{Endpoint, LogIndex, NodeId};
use crate::RaftMessage;

const TICK_MS: u64 = 100;
const STEP_MS: u64 = 5;

type Node = QuorumNode<SimFiles, u64>;

struct InFlight {
    deliver_at: u64,
    from: NodeId,
    message: RaftMessage,
}

/// Faults the network and disks inject.
#[derive(Clone, Copy, Default)]
struct Faults {
    drop_per_mille: u32,
    delay_ms_max: u64,
}

struct Sim {
    seed: u64,
    rng: fastrand::Rng,
    now_ms: u64,
    voters: Vec<NodeId>,
    nodes: BTreeMap<NodeId, Option<Node>>,
    disks: BTreeMap<NodeId, SimDisk>,
    wire: Vec<InFlight>,
    /// Links that drop everything: (from, to).
    cut: BTreeSet<(NodeId, NodeId)>,
    faults: Faults,
    next_ticket: u64,
    replies: BTreeMap<u64, ControllerResponse>,
    /// Image digest after index i, as first seen.
    digests: BTreeMap<u64, (u32, NodeId)>,
    snapshot_every: u64,
    session_timeout_ms: u64,
    /// Node starts so far: each start seeds its controller anew, as a real process does.
    starts: u64,
}

/// Sessions that outlast every test unless a test is about fencing.
const SESSION_LONG_MS: u64 = 3_600_000;

impl Sim {
    fn new(seed: u64, voters: usize, snapshot_every: u64) -> Self {
        Self::with_session(seed, voters, snapshot_every, SESSION_LONG_MS)
    }

    fn with_session(seed: u64, voters: usize, snapshot_every: u64, session_ms: u64) -> Self {
        let voters: Vec<NodeId> = (1..=voters as i32).map(NodeId).collect();
        let mut sim = Self {
            seed,
            rng: fastrand::Rng::with_seed(seed),
            now_ms: 0,
            voters: voters.clone(),
            nodes: BTreeMap::new(),
            disks: voters.iter().map(|v| (*v, SimDisk::new())).collect(),
            wire: Vec::new(),
            cut: BTreeSet::new(),
            faults: Faults::default(),
            next_ticket: 0,
            replies: BTreeMap::new(),
            digests: BTreeMap::new(),
            snapshot_every,
            session_timeout_ms: session_ms,
            starts: 0,
        };
        for v in voters {
            sim.start(v);
        }
        sim
    }

    fn config(&self, node: NodeId) -> QuorumConfig {
        QuorumConfig {
            node_id: node,
            voters: self.voters.clone(),
            election_ticks: 10,
            heartbeat_ticks: 2,
            // Distinct fixed timeouts: deterministic, and no endless split votes.
            fixed_election_ticks: Some(10 + 3 * node.0 as usize),
            snapshot_every_entries: self.snapshot_every,
            controller: ControllerConfig {
                session_timeout_ms: self.session_timeout_ms,
                default_replication_factor: 1,
                ..ControllerConfig::default()
            },
            seed: self.seed.wrapping_mul(1_000_003) ^ (self.starts << 8) ^ node.0 as u64,
        }
    }

    fn start(&mut self, node: NodeId) {
        self.starts += 1;
        let files = self.disks[&node].files();
        let (quorum, _) = QuorumNode::open(self.config(node), files)
            .unwrap_or_else(|e| panic!("seed {}: node {node} cannot open: {e}", self.seed));
        self.nodes.insert(node, Some(quorum));
    }

    /// Power loss at `node`: unsynced bytes survive only as a random prefix.
    fn crash(&mut self, node: NodeId) {
        self.nodes.insert(node, None);
        let rng = &mut self.rng;
        self.disks[&node].crash(|len| rng.usize(..=len));
        self.wire.retain(|m| m.message.to != node.raft_id());
    }

    fn alive(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    fn node(&mut self, id: NodeId) -> &mut Node {
        self.nodes
            .get_mut(&id)
            .unwrap()
            .as_mut()
            .expect("node is up")
    }

    /// The unique leader of the highest term among live nodes, if any.
    fn leader(&self) -> Option<NodeId> {
        let leaders: Vec<(u64, NodeId)> = self
            .nodes
            .values()
            .flatten()
            .filter(|n| n.is_leader())
            .map(|n| (n.term(), n.node_id()))
            .collect();
        leaders.iter().max().map(|(_, id)| *id)
    }

    fn submit(&mut self, to: NodeId, request: ControllerRequest) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let now = self.now_ms;
        if let Some(Some(node)) = self.nodes.get_mut(&to) {
            if let Some((t, response)) = node.submit(ticket, &request, now) {
                self.replies.insert(t, response);
            }
        }
        ticket
    }

    /// Advance the clock one step: deliver due messages, tick on tick boundaries, poll all.
    fn step(&mut self) {
        self.now_ms += STEP_MS;
        let now = self.now_ms;
        let (due, later): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|m| m.deliver_at <= now);
        self.wire = later;
        for m in due {
            let to = NodeId::from_raft_id(m.message.to).unwrap();
            if self.cut.contains(&(m.from, to)) {
                continue;
            }
            if let Some(Some(node)) = self.nodes.get_mut(&to) {
                node.step(m.message);
            }
        }
        if now.is_multiple_of(TICK_MS) {
            for node in self.nodes.values_mut().flatten() {
                node.tick(now);
            }
        }
        for id in self.alive() {
            self.poll(id);
        }
    }

    fn poll(&mut self, id: NodeId) {
        let seed = self.seed;
        let out = self
            .node(id)
            .poll()
            .unwrap_or_else(|e| panic!("seed {seed}: node {id} failed: {e}"));
        for message in out.messages {
            if self.rng.u32(..1000) < self.faults.drop_per_mille {
                continue;
            }
            let delay = 1 + self.rng.u64(..=self.faults.delay_ms_max);
            self.wire.push(InFlight {
                deliver_at: self.now_ms + delay,
                from: id,
                message,
            });
        }
        self.replies.extend(out.replies);
        if let Some(image) = out.image {
            let index = image.applied_index.0;
            let digest = image.digest();
            let (first, by) = *self.digests.entry(index).or_insert((digest, id));
            assert_eq!(
                first, digest,
                "seed {seed}: node {id} and node {by} disagree on the image at index {index}"
            );
        }
    }

    fn run_until(&mut self, ms: u64, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            if done(self) {
                return true;
            }
            self.step();
        }
        done(self)
    }

    /// A leader, and brokers 1..=3 registered and unfenced.
    fn ready(&mut self) -> NodeId {
        self.elect();
        live_brokers(self);
        self.leader().unwrap()
    }

    fn elect(&mut self) -> NodeId {
        let seed = self.seed;
        assert!(
            self.run_until(20_000, |s| s.leader().is_some()),
            "seed {seed}: no leader within 20 s"
        );
        self.leader().unwrap()
    }

    /// Submit to the leader until answered; `None` if no answer in `ms`.
    fn request(&mut self, request: ControllerRequest, ms: u64) -> Option<ControllerResponse> {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            let Some(leader) = self.leader() else {
                self.step();
                continue;
            };
            let ticket = self.submit(leader, request.clone());
            let answered = self.run_until(2000, |s| s.replies.contains_key(&ticket));
            match self.replies.remove(&ticket) {
                Some(ControllerResponse::NotController { .. }) | None if !answered => {}
                Some(ControllerResponse::NotController { .. }) => {}
                Some(response) => return Some(response),
                None => {}
            }
            self.step();
        }
        None
    }

    fn heal(&mut self) {
        self.cut.clear();
        self.faults = Faults::default();
        for id in self.voters.clone() {
            if self.nodes[&id].is_none() {
                self.start(id);
            }
        }
    }

    fn describe(&self) -> String {
        self.nodes
            .iter()
            .map(|(id, n)| match n {
                None => format!("{id}: down"),
                Some(n) => format!(
                    "{id}: term {} leader {} applied {} digest {:x} ({})",
                    n.term(),
                    n.is_leader(),
                    n.image().applied_index,
                    n.image().digest(),
                    n.debug_state()
                ),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Every node has applied up to the same index and holds the same image.
    fn converged(&self) -> bool {
        let images: Vec<(LogIndex, u32)> = self
            .nodes
            .values()
            .map(|n| {
                n.as_ref().map_or((LogIndex(0), 0), |n| {
                    (n.image().applied_index, n.image().digest())
                })
            })
            .collect();
        self.nodes.values().all(|n| n.is_some()) && images.windows(2).all(|w| w[0] == w[1])
    }
}

fn create(name: &str) -> ControllerRequest {
    ControllerRequest::CreateTopics {
        topics: vec![NewTopic {
            name: name.to_string(),
            partitions: 1,
            replication_factor: Some(1),
            configs: BTreeMap::new(),
            internal: false,
        }],
        validate_only: false,
    }
}

fn register(node: i32) -> ControllerRequest {
    ControllerRequest::RegisterBroker(crate::record::BrokerIdentity {
        node_id: NodeId(node),
        incarnation_id: uuid::Uuid::from_u128(node as u128),
        log_dir_id: uuid::Uuid::from_u128(node as u128),
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port: 9000 + node as u16,
        },
        rack: None,
        replica_secret_sha256: None,
        listeners: Default::default(),
    })
}

fn created(response: &ControllerResponse) -> bool {
    matches!(response, ControllerResponse::Topics { results, .. } if results[0].error_code == rill_types::ErrorCode::None)
}

/// Register brokers 1..=3 and keep them heartbeating until they are unfenced.
fn live_brokers(sim: &mut Sim) {
    for node in 1..=3 {
        let r = sim.request(register(node), 10_000);
        assert!(
            matches!(r, Some(ControllerResponse::Registered { .. })),
            "{r:?}"
        );
    }
    for node in 1..=3 {
        heartbeat(sim, node);
    }
}

fn heartbeat(sim: &mut Sim, node: i32) -> Option<ControllerResponse> {
    let leader = sim.leader()?;
    let image = sim.node(leader).image().clone();
    let request = ControllerRequest::BrokerHeartbeat {
        node_id: NodeId(node),
        broker_epoch: image.brokers.get(&NodeId(node))?.epoch,
        applied_index: image.applied_index,
        want_shut_down: false,
    };
    sim.request(request, 5_000)
}

fn seeds(default: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("RILL_SIM_SEED") {
        return vec![seed.parse().expect("RILL_SIM_SEED is a number")];
    }
    let count = std::env::var("RILL_SIM_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default);
    (0..count).collect()
}

#[test]
fn three_voters_elect_one_leader_and_agree_on_a_topic() {
    for seed in seeds(10) {
        let mut sim = Sim::new(seed, 3, 1000);
        let leader = sim.ready();
        let r = sim.request(create("t"), 5_000).expect("answered");
        assert!(created(&r), "seed {seed}: {r:?}");
        assert!(
            sim.run_until(5_000, Sim::converged),
            "seed {seed}: no convergence"
        );
        for id in sim.alive() {
            assert!(sim.node(id).image().topics.contains_key("t"));
            assert!(sim.node(id).image().cluster_id.is_some());
        }
        // A follower tells the broker where the controller is.
        let follower = sim.alive().into_iter().find(|n| *n != leader).unwrap();
        let ticket = sim.submit(follower, create("u"));
        assert_eq!(
            sim.replies.remove(&ticket),
            Some(ControllerResponse::NotController {
                leader: Some(leader)
            })
        );
    }
}

#[test]
fn killing_the_active_controller_elects_another_and_the_old_one_rejoins() {
    for seed in seeds(10) {
        let mut sim = Sim::new(seed, 3, 1000);
        let first = sim.ready();
        assert!(created(&sim.request(create("before"), 5_000).unwrap()));
        let killed_at = sim.now_ms;
        sim.crash(first);
        let second = sim.elect();
        assert_ne!(first, second, "seed {seed}");
        assert!(
            sim.now_ms - killed_at < 10_000,
            "seed {seed}: failover took {} ms",
            sim.now_ms - killed_at
        );
        assert!(created(&sim.request(create("after"), 5_000).unwrap()));
        sim.start(first);
        assert!(
            sim.run_until(10_000, Sim::converged),
            "seed {seed}: old leader did not catch up"
        );
        let image = sim.node(first).image().clone();
        assert!(image.topics.contains_key("before") && image.topics.contains_key("after"));
    }
}

#[test]
fn a_silent_broker_is_fenced_in_the_quorum_and_unfenced_when_it_returns() {
    for seed in seeds(5) {
        let mut sim = Sim::with_session(seed, 3, 1000, 9000);
        sim.ready();
        let leader = sim.leader().unwrap();
        assert_eq!(sim.node(leader).image().live_brokers().count(), 3);
        // Brokers 1 and 3 keep heartbeating every 2 s; broker 2 is silent.
        let silent_from = sim.now_ms;
        let fenced = sim.run_until(15_000, |s| {
            let leader = s.leader().unwrap();
            s.nodes[&leader].as_ref().unwrap().image().brokers[&NodeId(2)].fenced
        });
        let _ = fenced; // heartbeats below keep 1 and 3 alive while we wait
        while sim.now_ms - silent_from < 12_000 {
            heartbeat(&mut sim, 1);
            heartbeat(&mut sim, 3);
            sim.run_until(1_500, |_| false);
        }
        let leader = sim.leader().unwrap();
        let image = sim.node(leader).image().clone();
        assert!(image.brokers[&NodeId(2)].fenced, "seed {seed}");
        assert!(!image.brokers[&NodeId(1)].fenced, "seed {seed}");
        assert_eq!(
            heartbeat(&mut sim, 2),
            Some(ControllerResponse::Heartbeat {
                fenced: false,
                should_shut_down: false
            })
        );
    }
}

#[test]
fn a_node_behind_the_compaction_point_catches_up_by_snapshot() {
    for seed in seeds(5) {
        let mut sim = Sim::new(seed, 3, 5);
        sim.ready();
        let leader = sim.leader().unwrap();
        let lagging = sim.alive().into_iter().find(|n| *n != leader).unwrap();
        sim.crash(lagging);
        for i in 0..30 {
            let r = sim.request(create(&format!("t{i}")), 5_000).unwrap();
            assert!(created(&r), "seed {seed}: {r:?}");
        }
        sim.start(lagging);
        assert!(
            sim.run_until(10_000, Sim::converged),
            "seed {seed}: no catch-up"
        );
        assert_eq!(sim.node(lagging).image().topics.len(), 30);
        // And it restarts from its own snapshot + log.
        sim.crash(lagging);
        sim.start(lagging);
        assert!(
            sim.run_until(10_000, Sim::converged),
            "seed {seed}: no recovery"
        );
    }
}

/// One random step of the fault loop: a crash, restarts, a partition, lossy links, power loss
/// everywhere, or a CreateTopics (recorded when acknowledged).
fn random_fault(sim: &mut Sim, round: u32, acknowledged: &mut Vec<String>) {
    match sim.rng.u32(..11) {
        0 => {
            let victim = sim.voters[sim.rng.usize(..3)];
            if sim.alive().len() == 3 {
                sim.crash(victim);
            }
        }
        1 => {
            for id in sim.voters.clone() {
                if sim.nodes[&id].is_none() {
                    sim.start(id);
                }
            }
        }
        2 => {
            let a = sim.voters[sim.rng.usize(..3)];
            let b = sim.voters[sim.rng.usize(..3)];
            sim.cut.insert((a, b));
            sim.cut.insert((b, a));
        }
        3 => sim.cut.clear(),
        4 => {
            sim.faults = Faults {
                drop_per_mille: sim.rng.u32(..200),
                delay_ms_max: sim.rng.u64(..300),
            }
        }
        5 => {
            // Power loss everywhere: only synced bytes count.
            for id in sim.alive() {
                sim.crash(id);
            }
            for id in sim.voters.clone() {
                sim.start(id);
            }
        }
        _ => {
            let name = format!("t{round}");
            if let Some(r) = sim.request(create(&name), 3_000) {
                if created(&r) {
                    acknowledged.push(name);
                }
            }
        }
    }
}

#[test]
fn random_faults_never_split_the_image_or_lose_an_acknowledged_topic() {
    for seed in seeds(12) {
        let mut sim = Sim::new(seed, 3, 7);
        sim.ready();
        let mut acknowledged = Vec::new();
        for round in 0..40 {
            random_fault(&mut sim, round, &mut acknowledged);
            let pause = sim.rng.u64(..2_000);
            sim.run_until(pause, |_| false);
        }
        sim.heal();
        sim.elect();
        // One more write commits everything before it in the new leader's term.
        let last = sim.request(create("final"), 10_000);
        assert!(
            last.as_ref().is_some_and(created),
            "seed {seed}: {last:?}: {}",
            sim.describe()
        );
        let converged = sim.run_until(20_000, Sim::converged);
        assert!(
            converged,
            "seed {seed}: no convergence after healing: {}",
            sim.describe()
        );
        for id in sim.alive() {
            let image = sim.node(id).image().clone();
            for name in &acknowledged {
                assert!(
                    image.topics.contains_key(name),
                    "seed {seed}: acknowledged topic {name} lost at node {id}"
                );
            }
        }
        assert!(
            !acknowledged.is_empty() || seed > 0,
            "seed {seed}: nothing acknowledged"
        );
    }
}
