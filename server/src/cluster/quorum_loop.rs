//! A voter's metadata thread: drives the runtime-free [`QuorumNode`] with a real clock, the
//! controller listener's events and the raft links, and publishes every newly applied image.
//!
//! ```text
//! listener threads ─Raft/Request─▶ ┌──────────── quorum loop ────────────┐ ─▶ Peers (raft out)
//! raft senders ─Unreachable──────▶ │ tick every tick_ms, step, submit,    │ ─▶ Replier (answers)
//!                                  │ poll: persist, apply                 │ ─▶ registry mirror,
//!                                  └──────────────────────────────────────┘    then ClusterView
//! ```
//!
//! The registry mirror is written before the view publishes the image, so a handler that sees
//! index `i` applied also finds its topics in the registry (which the partition table reads).
//! A failure of the metadata log is fatal: the node records it and stops (a voter that cannot
//! persist must not vote).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rill_metadata::controller::ControllerConfig;
use rill_metadata::files::FsFiles;
use rill_metadata::quorum::{Output, QuorumConfig, QuorumNode};
use rill_metadata::types::NodeId;

use super::events::QuorumEvent;
use crate::internal_topics::METADATA_DIR;

use super::mirror::mirror;
use super::transport::{Peers, Replier};
use super::view::ClusterView;
use crate::config::cluster::ClusterConfig;
use crate::topics::TopicRegistry;

/// Ticks per election timeout (raft-rs randomizes between one and two timeouts).
const ELECTION_TICKS: usize = 10;
/// Ticks between a leader's heartbeats.
const HEARTBEAT_TICKS: usize = 2;
/// Take a snapshot and compact the log after this many applied entries.
const SNAPSHOT_EVERY_ENTRIES: u64 = 1024;
/// Events handled per poll (a burst is persisted and answered together).
const EVENTS_PER_POLL: usize = 256;
/// A loop step slower than this is logged (a stalled fsync, a blocked peer): at two election
/// timeouts the other voters elect someone else, and the log should say why.
const SLOW_STEP: Duration = Duration::from_millis(500);

/// An opened voter, ready to run.
pub struct QuorumVoter {
    node: QuorumNode<FsFiles, Replier>,
    tick: Duration,
}

/// Open (recover) this node's metadata log, apply what it holds as committed, and publish it:
/// the shards start with the cluster as this node last knew it.
pub fn open(
    config: &ClusterConfig,
    data_dir: &Path,
    registry: &TopicRegistry,
    view: &ClusterView,
) -> anyhow::Result<QuorumVoter> {
    let dir = data_dir.join(METADATA_DIR);
    let files =
        FsFiles::open(&dir).map_err(|e| anyhow::anyhow!("metadata log {}: {e}", dir.display()))?;
    let quorum = QuorumConfig {
        node_id: config.node_id,
        voters: config.voters.iter().map(|v| v.id).collect(),
        election_ticks: ELECTION_TICKS,
        heartbeat_ticks: HEARTBEAT_TICKS,
        fixed_election_ticks: None,
        snapshot_every_entries: SNAPSHOT_EVERY_ENTRIES,
        controller: ControllerConfig {
            session_timeout_ms: config.session_timeout_ms,
            default_replication_factor: config.default_replication_factor,
            unclean_leader_election: config.leadership.unclean_election,
            auto_leader_rebalance: config.leadership.auto_rebalance,
            leader_imbalance_check_interval_ms: config.leadership.imbalance_check_interval_ms,
            leader_imbalance_per_broker_percentage: config
                .leadership
                .imbalance_per_broker_percentage,
        },
        seed: uuid::Uuid::new_v4().as_u64_pair().0,
    };
    let (mut node, recovery) = QuorumNode::open(quorum, files)
        .map_err(|e| anyhow::anyhow!("metadata log {}: {e}", dir.display()))?;
    tracing::info!(
        snapshot_index = recovery.snapshot_index,
        entries = recovery.entries,
        torn_bytes = recovery.torn_bytes,
        "metadata log recovered"
    );
    // The first poll applies the entries the log holds as committed.
    let out = node
        .poll()
        .map_err(|e| anyhow::anyhow!("metadata log: {e}"))?;
    let image = out.image.unwrap_or_else(|| node.image().clone());
    mirror(registry, &image).map_err(|e| anyhow::anyhow!("mirroring topics: {e}"))?;
    view.publish(image);
    let tick = Duration::from_millis((config.election_timeout_ms / ELECTION_TICKS as u64).max(10));
    Ok(QuorumVoter { node, tick })
}

impl QuorumVoter {
    /// Run until `stop`; a metadata-log failure is recorded in `view` and stops the process.
    pub fn run(
        mut self,
        events: &Receiver<QuorumEvent>,
        peers: &Peers,
        registry: &TopicRegistry,
        view: &ClusterView,
        stop: &Arc<AtomicBool>,
    ) {
        let start = Instant::now();
        let mut next_tick = start + self.tick;
        while !stop.load(Ordering::Relaxed) {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let now_ms = |at: Instant| at.duration_since(start).as_millis() as u64;
            match events.recv_timeout(wait) {
                Ok(event) => {
                    self.handle(event, now_ms(Instant::now()));
                    for event in events.try_iter().take(EVENTS_PER_POLL) {
                        self.handle(event, now_ms(Instant::now()));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            if now >= next_tick {
                self.node.tick(now_ms(now));
                next_tick += self.tick;
                // After a stall (a stopped process, a slow disk) tick once, not once per
                // missed tick: a burst would run election timers out in an instant.
                if next_tick <= now {
                    next_tick = now + self.tick;
                }
            }
            let polled = Instant::now();
            let out = self.node.poll();
            let persisted = polled.elapsed();
            match out {
                Ok(out) => deliver(out, peers, registry, view),
                Err(e) => {
                    view.fail(format!("metadata log failed, stopping this node: {e}"));
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
            }
            view.set_controller(self.node.leader());
            if polled.elapsed() > SLOW_STEP {
                tracing::warn!(
                    persist_ms = persisted.as_millis() as u64,
                    deliver_ms = (polled.elapsed() - persisted).as_millis() as u64,
                    "slow metadata step (persisting the raft log, or mirroring topics)"
                );
            }
        }
    }

    fn handle(&mut self, event: QuorumEvent, now_ms: u64) {
        match event {
            QuorumEvent::Raft(message) => self.node.step(message),
            QuorumEvent::Request { request, reply } => {
                if let Some((reply, response)) = self.node.submit(reply, &request, now_ms) {
                    reply.send(response);
                }
            }
            QuorumEvent::Unreachable(node) => self.node.report_unreachable(node),
        }
    }
}

fn deliver(out: Output<Replier>, peers: &Peers, registry: &TopicRegistry, view: &ClusterView) {
    for message in out.messages {
        peers.send(message);
    }
    if let Some(image) = out.image {
        if let Err(e) = mirror(registry, &image) {
            // The view still moves on: routing is right; the registry catches up on the next
            // change (or restart), and partitions open from it.
            tracing::error!(error = %e, "cannot mirror the metadata into the topic registry");
        }
        view.publish(image);
    }
    for (reply, response) in out.replies {
        reply.send(response);
    }
}

/// Start the voter's threads: the listener and the quorum loop (which owns the node).
pub fn spawn(
    voter: QuorumVoter,
    listener: std::net::TcpListener,
    config: &ClusterConfig,
    registry: Arc<TopicRegistry>,
    view: Arc<ClusterView>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Vec<std::thread::JoinHandle<()>>> {
    let (tx, rx): (Sender<QuorumEvent>, Receiver<QuorumEvent>) = std::sync::mpsc::channel();
    let voters: Vec<(NodeId, String)> = config
        .voters
        .iter()
        .map(|v| (v.id, v.address.clone()))
        .collect();
    let tls = view.controller_tls().cloned();
    let peers = Peers::start(
        config.node_id,
        &voters,
        tls.as_ref().map(|t| &t.client),
        &tx,
    );
    let listener_stop = stop.clone();
    let server_tls = tls.map(|t| t.server.clone());
    let serve = std::thread::Builder::new()
        .name("rill-ctl-listen".into())
        .spawn(move || super::transport::serve(listener, server_tls, tx, listener_stop))?;
    let quorum = std::thread::Builder::new()
        .name("rill-quorum".into())
        .spawn(move || voter.run(&rx, &peers, &registry, &view, &stop))?;
    Ok(vec![serve, quorum])
}
