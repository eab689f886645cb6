//! What every shard of this node knows about the cluster: the metadata image as far as this node
//! applied it, the active controller, and a way to ask the controller (through the agent).
//!
//! One process-wide value, like the topic registry: the metadata thread (a voter's quorum loop,
//! or an observer's agent) publishes each new image; handlers read it by cloning an `Arc` and
//! never hold the lock across an `.await`.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::time::Duration;

use crate::channel::polled::oneshot;
use rill_metadata::image::{MetadataImage, PartitionState};
use rill_metadata::request::{ControllerRequest, ControllerResponse, NewTopic};
use rill_metadata::types::{BrokerEpoch, LogIndex, NodeId};
use rill_types::{ErrorCode, LeaderEpoch, TopicPartitionRef};

use super::events::{AgentEvent, Reply};
use crate::config::cluster::ClusterConfig;
use crate::topics::TopicMeta;

/// How long a handler waits for its own change to reach this node's image (read-your-writes
/// after CreateTopics and friends) before answering anyway.
pub const APPLY_WAIT_MAX: Duration = Duration::from_secs(5);
/// How often that wait looks.
const APPLY_POLL: Duration = Duration::from_millis(5);

/// How often a controller request looks for its answer.
const ANSWER_POLL: Duration = Duration::from_millis(1);

/// The cluster as this node sees it (see the module doc).
pub struct ClusterView {
    config: ClusterConfig,
    image: RwLock<Arc<MetadataImage>>,
    /// The active controller's id, or -1 when unknown.
    controller: AtomicI64,
    agent: Mutex<Option<mpsc::Sender<AgentEvent>>>,
    /// Topics whose auto-creation was asked for and not yet answered (one request each).
    auto_creating: Arc<Mutex<HashSet<String>>>,
    /// Why this node must stop (a duplicate `node.id`, a broken metadata log).
    fatal: Mutex<Option<String>>,
    /// The registry's topics before this start's first mirror (see [`super::deletions`]).
    topics_at_start: BTreeMap<String, Arc<TopicMeta>>,
    /// The broker epoch of this process's registration (the log index of its record), or -1
    /// before the controller accepted it.
    registered: AtomicI64,
    /// What this broker's follower fetches present to leaders (random per process start; its
    /// registration carries only its digest: `BrokerIdentity::replica_secret_sha256`).
    replica_secret: uuid::Uuid,
    /// How this broker reaches the other brokers' inter-broker listener.
    peer_client: Arc<crate::security::peer_client::PeerClient>,
    /// The controller listener's TLS, when it is mapped to SSL.
    controller_tls: Option<Arc<crate::security::controller_tls::ControllerTls>>,
}

impl ClusterView {
    /// A view with an empty image; `topics_at_start` is the registry before the first mirror;
    /// `peer_client` is how this broker connects to the others, `controller_tls` how every node
    /// reaches the quorum.
    pub fn new(
        config: ClusterConfig,
        topics_at_start: BTreeMap<String, Arc<TopicMeta>>,
        peer_client: Arc<crate::security::peer_client::PeerClient>,
        controller_tls: Option<Arc<crate::security::controller_tls::ControllerTls>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            config,
            topics_at_start,
            image: RwLock::new(Arc::new(MetadataImage::default())),
            controller: AtomicI64::new(-1),
            agent: Mutex::new(None),
            auto_creating: Arc::new(Mutex::new(HashSet::new())),
            fatal: Mutex::new(None),
            registered: AtomicI64::new(-1),
            replica_secret: uuid::Uuid::new_v4(),
            peer_client,
            controller_tls,
        })
    }

    /// The controller listener's TLS (`None`: plaintext).
    pub fn controller_tls(&self) -> Option<&Arc<crate::security::controller_tls::ControllerTls>> {
        self.controller_tls.as_ref()
    }

    /// How this broker connects to the other brokers (the inter-broker listener's protocol).
    pub fn peer_client(&self) -> &crate::security::peer_client::PeerClient {
        &self.peer_client
    }

    /// What this broker's follower fetches present (see [`Self::is_replica`]).
    pub fn replica_secret(&self) -> uuid::Uuid {
        self.replica_secret
    }

    /// The digest this broker registers its secret by (SHA-256, lowercase hex).
    pub fn replica_secret_sha256(&self) -> String {
        sha256_hex(self.replica_secret.as_bytes())
    }

    /// Whether `presented` is the secret `node` registered the digest of: a Fetch naming
    /// `node` as its replica comes from that broker, not from a client posing as it. The
    /// digests are compared in constant time (`subtle`).
    pub fn is_replica(&self, node: NodeId, presented: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        let image = self.image();
        let registered = image.brokers.get(&node);
        let Some(digest) = registered.and_then(|b| b.replica_secret_sha256.as_deref()) else {
            return false;
        };
        bool::from(sha256_hex(presented).as_bytes().ct_eq(digest.as_bytes()))
    }

    /// The registry's topics before this start's first mirror.
    pub fn topics_at_start(&self) -> &BTreeMap<String, Arc<TopicMeta>> {
        &self.topics_at_start
    }

    /// The cluster configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// This node.
    pub fn node_id(&self) -> NodeId {
        self.config.node_id
    }

    /// The applied image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Install a newer image (an older one is ignored: the image never goes back).
    pub fn publish(&self, image: Arc<MetadataImage>) {
        let mut current = self.image.write().unwrap_or_else(|e| e.into_inner());
        if image.applied_index > current.applied_index {
            *current = image;
        }
    }

    /// How far this node applied the metadata log.
    pub fn applied_index(&self) -> LogIndex {
        self.image().applied_index
    }

    /// The controller accepted this process's registration at `epoch` (its record's index).
    pub fn set_registered(&self, epoch: BrokerEpoch) {
        self.registered.store(epoch.0, Ordering::SeqCst);
    }

    /// The broker epoch of this process's registration, once the controller accepted it.
    pub fn registered(&self) -> Option<BrokerEpoch> {
        let epoch = self.registered.load(Ordering::SeqCst);
        (epoch >= 0).then_some(BrokerEpoch(epoch))
    }

    /// Whether this node applied the metadata log up to this process's registration: it then
    /// knows the cluster at least as of its start (Kafka's broker "caught up").
    pub fn caught_up(&self) -> bool {
        self.registered().is_some_and(|epoch| {
            i64::try_from(self.applied_index().0).unwrap_or(i64::MAX) >= epoch.0
        })
    }

    /// Remember the active controller.
    pub fn set_controller(&self, controller: Option<NodeId>) {
        let id = controller.map_or(-1, |c| i64::from(c.0));
        self.controller.store(id, Ordering::Relaxed);
    }

    /// The active controller, if known.
    pub fn controller(&self) -> Option<NodeId> {
        let id = self.controller.load(Ordering::Relaxed);
        (id >= 0).then_some(NodeId(id as i32))
    }

    /// Connect the agent that forwards requests to the controller.
    pub fn set_agent(&self, agent: mpsc::Sender<AgentEvent>) {
        *self.agent.lock().unwrap_or_else(|e| e.into_inner()) = Some(agent);
    }

    /// Record a condition this node cannot run with; the runtime stops and reports it.
    pub fn fail(&self, why: String) {
        tracing::error!("{why}");
        self.fatal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why);
    }

    /// The fatal condition, if one was recorded.
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether this broker may serve partition `tp`: `Ok` if it is the live leader;
    /// NOT_LEADER_OR_FOLLOWER if another broker leads it, LEADER_NOT_AVAILABLE if none does.
    /// (Which shard of this broker serves it is `crate::shard::owner`.)
    pub fn check_leader(&self, tp: TopicPartitionRef<'_>) -> Result<(), ErrorCode> {
        match self.leader(tp)? {
            leader if leader == self.node_id() => Ok(()),
            _ => Err(ErrorCode::NotLeaderOrFollower),
        }
    }

    /// The live leader of partition `tp`: UNKNOWN_TOPIC_OR_PARTITION if there is no such
    /// partition, LEADER_NOT_AVAILABLE if no live broker leads it.
    pub fn leader(&self, tp: TopicPartitionRef<'_>) -> Result<NodeId, ErrorCode> {
        let image = self.image();
        let state = partition_state(&image, tp).ok_or(ErrorCode::UnknownTopicOrPartition)?;
        image
            .live_leader(state)
            .ok_or(ErrorCode::LeaderNotAvailable)
    }

    /// The broker coordinating `group_id`: the leader of its `__consumer_offsets` partition.
    /// COORDINATOR_NOT_AVAILABLE until that topic exists and the partition has a live leader
    /// (the first FindCoordinator asks the controller to create it, see
    /// [`Self::ensure_offsets_topic`]).
    pub fn group_coordinator(&self, group_id: &str) -> Result<NodeId, ErrorCode> {
        let partition = crate::internal_topics::offsets_partition(group_id);
        self.internal_leader(TopicPartitionRef::new(
            crate::internal_topics::OFFSETS_TOPIC,
            partition,
        ))
    }

    /// The broker coordinating `transactional_id`: the leader of its `__transaction_state`
    /// partition, as in Kafka, so every broker names the same one and the id's state (which
    /// lives on that broker's disk) stays there until leadership moves. Unavailable until the
    /// topic exists ([`Self::ensure_txn_topic`]) and the partition has a live leader.
    pub fn txn_coordinator(&self, transactional_id: &str) -> Result<NodeId, ErrorCode> {
        let partition = crate::internal_topics::txn_partition(transactional_id);
        self.internal_leader(TopicPartitionRef::new(
            crate::internal_topics::TXN_TOPIC,
            partition,
        ))
    }

    /// The live leader of an internal topic's partition, or COORDINATOR_NOT_AVAILABLE.
    fn internal_leader(&self, tp: TopicPartitionRef<'_>) -> Result<NodeId, ErrorCode> {
        let image = self.image();
        let state = partition_state(&image, tp).ok_or(ErrorCode::CoordinatorNotAvailable)?;
        image
            .live_leader(state)
            .ok_or(ErrorCode::CoordinatorNotAvailable)
    }

    /// Ask the controller for `__consumer_offsets` if it does not exist yet (Kafka creates it
    /// on the first FindCoordinator): [`crate::internal_topics::OFFSETS_PARTITIONS`] partitions,
    /// `offsets.topic.replication.factor` replicas (refused until that many brokers are live,
    /// as in Kafka; asked again on the next FindCoordinator).
    pub fn ensure_offsets_topic(&self) {
        let (partitions, factor) = (
            crate::internal_topics::OFFSETS_PARTITIONS as u32,
            self.config.offsets_replication_factor,
        );
        let configs = crate::internal_topics::offsets_topic_configs();
        self.ensure_internal_topic(
            crate::internal_topics::OFFSETS_TOPIC,
            partitions,
            factor,
            configs,
        );
    }

    /// Ask the controller for `__transaction_state` if it does not exist yet (on the first
    /// FindCoordinator for a transactional id): [`crate::internal_topics::TXN_PARTITIONS`] partitions,
    /// `transaction.state.log.replication.factor` replicas (refused until that many brokers
    /// are live). The coordinators' state is written to it and replicated like any partition
    /// (`crate::internal_topics::replicated`).
    pub fn ensure_txn_topic(&self) {
        let (partitions, factor) = (
            crate::internal_topics::TXN_PARTITIONS as u32,
            self.config.txn_replication_factor,
        );
        // transaction.state.log.min.isr, at most the factor (or no write could succeed).
        let min_isr = self.config.txn_min_isr.min(factor);
        let configs = crate::internal_topics::txn_topic_configs(min_isr);
        self.ensure_internal_topic(
            crate::internal_topics::TXN_TOPIC,
            partitions,
            factor,
            configs,
        );
    }

    fn ensure_internal_topic(
        &self,
        name: &str,
        partitions: u32,
        replication_factor: u16,
        configs: BTreeMap<String, String>,
    ) {
        if self.image().topics.contains_key(name) {
            return;
        }
        self.create_once(NewTopic {
            name: name.to_string(),
            partitions,
            replication_factor: Some(replication_factor),
            configs,
            internal: true,
        });
    }

    /// An internal topic (`__consumer_offsets`, `__transaction_state`) as the partition table
    /// and a follower's Fetch see it: they are kept out of the topic registry (hidden from
    /// clients) but replicated like any topic.
    pub fn internal_topic(&self, name: &str) -> Option<Arc<TopicMeta>> {
        let image = self.image();
        let topic = image.topics.get(name).filter(|t| t.internal)?;
        Some(Arc::new(TopicMeta {
            id: topic.id,
            partitions: i32::try_from(topic.partitions.len()).ok()?,
            configs: topic.configs.clone(),
        }))
    }

    /// Every internal topic that exists, each as [`Self::internal_topic`] gives it.
    pub fn internal_topics(&self) -> Vec<(String, Arc<TopicMeta>)> {
        let image = self.image();
        let names = image.topics.values().filter(|t| t.internal);
        let names: Vec<String> = names.map(|t| t.name.clone()).collect();
        names
            .into_iter()
            .filter_map(|name| self.internal_topic(&name).map(|meta| (name, meta)))
            .collect()
    }

    /// Ask the controller for the internal topic `name` (`__consumer_offsets` or
    /// `__transaction_state`) with its own settings, as a Metadata request for it does in
    /// Kafka. Returns whether `name` is one of them.
    pub fn ensure_internal_topic_named(&self, name: &str) -> bool {
        match name {
            crate::internal_topics::OFFSETS_TOPIC => self.ensure_offsets_topic(),
            crate::internal_topics::TXN_TOPIC => self.ensure_txn_topic(),
            _ => return false,
        }
        true
    }

    /// Where other brokers reach `node` (its inter-broker listener), if it is a live broker.
    pub fn endpoint(&self, node: NodeId) -> Option<rill_metadata::types::Endpoint> {
        self.image().live_broker(node).map(|b| b.endpoint.clone())
    }

    /// Where clients of the listener `name` reach `node`, if it is a live broker with one.
    pub fn endpoint_on(&self, node: NodeId, name: &str) -> Option<rill_metadata::types::Endpoint> {
        let image = self.image();
        image.live_broker(node)?.endpoint_on(name).cloned()
    }

    /// The leader epoch this broker leads partition `tp` at, if it leads it now.
    pub fn leading_epoch(&self, tp: TopicPartitionRef<'_>) -> Option<LeaderEpoch> {
        let image = self.image();
        let state = partition_state(&image, tp)?;
        (image.live_leader(state) == Some(self.node_id())).then_some(state.leader_epoch)
    }

    /// Whether this broker leads partition `tp` now.
    pub fn leads(&self, tp: TopicPartitionRef<'_>) -> bool {
        self.check_leader(tp).is_ok()
    }

    /// The partition's leader epoch, if the partition exists.
    pub fn leader_epoch(&self, tp: TopicPartitionRef<'_>) -> Option<LeaderEpoch> {
        partition_state(&self.image(), tp).map(|p: &PartitionState| p.leader_epoch)
    }

    /// Ask the active controller; the agent retries elsewhere on NOT_CONTROLLER and answers
    /// REQUEST_TIMED_OUT when no controller answers in time. The answer is looked for every
    /// [`ANSWER_POLL`] (`sleep`): the agent's thread never wakes a shard's task, which glommio
    /// 0.9 can turn into a double free (see `crate::shard::router`).
    pub async fn request<F: std::future::Future<Output = ()>>(
        &self,
        request: ControllerRequest,
        sleep: impl Fn(Duration) -> F,
    ) -> ControllerResponse {
        let (reply, mut answer) = oneshot::channel();
        if !self.send(request, Reply::Future(reply)) {
            return ControllerResponse::error(ErrorCode::NotController, "no controller client");
        }
        loop {
            // `try_recv` registers no waker, so the agent's `send` wakes nothing.
            match answer.try_recv() {
                Ok(Some(response)) => return response,
                Ok(None) => sleep(ANSWER_POLL).await,
                Err(oneshot::Canceled) => {
                    return ControllerResponse::error(
                        ErrorCode::RequestTimedOut,
                        "the controller client stopped",
                    )
                }
            }
        }
    }

    /// Ask for a topic's creation once (auto-creation, `__consumer_offsets`): later calls for
    /// the same topic send nothing until the first one is answered. Returns whether it asked.
    pub fn create_once(&self, topic: NewTopic) -> bool {
        let name = topic.name.clone();
        let creating = self.auto_creating.clone();
        if !creating
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone())
        {
            return false;
        }
        let forget = {
            let (creating, name) = (creating.clone(), name.clone());
            move |response: ControllerResponse| {
                tracing::info!(topic = %name, ?response, "automatic topic creation answered");
                creating
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&name);
            }
        };
        let request = ControllerRequest::CreateTopics {
            topics: vec![topic],
            validate_only: false,
        };
        let sent = self.send(request, Reply::Callback(Box::new(forget)));
        if !sent {
            creating
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&name);
        }
        sent
    }

    fn send(&self, request: ControllerRequest, reply: Reply) -> bool {
        let agent = self.agent.lock().unwrap_or_else(|e| e.into_inner());
        agent
            .as_ref()
            .is_some_and(|agent| agent.send(AgentEvent::Submit { request, reply }).is_ok())
    }

    /// Wait (bounded by [`APPLY_WAIT_MAX`]) until this node applied `index`.
    pub async fn wait_applied<F: std::future::Future<Output = ()>>(
        &self,
        index: LogIndex,
        sleep: impl Fn(Duration) -> F,
    ) -> bool {
        let mut waited = Duration::ZERO;
        while self.applied_index() < index {
            if waited >= APPLY_WAIT_MAX {
                return false;
            }
            sleep(APPLY_POLL).await;
            waited += APPLY_POLL;
        }
        true
    }
}

/// Partition `tp`'s state in `image` (the image indexes partitions by their wire number).
fn partition_state<'a>(
    image: &'a MetadataImage,
    tp: TopicPartitionRef<'_>,
) -> Option<&'a PartitionState> {
    image.partition(tp.topic, tp.partition.0)
}

/// SHA-256 of `bytes`, lowercase hex.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the admin listener reads of the cluster (`crate::admin::state`): the view's own answers.
impl crate::admin::state::ClusterStatus for ClusterView {
    fn node_id(&self) -> NodeId {
        ClusterView::node_id(self)
    }

    fn image(&self) -> Arc<MetadataImage> {
        ClusterView::image(self)
    }

    fn controller(&self) -> Option<NodeId> {
        ClusterView::controller(self)
    }

    fn fatal(&self) -> Option<String> {
        ClusterView::fatal(self)
    }

    fn caught_up(&self) -> bool {
        ClusterView::caught_up(self)
    }

    fn catch_up_progress(&self) -> String {
        catch_up_progress(self)
    }
}

/// Where a broker's catch-up stands, for its log and its readiness probe.
pub fn catch_up_progress(view: &ClusterView) -> String {
    let applied = view.applied_index();
    match view.registered() {
        None => format!(
            "not registered yet (active controller: {}), metadata applied up to {applied}",
            view.controller()
                .map_or("none known".to_string(), |c| c.0.to_string())
        ),
        Some(epoch) => format!(
            "metadata applied up to {applied} of this start's registration at {}",
            epoch.0
        ),
    }
}
