//! The broker as handlers and coordinators see it: the [`Broker`] facade (partitions, groups,
//! transactions, topics, the cluster, the clock), and the small helpers that turn names into
//! wire values. Below every domain module that calls through it (see `server/LAYERS.md`).
//!
//! Handlers see the broker only through [`Broker`], so unit tests drive them with an in-memory
//! fake (`crate::handler::fake`) and no runtime; the real implementation is
//! [`crate::shard::Shard`], which routes each partition operation to its owning shard.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rill_protocol::kafka_protocol::messages::TopicName;
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, TopicPartitionRef};

use crate::capacity::Capacity;
use crate::cluster::view::ClusterView;
use crate::config::settings::BrokerConfig;
use crate::config::topic::cache::Settled;
use crate::config::topic::TopicSettings;
use crate::group::ops::{GroupListing, GroupOp, GroupReply};
use crate::partition::ops::{PartitionOp, PartitionReply};
use crate::topics::{TopicError, TopicMeta, TopicRegistry};
use crate::txn::ops::{TxnListFilter, TxnListing, TxnOp, TxnReply};

/// What a handler may ask of the broker.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait Broker {
    /// Resolved broker configuration.
    fn config(&self) -> &BrokerConfig;
    /// Durable topic metadata.
    fn topics(&self) -> &Arc<TopicRegistry>;
    /// `name`'s settings on this broker ([`TopicSettings::of_topic`] of its current `meta`).
    /// A shard parses them once per config change (`crate::config::topic::cache`).
    fn topic_settings(&self, name: &str, meta: &Arc<TopicMeta>) -> Settled {
        let _ = name; // only a cache needs it
        TopicSettings::of_topic(self.config(), self.topics(), &meta.configs).map(Arc::new)
    }
    /// Run `op` on the shard that owns the partition and return its answer.
    async fn partition(&self, tp: TopicPartitionRef<'_>, op: PartitionOp) -> PartitionReply;
    /// The runtime's monotonic clock (long-poll deadlines); the same clock [`Broker::sleep`]
    /// waits on.
    fn now(&self) -> Instant;
    /// The runtime's timer (long polls).
    async fn sleep(&self, duration: Duration);
    /// Runs `call`, which blocks (the topic registry's write and fsync of `topics.json`, a
    /// `statvfs`), where blocking stalls nothing: a shard runs it on its executor's blocking
    /// thread and goes on serving meanwhile. The unit tests' fake runs it in place.
    async fn blocking<T: Send + 'static>(&self, call: impl FnOnce() -> T + Send + 'static) -> T {
        call()
    }
    /// The wall clock, as Kafka timestamps count (timestamp bounds of produced records).
    fn wall_clock(&self) -> rill_types::TimestampMs {
        use rill_engine::io::Clock;
        rill_engine::io::SystemClock.now()
    }
    /// Run a consumer-group operation on the shard that coordinates `group_id`.
    async fn group(&self, group_id: &str, op: GroupOp) -> GroupReply;
    /// Every group on every shard (ListGroups).
    async fn list_groups(&self) -> Vec<GroupListing>;
    /// The cluster this broker belongs to; `None` on a single node.
    fn cluster(&self) -> Option<&ClusterView> {
        None
    }
    /// The shard's budget of record bytes Fetch responses hold (`rill.shard.fetch.bytes.max`);
    /// `None`: unbounded (the unit tests' fake).
    fn fetch_budget(&self) -> Option<&crate::memory_budget::ByteBudget> {
        None
    }
    /// Every client's byte rates, shared by all shards (client quotas); `None`: no quota is
    /// enforced (the unit tests' fake).
    fn client_rates(&self) -> Option<&crate::client_quotas::ClientRates> {
        None
    }
    /// The internal topic `name` (`__consumer_offsets`, `__transaction_state`) if it exists
    /// here: a cluster's from its image; a single node's where its runtime serves the
    /// coordinators' logs (`crate::internal_topics::single_node`). Clients read them, never write them.
    fn internal_topic(&self, name: &str) -> Option<Arc<TopicMeta>> {
        self.cluster()?.internal_topic(name)
    }
    /// Every internal topic that exists here, each as [`Broker::internal_topic`] gives it.
    fn internal_topics(&self) -> Vec<(String, Arc<TopicMeta>)> {
        self.cluster()
            .map(|c| c.internal_topics())
            .unwrap_or_default()
    }
    /// A partition's current leader epoch: the cluster's, or [`LEADER_EPOCH`] on a single node.
    fn leader_epoch(&self, tp: TopicPartitionRef<'_>) -> LeaderEpoch {
        self.cluster()
            .and_then(|c| c.leader_epoch(tp))
            .unwrap_or(LEADER_EPOCH)
    }
    /// Run a transaction operation on the shard that coordinates `transactional_id`.
    async fn txn(&self, transactional_id: &str, op: TxnOp) -> TxnReply;
    /// Every transactional id on every shard that passes `filter` (ListTransactions).
    async fn list_txns(&self, filter: TxnListFilter) -> Vec<TxnListing>;
}

/// A request (or one part of it) refused: the Kafka error code and the message for the client.
pub type Refused = (ErrorCode, String);

/// The leader epoch of every partition on a single node, where the leader never changes (a
/// cluster reports the controller's epochs, [`Broker::leader_epoch`]). A real
/// (non-negative) epoch makes clients validate positions with OffsetForLeaderEpoch, which
/// `crate::handler::offset_for_leader_epoch` answers.
pub const LEADER_EPOCH: LeaderEpoch = LeaderEpoch(0);

/// A topic clients may read (Fetch, ListOffsets, OffsetForLeaderEpoch) by name: a registered
/// one, or an internal one ([`Broker::internal_topic`]), which Kafka lets any consumer fetch
/// (writes stay the coordinators').
pub fn readable_topic<B: Broker>(broker: &B, name: &str) -> Option<Arc<TopicMeta>> {
    let registered = broker.topics().get(name);
    registered.or_else(|| broker.internal_topic(name))
}

/// [`readable_topic`] by topic id (Fetch v13+): its name and metadata.
pub fn readable_topic_by_id<B: Broker>(
    broker: &B,
    id: uuid::Uuid,
) -> Option<(String, Arc<TopicMeta>)> {
    let registered = broker.topics().by_id(id);
    registered.or_else(|| {
        let mut internal = broker.internal_topics().into_iter();
        internal.find(|(_, meta)| meta.id == id)
    })
}

/// A topic, creating it first when auto-creation is on (Metadata, Produce); never one of a
/// cluster's internal topics.
pub async fn topic_or_auto_create<B: Broker>(
    broker: &B,
    name: &str,
    allow_auto_create: bool,
) -> Result<Arc<TopicMeta>, ErrorCode> {
    if let Some(meta) = broker.topics().get(name) {
        return Ok(meta);
    }
    crate::topics::validate_topic_name(name).map_err(|_| ErrorCode::InvalidTopicException)?;
    // The metadata log's name: never a topic (its partition 0 would be that log's directory).
    if name == crate::internal_topics::METADATA_TOPIC {
        return Err(ErrorCode::InvalidRequest);
    }
    // Internal topics are the coordinators', not a client's to write (Kafka: "Cannot append
    // to internal topic"); Metadata looks them up before coming here.
    if broker.internal_topic(name).is_some() {
        return Err(ErrorCode::InvalidTopicException);
    }
    // Kafka creates its internal topics itself, never as ordinary ones (a broker without them,
    // e.g. the unit tests' fake, has none to offer).
    let single_node_internal =
        broker.cluster().is_none() && crate::internal_topics::is_internal(name);
    if single_node_internal || !(allow_auto_create && broker.config().auto_create_topics) {
        return Err(ErrorCode::UnknownTopicOrPartition);
    }
    let partitions = broker.config().default_partitions;
    if let Some(cluster) = broker.cluster() {
        // Kafka's answer while the controller creates it: the client asks again shortly.
        // The coordinators' topics are created with their own settings, never as ordinary ones.
        if cluster.ensure_internal_topic_named(name) {
            return Err(ErrorCode::LeaderNotAvailable);
        }
        cluster.create_once(rill_metadata::request::NewTopic {
            name: name.to_string(),
            partitions: partitions as u32,
            replication_factor: None,
            configs: Default::default(),
            internal: false,
        });
        return Err(ErrorCode::LeaderNotAvailable);
    }
    let (registry, capacity) = (broker.topics().clone(), Capacity::of(broker.config()));
    let owned_name = name.to_string();
    let created = broker
        .blocking(move || {
            registry.create_within(&owned_name, partitions, Default::default(), |growth| {
                capacity.admit(growth, 0)
            })
        })
        .await;
    match created {
        Ok(meta) => {
            tracing::info!(topic = name, partitions, "auto-created topic");
            Ok(meta)
        }
        // Another shard created it between our lookup and our create.
        Err(TopicError::AlreadyExists(_)) => broker
            .topics()
            .get(name)
            .ok_or(ErrorCode::UnknownTopicOrPartition),
        Err(e) => {
            tracing::warn!(topic = name, error = %e, "auto-creation refused");
            Err(e.kafka_error_code())
        }
    }
}

/// `TopicName` from a `&str` (one small copy: names are short).
pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Per-partition answers grouped by topic, topics in first-seen order (the shape of most
/// admin responses).
pub fn by_topic<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut topics: Vec<(String, Vec<T>)> = Vec::new();
    for (topic, item) in items {
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, group)) => group.push(item),
            None => topics.push((topic, vec![item])),
        }
    }
    topics
}

/// `StrBytes` from a `&str`.
pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// An error message as a response carries it: cut to `ERROR_MESSAGE_BYTES_MAX` (a message may
/// quote a client's 32 KiB name, and one over the wire's string limit cannot be encoded).
/// Every `error_message` field a handler fills goes through here.
pub fn message_bytes(message: &str) -> StrBytes {
    StrBytes::from_string(rill_types::limits::error_message(message).into_owned())
}
