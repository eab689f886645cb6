//! A cluster of brokers (issue 13): this node's part in the metadata quorum and the cluster view
//! its handlers answer from. The quorum itself (records, image, controller decisions, raft log)
//! is the runtime-free `rill-metadata` crate; this module is its edge: configuration, threads,
//! sockets, and the glue to the broker's shards.
//!
//! - KRaft properties and flags, validated at start, are with the broker's other settings in
//!   [`crate::config::cluster`].
//! - [`view`]: [`ClusterView`], the image and controller every shard reads; routing decisions.
//! - [`quorum_loop`]: a voter's metadata thread (raft-rs through `rill-metadata`).
//! - [`transport`]: the controller listener and raft links (std threads, blocking sockets).
//! - [`agent`]: the broker's registration, heartbeats and requests to the controller.
//! - [`admin`]: CreateTopics, DeleteTopics, CreatePartitions through the controller.
//! - [`mirror`]: the topic registry follows the image.
//! - [`deletions`]: each shard deletes the partitions of topics the log removed.
//! - [`single_node_data`]: a cluster node refuses a single node's data directory.
//! - [`peer`]: Kafka requests to another broker (transaction markers and verification).
//!
//! Threads per node: a voter runs the listener, one reader per controller connection, one raft
//! sender per other voter and the quorum loop; a broker runs the agent and its reader. None
//! touches a partition: the shards do, as on a single node.

pub mod admin;
pub mod agent;
pub mod controller_stream;
pub mod deletions;
pub mod events;
pub mod mirror;
pub mod peer;
pub mod peer_connect;
pub mod quorum_loop;
pub mod single_node_data;
pub mod transport;
pub mod view;

#[cfg(test)]
mod handler_tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rill_metadata::types::Endpoint;

pub use view::{catch_up_progress, ClusterView};

use crate::config::BrokerConfig;
use crate::topics::TopicRegistry;

/// The running cluster side of this node.
pub struct ClusterRuntime {
    /// What the shards read.
    pub view: Arc<ClusterView>,
    agent: JoinHandle<()>,
    agent_stop: Arc<AtomicBool>,
    voter: Vec<JoinHandle<()>>,
    voter_stop: Arc<AtomicBool>,
}

/// Start this node's cluster threads: a voter recovers its metadata log (and publishes what it
/// holds before returning, so the shards start with the cluster as this node last knew it), binds
/// the controller listener and joins the quorum; a broker starts its agent. `stop` ends them.
pub fn start(
    config: &BrokerConfig,
    registry: &Arc<TopicRegistry>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Option<ClusterRuntime>> {
    let Some(cluster) = config.cluster.clone() else {
        return Ok(None);
    };
    single_node_data::refuse_single_node_data(&config.data_dir, registry)?;
    let view = ClusterView::new(
        cluster.clone(),
        registry.list().into_iter().collect(),
        config.listeners.peer_client.clone(),
        config.listeners.controller_tls.clone(),
    );
    registry.use_producer_id_blocks();
    let mut voter_threads = Vec::new();
    // The cluster threads stop after the shards: the agent first (its controlled shutdown may
    // need this node's own quorum loop), then the voter.
    let (agent_stop, voter_stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    if let Some(listen) = cluster.controller_listen {
        let voter = quorum_loop::open(&cluster, &config.data_dir, registry, &view)?;
        let listener = transport::bind(listen, cluster.node_id)?;
        tracing::info!(%listen, node = cluster.node_id.0, "controller listening");
        voter_threads = quorum_loop::spawn(
            voter,
            listener,
            &cluster,
            registry.clone(),
            view.clone(),
            voter_stop.clone(),
        )?;
    }
    let advertised = |l: &crate::security::listeners::Listener| Endpoint {
        host: l.advertise_host.clone(),
        port: l.advertise_port,
    };
    let endpoint = advertised(config.listeners.inter_broker());
    let listeners = config
        .listeners
        .all
        .iter()
        .map(|l| (l.name.clone(), advertised(l)))
        .collect();
    let log_dir_id = agent::log_dir_id(&config.data_dir, cluster.node_id)?;
    let (agent, events) = agent::Agent::new(
        view.clone(),
        registry.clone(),
        (endpoint, listeners),
        log_dir_id,
    );
    view.set_agent(events);
    let stop_agent = agent_stop.clone();
    let agent = std::thread::Builder::new()
        .name("rill-agent".into())
        .spawn(move || agent.run(&stop_agent))?;
    // A fatal condition (duplicate node.id, failed metadata log) stops the whole node.
    let (watched, node_stop) = (view.clone(), stop.clone());
    std::thread::Builder::new()
        .name("rill-cluster-watch".into())
        .spawn(move || {
            while !node_stop.load(Ordering::Relaxed) {
                if watched.fatal().is_some() {
                    node_stop.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        })?;
    Ok(Some(ClusterRuntime {
        view,
        agent,
        agent_stop,
        voter: voter_threads,
        voter_stop,
    }))
}

/// How often a broker that is still catching up says so, and why.
pub const CATCH_UP_LOG_EVERY: Duration = Duration::from_secs(10);

/// How a broker's wait to catch up with the metadata quorum ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// It may serve: it caught up, or it is new to the cluster (nothing stale to tell), or
    /// `rill.metadata.catch.up.max.ms` ran out (an operator's choice to serve what it knows).
    Serve,
    /// The node is stopping (SIGTERM, or a fatal condition) before it caught up: it must
    /// not serve at all.
    Stopped,
}

/// Before a broker serves (called once its admin listener is up, before the shards start): a
/// broker waits until it caught up with the metadata quorum, see [`wait_caught_up`].
pub fn catch_up_before_serving(view: &ClusterView, stop: &AtomicBool) -> CatchUp {
    if view.config().roles.broker {
        let bound = view.config().catch_up_max;
        return wait_caught_up(view, stop, CATCH_UP_LOG_EVERY, bound);
    }
    CatchUp::Serve
}

/// A restarted node's image is the cluster as it last knew it: leaders may have moved since. As
/// Kafka's broker does (`BrokerServer.startup` waits for the controller to say it caught up
/// before it enables its client listeners, with no deadline by default), it serves, and its
/// shards take partition roles, only once it applied the metadata log up to this start's
/// registration, so no client is sent to a stale leader and no partition takes a stale role.
/// By default the wait has no bound: with the quorum out of reach the broker stays unready (its
/// admin listener says why) and logs why every `log_every`, and it returns at once when the
/// node stops. `bound` (`rill.metadata.catch.up.max.ms`, unset by default) is an operator's
/// opt-in to serve the image it last knew after that long, with a warning: its Metadata may
/// then name stale leaders, and acks=1 writes it takes as a stale leader may later be cut.
/// A node new to the cluster waits too: until its registration is applied it knows no broker,
/// not even itself, and a Metadata listing none sent librdkafka's AdminClient waiting 60 s for
/// a controller (issue 32).
fn wait_caught_up(
    view: &ClusterView,
    stop: &AtomicBool,
    log_every: Duration,
    bound: Option<Duration>,
) -> CatchUp {
    let started = Instant::now();
    let mut next_log = started + log_every;
    tracing::info!(
        applied = view.applied_index().0,
        "catching up with the metadata quorum before serving"
    );
    while !ready_to_serve(view) {
        if stop.load(Ordering::Relaxed) || view.fatal().is_some() {
            tracing::info!(
                applied = view.applied_index().0,
                "stopping before it caught up with the metadata quorum: never served"
            );
            return CatchUp::Stopped;
        }
        if bound.is_some_and(|bound| started.elapsed() >= bound) {
            tracing::warn!(
                "not caught up with the metadata quorum within rill.metadata.catch.up.max.ms \
                 ({bound:?}): serving the metadata applied so far (leaders named may be stale): {}",
                catch_up_progress(view)
            );
            return CatchUp::Serve;
        }
        if Instant::now() >= next_log {
            next_log += log_every;
            tracing::warn!(
                waited_s = started.elapsed().as_secs(),
                "still catching up with the metadata quorum, not serving: {}",
                catch_up_progress(view)
            );
        }
        std::thread::sleep(CATCH_UP_POLL);
    }
    tracing::info!(
        applied = view.applied_index().0,
        waited_ms = started.elapsed().as_millis() as u64,
        "caught up with the metadata quorum"
    );
    CatchUp::Serve
}

/// How often [`wait_caught_up`] looks.
const CATCH_UP_POLL: Duration = Duration::from_millis(10);

/// Caught up, and unfenced in the image it serves from: Kafka's broker enables its client
/// listeners only after its first unfencing (BrokerLifecycleManager's initialUnfenceFuture).
/// Serving in between, its Metadata listed no broker (or not itself) while naming itself as
/// the controller, and librdkafka's AdminClient, asked then, waited 'for controller' until
/// its request timed out (once in 11 runs of test_cluster.py's AdminClient scenarios).
fn ready_to_serve(view: &ClusterView) -> bool {
    view.caught_up() && view.image().live_broker(view.node_id()).is_some()
}

impl ClusterRuntime {
    /// Stop the cluster threads (the agent fences this broker first, bounded) and report a
    /// fatal condition, if one stopped the node.
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.agent_stop.store(true, Ordering::SeqCst);
        let _ = self.agent.join();
        self.voter_stop.store(true, Ordering::SeqCst);
        for thread in self.voter {
            let _ = thread.join();
        }
        match self.view.fatal() {
            Some(why) => Err(anyhow::anyhow!(why)),
            None => Ok(()),
        }
    }
}
