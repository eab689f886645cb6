//! Durable topic metadata: which topics exist, their partition counts, per-topic configs and stable
//! topic ids, plus the cluster id and the producer-id counter.
//!
//! On disk: `<data-dir>/.rill-meta/topics.json`, one JSON document, replaced atomically (write
//! `topics.json.tmp`, fsync it, rename over the old file, fsync the directory). A crash leaves
//! either the old or the new document, never a mix. The directory name starts with a dot and has
//! no `-<partition>` suffix, so it cannot collide with a partition directory `<topic>-<n>`.
//!
//! Metadata changes are rare (create/delete topic, add partitions, a block of producer ids), so the
//! registry is one process-wide value behind a `RwLock` that every shard reads; writers serialize
//! on the lock and do a small blocking write. Reads clone an `Arc`, never hold the lock across an
//! `.await`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rill_metadata::acl::{AclChange, Acls};
use rill_metadata::client_quota::{ClientQuotas, QuotaChange};
use rill_metadata::scram::{ScramChange, ScramCredential, ScramCredentials, ScramMechanism};
use rill_protocol::ErrorCode;
use rill_types::ProducerId;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Upper bound on partitions per topic (a named maximum: each costs a directory and a task).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;
/// Producer ids are reserved on disk this many at a time, so InitProducerId rarely writes.
pub const PRODUCER_ID_BLOCK: i64 = 1000;
/// A single node reserves the next block once no more than this many reserved ids are left, so
/// the write lands before the ids run out and InitProducerId never waits for a disk.
const PRODUCER_ID_REFILL_MARK: i64 = PRODUCER_ID_BLOCK / 2;

const META_DIR: &str = ".rill-meta";
const META_FILE: &str = "topics.json";
const FORMAT_VERSION: u32 = 1;

/// One topic's durable description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// Stable id (Metadata v10+, Fetch v13+); never zero, never changes for the topic's life.
    pub id: Uuid,
    /// Partitions 0..partitions exist.
    pub partitions: i32,
    /// Topic-level overrides by Kafka name (`retention.ms`, `segment.bytes`, ...).
    pub configs: BTreeMap<String, String>,
}

/// Why a metadata change was refused; each maps to one Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// INVALID_TOPIC_EXCEPTION (17).
    #[error("invalid topic name: {0}")]
    InvalidName(String),
    /// TOPIC_ALREADY_EXISTS (36); Kafka's message, which `kafka-topics.sh` prints.
    #[error("Topic '{0}' already exists.")]
    AlreadyExists(String),
    /// UNKNOWN_TOPIC_OR_PARTITION (3).
    #[error("unknown topic {0}")]
    Unknown(String),
    /// INVALID_PARTITIONS (37).
    #[error("invalid partition count: {0}")]
    InvalidPartitions(String),
    /// INVALID_CONFIG (40).
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// INVALID_PARTITIONS (37): the broker's partition limit would be passed.
    #[error("{0}")]
    PartitionLimit(String),
    /// KAFKA_STORAGE_ERROR (56): the data directory has no room for the new partitions.
    #[error("{0}")]
    NoSpace(String),
    /// KAFKA_STORAGE_ERROR (56): the metadata file could not be written.
    #[error("metadata write failed: {0}")]
    Io(#[from] std::io::Error),
    /// COORDINATOR_NOT_AVAILABLE (15, retriable): no producer id is reserved right now (in a
    /// cluster, no block has come from the controller yet; on a single node, the next block's
    /// write to `topics.json` has not finished).
    #[error("waiting for the next block of producer ids")]
    ProducerIdsPending,
}

impl TopicError {
    /// The Kafka error code for this refusal.
    pub fn kafka_error_code(&self) -> ErrorCode {
        match self {
            TopicError::InvalidName(_) => ErrorCode::InvalidTopicException,
            TopicError::AlreadyExists(_) => ErrorCode::TopicAlreadyExists,
            TopicError::Unknown(_) => ErrorCode::UnknownTopicOrPartition,
            TopicError::InvalidPartitions(_) => ErrorCode::InvalidPartitions,
            TopicError::InvalidConfig(_) => ErrorCode::InvalidConfig,
            TopicError::PartitionLimit(_) => ErrorCode::InvalidPartitions,
            TopicError::NoSpace(_) => ErrorCode::KafkaStorageError,
            TopicError::Io(_) => ErrorCode::KafkaStorageError,
            TopicError::ProducerIdsPending => ErrorCode::CoordinatorNotAvailable,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct MetaDocument {
    format_version: u32,
    cluster_id: String,
    /// Producer ids below this are handed out or reserved; restart resumes here (never reuses).
    producer_id_reserved_until: i64,
    topics: BTreeMap<String, Arc<TopicMeta>>,
    /// Dynamic broker configs (AlterConfigs on a broker resource), by resource name: `""` the
    /// cluster-wide default, a node id that broker. Absent in documents of older versions.
    #[serde(default)]
    broker_configs: Arc<BrokerConfigs>,
    /// A single node's SCRAM credentials (AlterUserScramCredentials; a cluster keeps them in
    /// the metadata log). Absent in documents of older versions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    scram: ScramCredentials,
    /// A single node's ACL bindings (CreateAcls; a cluster keeps them in the metadata log).
    /// Absent in documents of older versions.
    #[serde(default, skip_serializing_if = "no_acls")]
    acls: Arc<Acls>,
    /// A single node's client quotas (AlterClientQuotas; a cluster keeps them in the metadata
    /// log). Absent in documents of older versions.
    #[serde(default, skip_serializing_if = "no_client_quotas")]
    client_quotas: Arc<ClientQuotas>,
    /// Topic names by id (Fetch v13+ names topics by id), rebuilt with every change; not stored.
    #[serde(skip)]
    ids: HashMap<Uuid, String>,
}

impl MetaDocument {
    /// The document with its id index rebuilt from its topics (the first name wins an id
    /// shared by several, as the scan it replaces found).
    fn indexed(mut self) -> Self {
        self.ids.clear();
        for (name, meta) in &self.topics {
            self.ids.entry(meta.id).or_insert_with(|| name.clone());
        }
        self
    }
}

fn no_acls(acls: &Arc<Acls>) -> bool {
    acls.is_empty()
}

fn no_client_quotas(quotas: &Arc<ClientQuotas>) -> bool {
    quotas.is_empty()
}

/// Dynamic broker configs: each broker's and the cluster's default, by broker property name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BrokerConfigs(BTreeMap<String, BTreeMap<String, String>>);

/// The resource name of the cluster-wide default broker configs.
pub const CLUSTER_DEFAULT_RESOURCE: &str = "";

impl BrokerConfigs {
    /// The dynamic configs of resource `name` (empty if none).
    pub fn of_resource(&self, name: &str) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.0.get(name).unwrap_or(&EMPTY)
    }

    /// Broker `node_id`'s own dynamic configs.
    pub fn of_broker(&self, node_id: i32) -> &BTreeMap<String, String> {
        self.of_resource(&node_id.to_string())
    }

    /// The cluster-wide dynamic defaults.
    pub fn cluster_default(&self) -> &BTreeMap<String, String> {
        self.of_resource(CLUSTER_DEFAULT_RESOURCE)
    }
}

#[derive(Debug)]
struct ProducerIds {
    next: i64,
    /// Ids below this are reserved durably in `topics.json` (a single node's counter).
    reserved_until: i64,
    /// A thread is writing the next reservation (at most one at a time).
    refilling: bool,
    /// In a cluster: blocks the controller handed this broker, oldest first (ids are unique
    /// across brokers only if they come from the metadata log). `None` on a single node.
    blocks: Option<std::collections::VecDeque<std::ops::Range<i64>>>,
}

/// Partitions a metadata change adds to the broker, shown to an admission check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    /// Partitions of every topic before the change.
    pub partitions_before: i64,
    /// Partitions the change adds.
    pub adding: i64,
}

/// The process-wide topic registry (see the module doc).
#[derive(Debug)]
pub struct TopicRegistry {
    dir: PathBuf,
    document: RwLock<MetaDocument>,
    producer_ids: Mutex<ProducerIds>,
    /// Serializes read-modify-write-persist sequences.
    write_lock: Mutex<()>,
    /// Bumped by every change of a topic's or a broker's dynamic configs: open partitions
    /// compare it to apply changes live.
    config_generation: AtomicU64,
}

impl TopicRegistry {
    /// Load `<data_dir>/.rill-meta/topics.json`, or start empty (with a new cluster id) if absent.
    pub fn open(data_dir: &Path) -> std::io::Result<Self> {
        let dir = data_dir.join(META_DIR);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(META_FILE);
        let document = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<MetaDocument>(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => MetaDocument {
                format_version: FORMAT_VERSION,
                cluster_id: new_cluster_id(),
                producer_id_reserved_until: 0,
                topics: BTreeMap::new(),
                broker_configs: Arc::default(),
                scram: ScramCredentials::new(),
                acls: Arc::default(),
                client_quotas: Arc::default(),
                ids: HashMap::new(),
            },
            Err(e) => return Err(e),
        };
        let document = document.indexed();
        if document.format_version != FORMAT_VERSION {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("unsupported metadata format {}", document.format_version),
            ));
        }
        // The first block is reserved by the write every open makes anyway, so the first
        // InitProducerId after a start does not write (a cluster's brokers use blocks instead).
        let mut document = document;
        let next_producer_id = document.producer_id_reserved_until;
        document.producer_id_reserved_until = next_producer_id + PRODUCER_ID_BLOCK;
        let registry = Self {
            dir,
            producer_ids: Mutex::new(ProducerIds {
                next: next_producer_id,
                reserved_until: document.producer_id_reserved_until,
                refilling: false,
                blocks: None,
            }),
            document: RwLock::new(document),
            write_lock: Mutex::new(()),
            config_generation: AtomicU64::new(0),
        };
        let snapshot = registry.read().clone();
        registry.persist(&snapshot)?;
        Ok(registry)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, MetaDocument> {
        // A poisoned lock means a writer panicked mid-update of an in-memory map that is always
        // replaced whole, so the data is still consistent.
        self.document.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The cluster id reported by Metadata/DescribeCluster; stable across restarts.
    pub fn cluster_id(&self) -> String {
        self.read().cluster_id.clone()
    }

    /// One topic's metadata, if it exists.
    pub fn get(&self, name: &str) -> Option<Arc<TopicMeta>> {
        self.read().topics.get(name).cloned()
    }

    /// A topic by id (Fetch v13+ names topics by id).
    pub fn by_id(&self, id: Uuid) -> Option<(String, Arc<TopicMeta>)> {
        let doc = self.read();
        let name = doc.ids.get(&id)?;
        let meta = doc
            .topics
            .get(name)
            .expect("the id index names a topic it holds");
        Some((name.clone(), meta.clone()))
    }

    /// All topics, sorted by name.
    pub fn list(&self) -> Vec<(String, Arc<TopicMeta>)> {
        let doc = self.read();
        doc.topics
            .iter()
            .map(|(name, meta)| (name.clone(), meta.clone()))
            .collect()
    }

    /// Partitions of every topic.
    pub fn partition_count(&self) -> i64 {
        total_partitions(&self.read())
    }

    /// Create a topic durably. `configs` must already be validated by the caller's policy.
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMeta>, TopicError> {
        self.create_within(name, partitions, configs, |_| Ok(()))
    }

    /// [`Self::create`] if `admit` accepts the growth (the broker's capacity checks). `admit`
    /// runs under the write lock, so concurrent creations cannot pass a limit together; a
    /// refusal changes nothing.
    pub fn create_within(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        admit: impl FnOnce(Growth) -> Result<(), TopicError>,
    ) -> Result<Arc<TopicMeta>, TopicError> {
        validate_topic_name(name)?;
        validate_partition_count(partitions)?;
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        if next.topics.contains_key(name) {
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        admit(Growth {
            partitions_before: total_partitions(&next),
            adding: i64::from(partitions),
        })?;
        let meta = Arc::new(TopicMeta {
            id: new_topic_id(),
            partitions,
            configs,
        });
        next.topics.insert(name.to_string(), meta.clone());
        self.commit(next)?;
        Ok(meta)
    }

    /// Remove a topic durably; returns what it was so the caller can delete its partitions.
    pub fn delete(&self, name: &str) -> Result<Arc<TopicMeta>, TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        let meta = next
            .topics
            .remove(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        self.commit(next)?;
        Ok(meta)
    }

    /// Grow a topic to `new_total` partitions (Kafka never shrinks).
    pub fn add_partitions(&self, name: &str, new_total: i32) -> Result<Arc<TopicMeta>, TopicError> {
        self.add_partitions_within(name, new_total, |_| Ok(()))
    }

    /// [`Self::add_partitions`] if `admit` accepts the growth (run under the write lock).
    pub fn add_partitions_within(
        &self,
        name: &str,
        new_total: i32,
        admit: impl FnOnce(Growth) -> Result<(), TopicError>,
    ) -> Result<Arc<TopicMeta>, TopicError> {
        validate_partition_count(new_total)?;
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        let old = next
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        if new_total <= old.partitions {
            return Err(TopicError::InvalidPartitions(format!(
                "topic {name} has {} partitions; new count {new_total} must be larger",
                old.partitions
            )));
        }
        admit(Growth {
            partitions_before: total_partitions(&next),
            adding: i64::from(new_total - old.partitions),
        })?;
        let meta = Arc::new(TopicMeta {
            partitions: new_total,
            ..(*old).clone()
        });
        next.topics.insert(name.to_string(), meta.clone());
        self.commit(next)?;
        Ok(meta)
    }

    /// Replaces a topic's configs durably (`validate` checks the new set under the write lock,
    /// so two concurrent changes cannot both pass against a stale base).
    pub fn set_topic_configs(
        &self,
        name: &str,
        update: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, TopicError>,
    ) -> Result<Arc<TopicMeta>, TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        let old = next
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        let meta = Arc::new(TopicMeta {
            configs: update(&old.configs)?,
            ..(*old).clone()
        });
        next.topics.insert(name.to_string(), meta.clone());
        self.commit(next)?;
        self.config_generation.fetch_add(1, Ordering::SeqCst);
        Ok(meta)
    }

    /// The dynamic broker configs.
    pub fn broker_configs(&self) -> Arc<BrokerConfigs> {
        self.read().broker_configs.clone()
    }

    /// Replaces the dynamic configs of broker resource `resource` durably (`update` as in
    /// [`Self::set_topic_configs`]).
    pub fn set_broker_configs(
        &self,
        resource: &str,
        update: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, TopicError>,
    ) -> Result<(), TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        let configs = update(next.broker_configs.of_resource(resource))?;
        let mut all = (*next.broker_configs).clone();
        if configs.is_empty() {
            all.0.remove(resource);
        } else {
            all.0.insert(resource.to_string(), configs);
        }
        next.broker_configs = Arc::new(all);
        self.commit(next)?;
        self.config_generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// A single node's SCRAM credential of `user` for `mechanism`.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<ScramCredential> {
        self.read().scram.get(user)?.get(&mechanism).cloned()
    }

    /// Runs `f` on a single node's SCRAM credentials (under the read lock: `f` must not block).
    pub fn with_scram<T>(&self, f: impl FnOnce(&ScramCredentials) -> T) -> T {
        f(&self.read().scram)
    }

    /// Decides and applies a single node's AlterUserScramCredentials durably: `decide` sees the
    /// current credentials and returns its answer and the changes to make.
    pub fn alter_scram<T>(
        &self,
        decide: impl FnOnce(&ScramCredentials) -> (T, Vec<ScramChange>),
    ) -> Result<T, TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        let (answer, changes) = decide(&next.scram);
        if !changes.is_empty() {
            rill_metadata::scram::apply(&mut next.scram, &changes);
            self.commit(next)?;
        }
        Ok(answer)
    }

    /// A single node's ACL bindings.
    pub fn acls(&self) -> Arc<Acls> {
        self.read().acls.clone()
    }

    /// Decides and applies a single node's CreateAcls or DeleteAcls durably: `decide` sees the
    /// current bindings and returns its answer and the changes to make.
    pub fn alter_acls<T>(
        &self,
        decide: impl FnOnce(&Acls) -> (T, Vec<AclChange>),
    ) -> Result<T, TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        let (answer, changes) = decide(&next.acls);
        if !changes.is_empty() {
            rill_metadata::acl::apply(Arc::make_mut(&mut next.acls), &changes);
            self.commit(next)?;
        }
        Ok(answer)
    }

    /// A single node's client quotas.
    pub fn client_quotas(&self) -> Arc<ClientQuotas> {
        self.read().client_quotas.clone()
    }

    /// Decides and applies a single node's AlterClientQuotas durably: `decide` sees the
    /// current quotas and returns its answer and the changes to make.
    pub fn alter_client_quotas<T>(
        &self,
        decide: impl FnOnce(&ClientQuotas) -> (T, Vec<QuotaChange>),
    ) -> Result<T, TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.read().clone();
        let (answer, changes) = decide(&next.client_quotas);
        if !changes.is_empty() {
            rill_metadata::client_quota::apply(Arc::make_mut(&mut next.client_quotas), &changes);
            self.commit(next)?;
        }
        Ok(answer)
    }

    /// Bumped by every config change (see the field).
    pub fn config_generation(&self) -> u64 {
        self.config_generation.load(Ordering::SeqCst)
    }

    /// A producer id never handed out before, even across restarts (in a cluster: by any
    /// broker, see [`Self::add_producer_id_block`]). Never blocks: shard threads call it, and
    /// a single node's next reservation is written by a thread of its own (see
    /// [`PRODUCER_ID_REFILL_MARK`]); if the ids run out before it lands, the answer is
    /// [`TopicError::ProducerIdsPending`] (retriable) rather than a stalled shard.
    pub fn allocate_producer_id(self: &Arc<Self>) -> Result<ProducerId, TopicError> {
        let mut ids = self.producer_ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(blocks) = &mut ids.blocks {
            while let Some(block) = blocks.front_mut() {
                if let Some(id) = block.next() {
                    return Ok(ProducerId(id));
                }
                blocks.pop_front();
            }
            return Err(TopicError::ProducerIdsPending);
        }
        let id = (ids.next < ids.reserved_until).then_some(ids.next);
        if id.is_some() {
            ids.next += 1;
        }
        assert!(
            ids.next <= ids.reserved_until,
            "ids handed out are reserved"
        );
        let refill = !ids.refilling && ids.reserved_until - ids.next <= PRODUCER_ID_REFILL_MARK;
        ids.refilling |= refill;
        drop(ids);
        if refill {
            self.spawn_producer_id_refill();
        }
        id.map(ProducerId).ok_or(TopicError::ProducerIdsPending)
    }

    /// Starts the thread that reserves the next block (the caller set `refilling`).
    fn spawn_producer_id_refill(self: &Arc<Self>) {
        let registry = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("rill-producer-ids".into())
            .spawn(move || registry.refill_producer_ids());
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the producer-id reservation thread");
            self.producer_ids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .refilling = false;
        }
    }

    /// Reserves the next [`PRODUCER_ID_BLOCK`] ids durably, then lets them be handed out.
    fn refill_producer_ids(&self) {
        let written = {
            let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
            let mut next = self.read().clone();
            next.producer_id_reserved_until += PRODUCER_ID_BLOCK;
            let reserved_until = next.producer_id_reserved_until;
            self.commit(next).map(|()| reserved_until)
        };
        let mut ids = self.producer_ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.refilling = false;
        match written {
            Ok(reserved_until) => {
                assert!(
                    reserved_until > ids.reserved_until,
                    "reservations only grow"
                );
                ids.reserved_until = reserved_until;
            }
            Err(e) => tracing::error!(error = %e, "cannot reserve producer ids"),
        }
    }

    /// Cluster mode: from now on producer ids come only from blocks the controller allocated.
    pub fn use_producer_id_blocks(&self) {
        let mut ids = self.producer_ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.blocks.get_or_insert_with(Default::default);
    }

    /// A block the controller allocated to this broker (ids `first..first + count`).
    pub fn add_producer_id_block(&self, first: ProducerId, count: i64) {
        assert!(first.0 >= 0 && count > 0);
        let mut ids = self.producer_ids.lock().unwrap_or_else(|e| e.into_inner());
        let blocks = ids.blocks.get_or_insert_with(Default::default);
        blocks.push_back(first.0..first.0 + count);
    }

    /// Producer ids left in the controller's blocks (the broker asks for more below a mark).
    pub fn producer_ids_left(&self) -> i64 {
        let ids = self.producer_ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.blocks
            .as_ref()
            .map_or(0, |b| b.iter().map(|r| r.end - r.start).sum())
    }

    /// Cluster mode: make the topics (and cluster id) those of the metadata log, durably; a
    /// no-op when nothing differs. Returns whether anything changed.
    pub fn mirror(
        &self,
        cluster_id: &str,
        topics: BTreeMap<String, Arc<TopicMeta>>,
    ) -> Result<bool, TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.read();
        if current.cluster_id == cluster_id && current.topics == topics {
            return Ok(false);
        }
        let mut next = current.clone();
        drop(current);
        next.cluster_id = cluster_id.to_string();
        next.topics = topics;
        self.commit(next)?;
        // Topic configs may have changed: open partitions re-read theirs.
        self.config_generation.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }

    fn commit(&self, next: MetaDocument) -> Result<(), TopicError> {
        let next = next.indexed();
        self.persist(&next)?;
        *self.document.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }

    fn persist(&self, document: &MetaDocument) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(document).map_err(std::io::Error::other)?;
        write_atomically(&self.dir, META_FILE, &bytes)
    }
}

fn total_partitions(document: &MetaDocument) -> i64 {
    document
        .topics
        .values()
        .map(|t| i64::from(t.partitions))
        .sum()
}

/// Replace `dir/name` with `bytes` so that a crash leaves the old or the new content.
pub fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Kafka's topic name rule ([`rill_types::limits::check_topic_name`], the one table's row).
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    rill_types::limits::check_topic_name(name).map_err(|e| TopicError::InvalidName(e.reason))
}

fn validate_partition_count(partitions: i32) -> Result<(), TopicError> {
    if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
        return Err(TopicError::InvalidPartitions(format!(
            "{partitions} is outside 1..={PARTITIONS_PER_TOPIC_MAX}"
        )));
    }
    Ok(())
}

/// A random non-nil v4 UUID (Kafka treats the nil UUID as "no id").
fn new_topic_id() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if !id.is_nil() {
            return id;
        }
    }
}

/// Kafka cluster ids are 22-character URL-safe base64 of a UUID; any stable string works for
/// clients, so the UUID's simple hex form (32 chars) is used.
fn new_cluster_id() -> String {
    Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_survive_reopen_with_same_ids() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::open(dir.path()).unwrap();
        let cluster = reg.cluster_id();
        let configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        let a = reg.create("orders", 3, configs.clone()).unwrap();
        reg.create("b", 1, BTreeMap::new()).unwrap();
        reg.delete("b").unwrap();
        reg.add_partitions("orders", 5).unwrap();
        drop(reg);
        let reg = TopicRegistry::open(dir.path()).unwrap();
        assert_eq!(reg.cluster_id(), cluster);
        let a2 = reg.get("orders").unwrap();
        assert_eq!(a2.id, a.id);
        assert_eq!(a2.partitions, 5);
        assert_eq!(a2.configs, configs);
        assert!(reg.get("b").is_none());
        assert_eq!(reg.by_id(a.id).unwrap().0, "orders");
    }

    #[test]
    fn the_id_index_follows_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::open(dir.path()).unwrap();
        assert!(reg.by_id(Uuid::nil()).is_none(), "empty");
        let a = reg.create("a", 1, BTreeMap::new()).unwrap();
        let b = reg.create("b", 2, BTreeMap::new()).unwrap();
        assert_eq!(
            reg.by_id(b.id).map(|(n, m)| (n, m.partitions)),
            Some(("b".into(), 2))
        );
        reg.delete("a").unwrap();
        assert!(reg.by_id(a.id).is_none(), "a deleted topic's id is gone");
        let mirrored = BTreeMap::from([("c".to_string(), a.clone())]);
        reg.mirror(&reg.cluster_id(), mirrored).unwrap();
        assert_eq!(
            reg.by_id(a.id).unwrap().0,
            "c",
            "the metadata log's topics replace all"
        );
        assert!(reg.by_id(b.id).is_none());
    }

    #[test]
    fn refusals_carry_kafka_codes() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::open(dir.path()).unwrap();
        reg.create("t", 1, BTreeMap::new()).unwrap();
        let code = |r: Result<Arc<TopicMeta>, TopicError>| r.unwrap_err().kafka_error_code().code();
        assert_eq!(code(reg.create("t", 1, BTreeMap::new())), 36);
        assert_eq!(code(reg.create("bad name", 1, BTreeMap::new())), 17);
        assert_eq!(code(reg.create("", 1, BTreeMap::new())), 17);
        assert_eq!(code(reg.create("..", 1, BTreeMap::new())), 17);
        assert_eq!(code(reg.create(&"x".repeat(250), 1, BTreeMap::new())), 17);
        assert_eq!(code(reg.create("u", 0, BTreeMap::new())), 37);
        assert_eq!(code(reg.add_partitions("t", 1)), 37);
        assert_eq!(code(reg.add_partitions("nope", 4)), 3);
        assert_eq!(code(reg.delete("nope")), 3);
        assert!(reg.create(&"x".repeat(249), 1, BTreeMap::new()).is_ok());
    }

    #[test]
    fn a_refused_admission_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::open(dir.path()).unwrap();
        reg.create("a", 3, BTreeMap::new()).unwrap();
        let refuse = |g: Growth| {
            assert_eq!(g.partitions_before, 3);
            Err(TopicError::PartitionLimit(format!("+{}", g.adding)))
        };
        let err = reg
            .create_within("b", 5, BTreeMap::new(), refuse)
            .unwrap_err();
        assert_eq!(
            (err.kafka_error_code(), err.to_string()),
            (ErrorCode::InvalidPartitions, "+5".to_string())
        );
        let err = reg.add_partitions_within("a", 4, refuse).unwrap_err();
        assert_eq!(err.to_string(), "+1");
        drop(reg);
        let reg = TopicRegistry::open(dir.path()).unwrap();
        assert!(reg.get("b").is_none());
        assert_eq!(reg.get("a").unwrap().partitions, 3);
        assert_eq!(reg.partition_count(), 3);
    }

    #[test]
    fn producer_ids_are_never_reused_across_restart() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        let first: Vec<i64> = (0..3)
            .map(|_| reg.allocate_producer_id().unwrap().0)
            .collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(reg);
        let reg = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        let next = reg.allocate_producer_id().unwrap().0;
        assert!(next > 2, "reused producer id {next}");
    }

    /// Waits (bounded) until `reg` hands out an id again after running out.
    fn next_id_once_refilled(reg: &Arc<TopicRegistry>) -> i64 {
        for _ in 0..1000 {
            match reg.allocate_producer_id() {
                Ok(id) => return id.0,
                Err(TopicError::ProducerIdsPending) => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("the producer-id refill never landed");
    }

    #[test]
    fn allocating_producer_ids_never_waits_for_the_metadata_write() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        // A slow topics.json commit in progress (as a CreateTopics on a blocking thread holds
        // it): the block reserved at open is handed out regardless, then the answer is a
        // retriable refusal, not a wait.
        let commit_in_progress = reg.write_lock.lock().unwrap();
        let block: Vec<i64> = (0..PRODUCER_ID_BLOCK)
            .map(|_| reg.allocate_producer_id().unwrap().0)
            .collect();
        assert_eq!(block, (0..PRODUCER_ID_BLOCK).collect::<Vec<_>>());
        assert!(matches!(
            reg.allocate_producer_id(),
            Err(TopicError::ProducerIdsPending)
        ));
        drop(commit_in_progress);
        assert_eq!(next_id_once_refilled(&reg), PRODUCER_ID_BLOCK);
        // Each refill is durable before its ids go out: none comes back after a restart.
        let mut last = 0;
        for _ in 0..3 * PRODUCER_ID_BLOCK {
            last = next_id_once_refilled(&reg);
        }
        assert_eq!(last, 4 * PRODUCER_ID_BLOCK);
        drop(reg);
        let reg = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        assert!(reg.allocate_producer_id().unwrap().0 > last);
    }

    #[test]
    fn a_start_reserves_the_first_block_in_its_own_write() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        assert_eq!(reg.read().producer_id_reserved_until, PRODUCER_ID_BLOCK);
        assert_eq!(reg.allocate_producer_id().unwrap().0, 0);
        drop(reg);
        let reg = TopicRegistry::open(dir.path()).unwrap();
        assert_eq!(reg.read().producer_id_reserved_until, 2 * PRODUCER_ID_BLOCK);
    }

    #[test]
    fn cluster_mode_takes_topics_and_producer_ids_from_the_controller() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        reg.use_producer_id_blocks();
        assert!(matches!(
            reg.allocate_producer_id(),
            Err(TopicError::ProducerIdsPending)
        ));
        reg.add_producer_id_block(ProducerId(2000), 2);
        reg.add_producer_id_block(ProducerId(5000), 1);
        assert_eq!(reg.producer_ids_left(), 3);
        let ids: Vec<i64> = (0..3)
            .map(|_| reg.allocate_producer_id().unwrap().0)
            .collect();
        assert_eq!(ids, vec![2000, 2001, 5000]);
        assert!(reg.allocate_producer_id().is_err());
        let meta = Arc::new(TopicMeta {
            id: Uuid::from_u128(1),
            partitions: 3,
            configs: BTreeMap::new(),
        });
        let topics = BTreeMap::from([("t".to_string(), meta)]);
        assert!(reg.mirror("cid", topics.clone()).unwrap());
        assert!(!reg.mirror("cid", topics).unwrap(), "unchanged: no write");
        drop(reg);
        let reg = TopicRegistry::open(dir.path()).unwrap();
        assert_eq!(reg.cluster_id(), "cid");
        assert_eq!(reg.get("t").unwrap().id, Uuid::from_u128(1));
    }

    #[test]
    fn corrupt_metadata_is_an_error_not_a_silent_reset() {
        let dir = tempfile::tempdir().unwrap();
        TopicRegistry::open(dir.path()).unwrap();
        std::fs::write(dir.path().join(META_DIR).join(META_FILE), b"{not json").unwrap();
        assert!(TopicRegistry::open(dir.path()).is_err());
    }
}
