//! The metadata image: what the metadata log says, applied up to some index (KRaft's
//! MetadataImage). Every node applies the same records in the same order with [`apply_entry`],
//! which is deterministic and never panics on a record: a record that no longer fits the image
//! (a topic created twice by racing requests, a fence for an old registration) is rejected with a
//! [`Rejected`] reason and changes nothing, on every node alike.
//!
//! Invariants (checked by [`MetadataImage::check_invariants`] in tests and debug builds):
//! - every partition has at least one replica, no replica twice, `isr` ⊆ `replicas`;
//! - a partition's leader, when it has one, is in its ISR;
//! - topic names and ids are unique, and `ids` indexes exactly `topics`.
//!
//! A leader may be a fenced broker for the moment between a fence and the partition changes that
//! follow it; [`MetadataImage::live_leader`] is what clients are told.
//!
//! [`apply_entry`]: MetadataImage::apply_entry

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::record::{BrokerIdentity, MetadataRecord, PartitionAssignment, PartitionReassignment};
use crate::types::{BrokerEpoch, Endpoint, LogIndex, NodeId, PartitionEpoch};
use rill_types::{LeaderEpoch, ProducerId};

/// Upper bound on partitions per topic (the broker's own limit, repeated as a log invariant).
pub const PARTITIONS_PER_TOPIC_MAX: usize = 10_000;

/// One registered broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// Its `node.id`.
    pub node_id: NodeId,
    /// Random per process start.
    pub incarnation_id: Uuid,
    /// Stable per data directory.
    pub log_dir_id: Uuid,
    /// The log index of its registration.
    pub epoch: BrokerEpoch,
    /// Its advertised inter-broker listener.
    pub endpoint: Endpoint,
    /// Every advertised listener by name ([`BrokerIdentity::listeners`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub listeners: BTreeMap<String, Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Fenced brokers lead nothing and are not listed to clients.
    pub fenced: bool,
    /// What its follower fetches are checked against ([`BrokerIdentity::replica_secret_sha256`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_secret_sha256: Option<String>,
}

impl BrokerRegistration {
    /// Where a client of the listener `name` reaches it: that listener's advertised endpoint
    /// (`None` if it has none of that name); a registration from before listeners were
    /// registered has only its one endpoint.
    pub fn endpoint_on(&self, name: &str) -> Option<&Endpoint> {
        if self.listeners.is_empty() {
            return Some(&self.endpoint);
        }
        self.listeners.get(name)
    }

    /// A fresh registration (fenced until it catches up) at `epoch`.
    pub fn new(identity: &BrokerIdentity, epoch: BrokerEpoch) -> Self {
        Self {
            node_id: identity.node_id,
            incarnation_id: identity.incarnation_id,
            log_dir_id: identity.log_dir_id,
            epoch,
            endpoint: identity.endpoint.clone(),
            listeners: identity.listeners.clone(),
            rack: identity.rack.clone(),
            fenced: true,
            replica_secret_sha256: identity.replica_secret_sha256.clone(),
        }
    }
}

/// One partition's placement and leadership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Replicas in preference order.
    pub replicas: Vec<NodeId>,
    /// In-sync replicas.
    pub isr: Vec<NodeId>,
    /// Current leader; `None` while no eligible replica is alive (LEADER_NOT_AVAILABLE).
    pub leader: Option<NodeId>,
    /// Bumped on every change of leader.
    pub leader_epoch: LeaderEpoch,
    /// Bumped on every change of this partition.
    pub partition_epoch: PartitionEpoch,
    /// Replicas a reassignment adds (in `replicas`, catching up; KIP-455).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<NodeId>,
    /// Replicas a reassignment removes once the added ones are in the ISR (in `replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<NodeId>,
}

impl PartitionState {
    /// Whether a reassignment is under way.
    pub fn reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }
}

/// One topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    /// Stable id.
    pub id: Uuid,
    /// Name.
    pub name: String,
    /// Hidden from clients' topic lists (`__consumer_offsets`).
    pub internal: bool,
    /// Topic-level config overrides.
    pub configs: BTreeMap<String, String>,
    /// Partitions 0..n.
    pub partitions: Vec<PartitionState>,
}

/// Why a record did not apply (the same on every node). Each maps to a Kafka error code for the
/// request that caused it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// TOPIC_ALREADY_EXISTS.
    #[error("topic {0} already exists")]
    TopicExists(String),
    /// UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID.
    #[error("unknown topic or partition")]
    UnknownTopic,
    /// The record was decided on an image that has moved on (a retry will decide again).
    #[error("stale: {0}")]
    Stale(String),
    /// The record breaks an image invariant (a controller bug, never applied).
    #[error("invalid record: {0}")]
    Invalid(String),
}

/// The applied metadata (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredImage")]
pub struct MetadataImage {
    /// Index of the last entry applied.
    pub applied_index: LogIndex,
    /// Raft term of that entry.
    pub applied_term: u64,
    /// Set by the first controller.
    pub cluster_id: Option<String>,
    /// Registered brokers.
    pub brokers: BTreeMap<NodeId, BrokerRegistration>,
    /// Topics by name.
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    /// Producer ids below this were handed out.
    pub next_producer_id: ProducerId,
    /// SCRAM credentials by user and mechanism (KIP-554).
    pub scram: crate::scram::ScramCredentials,
    /// ACL bindings (KRaft's AccessControlEntryRecords), shared with the requests reading them.
    pub acls: Arc<crate::acl::Acls>,
    /// Client quotas (KRaft's ClientQuotaRecords), shared with the requests reading them.
    pub client_quotas: Arc<crate::client_quota::ClientQuotas>,
    /// Topic id → name (derived from `topics`).
    #[serde(skip)]
    ids: HashMap<Uuid, String>,
}

/// [`MetadataImage`] as stored (snapshots) and sent (observers): without derived indexes,
/// which deserializing rebuilds.
#[derive(Deserialize)]
struct StoredImage {
    applied_index: LogIndex,
    applied_term: u64,
    cluster_id: Option<String>,
    brokers: BTreeMap<NodeId, BrokerRegistration>,
    topics: BTreeMap<String, Arc<TopicImage>>,
    next_producer_id: ProducerId,
    #[serde(default)]
    scram: crate::scram::ScramCredentials,
    #[serde(default)]
    acls: Arc<crate::acl::Acls>,
    #[serde(default)]
    client_quotas: Arc<crate::client_quota::ClientQuotas>,
}

impl From<StoredImage> for MetadataImage {
    fn from(stored: StoredImage) -> Self {
        let mut image = MetadataImage {
            applied_index: stored.applied_index,
            applied_term: stored.applied_term,
            cluster_id: stored.cluster_id,
            brokers: stored.brokers,
            topics: stored.topics,
            next_producer_id: stored.next_producer_id,
            scram: stored.scram,
            acls: stored.acls,
            client_quotas: stored.client_quotas,
            ids: HashMap::new(),
        };
        image.reindex();
        image
    }
}

impl Default for MetadataImage {
    fn default() -> Self {
        Self {
            applied_index: LogIndex(0),
            applied_term: 0,
            cluster_id: None,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            next_producer_id: ProducerId(0),
            scram: Default::default(),
            acls: Default::default(),
            client_quotas: Default::default(),
            ids: HashMap::new(),
        }
    }
}

impl MetadataImage {
    fn reindex(&mut self) {
        self.ids = self
            .topics
            .values()
            .map(|t| (t.id, t.name.clone()))
            .collect();
    }

    /// Apply one raft entry's records, in order; one outcome per record.
    pub fn apply_entry(
        &mut self,
        index: LogIndex,
        term: u64,
        records: &[MetadataRecord],
    ) -> Vec<Result<(), Rejected>> {
        assert!(index > self.applied_index, "entries apply in log order");
        let outcomes = records.iter().map(|r| self.apply(index, r)).collect();
        self.applied_index = index;
        self.applied_term = term;
        debug_assert_eq!(self.check_invariants(), Ok(()));
        outcomes
    }

    /// Mark an entry without records (a new leader's empty entry) as applied.
    pub fn skip_entry(&mut self, index: LogIndex, term: u64) {
        assert!(index > self.applied_index, "entries apply in log order");
        self.applied_index = index;
        self.applied_term = term;
    }

    /// A SCRAM credential record (KRaft's UserScramCredentialRecord and its removal; a removal
    /// of what is gone is stale, as Kafka's replay refuses it).
    fn apply_scram(&mut self, record: &MetadataRecord) -> Result<(), Rejected> {
        use crate::scram::ScramChange;
        let change = match record {
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                credential,
            } => ScramChange::Upsert(name.clone(), *mechanism, credential.clone()),
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                let exists = self
                    .scram
                    .get(name)
                    .is_some_and(|c| c.contains_key(mechanism));
                if !exists {
                    return Err(Rejected::Stale(format!(
                        "no {} credential for user {name}",
                        mechanism.name()
                    )));
                }
                ScramChange::Remove(name.clone(), *mechanism)
            }
            _ => unreachable!("not a SCRAM record"),
        };
        crate::scram::apply(&mut self.scram, &[change]);
        Ok(())
    }

    /// An ACL record (KRaft's AccessControlEntryRecord and its removal): adding a binding that
    /// exists changes nothing; removing one that is gone is stale.
    fn apply_acl(&mut self, record: &MetadataRecord) -> Result<(), Rejected> {
        use crate::acl::AclChange;
        let change = match record {
            MetadataRecord::AccessControlEntry { binding } => AclChange::Add(binding.clone()),
            MetadataRecord::RemoveAccessControlEntry { binding } => {
                if !self.acls.contains(binding) {
                    return Err(Rejected::Stale(format!("no ACL {binding:?}")));
                }
                AclChange::Remove(binding.clone())
            }
            _ => unreachable!("not an ACL record"),
        };
        crate::acl::apply(Arc::make_mut(&mut self.acls), &[change]);
        Ok(())
    }

    fn apply(&mut self, index: LogIndex, record: &MetadataRecord) -> Result<(), Rejected> {
        match record {
            MetadataRecord::ClusterInit { cluster_id } => match &self.cluster_id {
                Some(_) => Err(Rejected::Stale("cluster id already set".into())),
                None => {
                    self.cluster_id = Some(cluster_id.clone());
                    Ok(())
                }
            },
            MetadataRecord::RegisterBroker(identity) => {
                let epoch = BrokerEpoch(i64::try_from(index.0).expect("log index fits i64"));
                let registration = BrokerRegistration::new(identity, epoch);
                self.brokers.insert(identity.node_id, registration);
                Ok(())
            }
            MetadataRecord::FenceBroker {
                node_id,
                broker_epoch,
            } => self.set_fenced(*node_id, *broker_epoch, true),
            MetadataRecord::UnfenceBroker {
                node_id,
                broker_epoch,
            } => self.set_fenced(*node_id, *broker_epoch, false),
            MetadataRecord::Topic {
                name,
                topic_id,
                internal,
                configs,
                partitions,
            } => self.create_topic(name, *topic_id, *internal, configs, partitions),
            MetadataRecord::RemoveTopic { topic_id } => {
                let name = self.ids.remove(topic_id).ok_or(Rejected::UnknownTopic)?;
                self.topics.remove(&name);
                Ok(())
            }
            MetadataRecord::Partitions {
                topic_id,
                expected_count,
                partitions,
            } => self.add_partitions(*topic_id, *expected_count, partitions),
            MetadataRecord::TopicConfigs { topic_id, changes } => {
                self.change_configs(*topic_id, changes)
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition,
                expected_leader_epoch,
                expected_partition_epoch,
                leader,
                isr,
            } => {
                let expected = (*expected_leader_epoch, *expected_partition_epoch);
                self.change_partition(*topic_id, *partition, expected, *leader, isr)
            }
            MetadataRecord::ProducerIds {
                node_id: _,
                first,
                count,
            } => self.take_producer_ids(*first, *count),
            MetadataRecord::PartitionReassignment(change) => self.reassign(change),
            MetadataRecord::UserScramCredential { .. }
            | MetadataRecord::RemoveUserScramCredential { .. } => self.apply_scram(record),
            MetadataRecord::AccessControlEntry { .. }
            | MetadataRecord::RemoveAccessControlEntry { .. } => self.apply_acl(record),
            // Kafka's replay: setting or removing is always applied (removing what is gone
            // changes nothing).
            MetadataRecord::ClientQuota(change) => {
                let quotas = Arc::make_mut(&mut self.client_quotas);
                crate::client_quota::apply(quotas, std::slice::from_ref(change));
                Ok(())
            }
        }
    }

    fn change_configs(
        &mut self,
        topic_id: Uuid,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<(), Rejected> {
        let topic = self.topic_mut(topic_id)?;
        for (key, value) in changes {
            match value {
                Some(value) => topic.configs.insert(key.clone(), value.clone()),
                None => topic.configs.remove(key),
            };
        }
        Ok(())
    }

    fn take_producer_ids(&mut self, first: ProducerId, count: i64) -> Result<(), Rejected> {
        if first != self.next_producer_id {
            return Err(Rejected::Stale(format!(
                "producer id block at {}, next free is {}",
                first.0, self.next_producer_id.0
            )));
        }
        if count < 1 {
            return Err(Rejected::Invalid(format!("producer id block of {count}")));
        }
        let next = first
            .0
            .checked_add(count)
            .ok_or_else(|| Rejected::Invalid("producer ids exhausted".into()))?;
        self.next_producer_id = ProducerId(next);
        Ok(())
    }

    fn set_fenced(
        &mut self,
        node_id: NodeId,
        epoch: BrokerEpoch,
        fenced: bool,
    ) -> Result<(), Rejected> {
        let broker = self
            .brokers
            .get_mut(&node_id)
            .ok_or_else(|| Rejected::Stale(format!("broker {node_id} is not registered")))?;
        if broker.epoch != epoch {
            return Err(Rejected::Stale(format!(
                "broker {node_id} registration {} is not {}",
                broker.epoch.0, epoch.0
            )));
        }
        if broker.fenced == fenced {
            return Err(Rejected::Stale(format!(
                "broker {node_id} already {}",
                if fenced { "fenced" } else { "unfenced" }
            )));
        }
        broker.fenced = fenced;
        Ok(())
    }

    fn create_topic(
        &mut self,
        name: &str,
        topic_id: Uuid,
        internal: bool,
        configs: &BTreeMap<String, String>,
        partitions: &[PartitionAssignment],
    ) -> Result<(), Rejected> {
        if self.topics.contains_key(name) {
            return Err(Rejected::TopicExists(name.to_string()));
        }
        if topic_id.is_nil() || self.ids.contains_key(&topic_id) {
            return Err(Rejected::Invalid(format!("topic id {topic_id} is taken")));
        }
        if partitions.is_empty() || partitions.len() > PARTITIONS_PER_TOPIC_MAX {
            return Err(Rejected::Invalid(format!(
                "{} partitions",
                partitions.len()
            )));
        }
        let partitions = partitions
            .iter()
            .map(new_partition)
            .collect::<Result<Vec<_>, _>>()?;
        let topic = TopicImage {
            id: topic_id,
            name: name.to_string(),
            internal,
            configs: configs.clone(),
            partitions,
        };
        self.ids.insert(topic_id, name.to_string());
        self.topics.insert(name.to_string(), Arc::new(topic));
        Ok(())
    }

    fn add_partitions(
        &mut self,
        topic_id: Uuid,
        expected_count: u32,
        partitions: &[PartitionAssignment],
    ) -> Result<(), Rejected> {
        let topic = self.topic_mut(topic_id)?;
        if topic.partitions.len() != expected_count as usize {
            return Err(Rejected::Stale(format!(
                "topic has {} partitions, not {expected_count}",
                topic.partitions.len()
            )));
        }
        if partitions.is_empty()
            || topic.partitions.len() + partitions.len() > PARTITIONS_PER_TOPIC_MAX
        {
            return Err(Rejected::Invalid(format!(
                "{} more partitions",
                partitions.len()
            )));
        }
        let new = partitions
            .iter()
            .map(new_partition)
            .collect::<Result<Vec<_>, _>>()?;
        topic.partitions.extend(new);
        Ok(())
    }

    fn change_partition(
        &mut self,
        topic_id: Uuid,
        partition: u32,
        (expected_leader_epoch, expected_partition_epoch): (LeaderEpoch, Option<PartitionEpoch>),
        leader: Option<NodeId>,
        isr: &[NodeId],
    ) -> Result<(), Rejected> {
        let topic = self.topic_mut(topic_id)?;
        let state = topic
            .partitions
            .get_mut(partition as usize)
            .ok_or(Rejected::UnknownTopic)?;
        if state.leader_epoch != expected_leader_epoch {
            return Err(Rejected::Stale(format!(
                "leader epoch is {}, not {}",
                state.leader_epoch.0, expected_leader_epoch.0
            )));
        }
        if let Some(expected) = expected_partition_epoch.filter(|e| *e != state.partition_epoch) {
            return Err(Rejected::Stale(format!(
                "partition epoch is {}, not {}",
                state.partition_epoch.0, expected.0
            )));
        }
        check_membership(&state.replicas, isr, leader)?;
        if state.leader == leader && state.isr == isr {
            return Err(Rejected::Stale("no change".into()));
        }
        if state.leader != leader {
            state.leader_epoch = state.leader_epoch.next();
        }
        state.leader = leader;
        state.isr = isr.to_vec();
        state.partition_epoch = state.partition_epoch.next();
        Ok(())
    }

    fn reassign(&mut self, change: &PartitionReassignment) -> Result<(), Rejected> {
        let topic = self.topic_mut(change.topic_id)?;
        let state = topic
            .partitions
            .get_mut(change.partition as usize)
            .ok_or(Rejected::UnknownTopic)?;
        if (state.leader_epoch, state.partition_epoch)
            != (
                change.expected_leader_epoch,
                change.expected_partition_epoch,
            )
        {
            return Err(Rejected::Stale(format!(
                "epochs are {}/{}, not {}/{}",
                state.leader_epoch.0,
                state.partition_epoch.0,
                change.expected_leader_epoch.0,
                change.expected_partition_epoch.0
            )));
        }
        check_membership(&change.replicas, &change.isr, change.leader)?;
        check_reassignment(&change.replicas, &change.adding, &change.removing)?;
        if state.leader != change.leader {
            state.leader_epoch = state.leader_epoch.next();
        }
        state.replicas.clone_from(&change.replicas);
        state.isr.clone_from(&change.isr);
        state.leader = change.leader;
        state.adding_replicas.clone_from(&change.adding);
        state.removing_replicas.clone_from(&change.removing);
        state.partition_epoch = state.partition_epoch.next();
        Ok(())
    }

    fn topic_mut(&mut self, topic_id: Uuid) -> Result<&mut TopicImage, Rejected> {
        let name = self.ids.get(&topic_id).ok_or(Rejected::UnknownTopic)?;
        let topic = self.topics.get_mut(name).ok_or(Rejected::UnknownTopic)?;
        Ok(Arc::make_mut(topic))
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicImage>> {
        self.topics.get(self.ids.get(&id)?)
    }

    /// A registered, unfenced broker.
    pub fn live_broker(&self, node_id: NodeId) -> Option<&BrokerRegistration> {
        self.brokers.get(&node_id).filter(|b| !b.fenced)
    }

    /// Registered, unfenced brokers, by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// The partition's leader if it is a live broker (what clients are told).
    pub fn live_leader(&self, state: &PartitionState) -> Option<NodeId> {
        state.leader.filter(|l| self.live_broker(*l).is_some())
    }

    /// A partition by topic name and index.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionState> {
        let index = usize::try_from(partition).ok()?;
        self.topics.get(topic)?.partitions.get(index)
    }

    /// A stable digest of the replicated state (tests compare nodes with it).
    pub fn digest(&self) -> u32 {
        crc32c::crc32c(&serde_json::to_vec(self).expect("image serializes"))
    }

    /// The invariants of the module doc.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.ids.len() != self.topics.len() {
            return Err(format!(
                "{} ids for {} topics",
                self.ids.len(),
                self.topics.len()
            ));
        }
        for (name, topic) in &self.topics {
            if self.ids.get(&topic.id) != Some(name) {
                return Err(format!("topic {name}: id index disagrees"));
            }
            for (index, p) in topic.partitions.iter().enumerate() {
                check_membership(&p.replicas, &p.isr, p.leader)
                    .and_then(|()| {
                        check_reassignment(&p.replicas, &p.adding_replicas, &p.removing_replicas)
                    })
                    .map_err(|e| format!("{name}-{index}: {e}"))?;
            }
        }
        Ok(())
    }
}

fn new_partition(assignment: &PartitionAssignment) -> Result<PartitionState, Rejected> {
    check_membership(&assignment.replicas, &assignment.isr, assignment.leader)?;
    Ok(PartitionState {
        replicas: assignment.replicas.clone(),
        isr: assignment.isr.clone(),
        leader: assignment.leader,
        leader_epoch: LeaderEpoch(0),
        partition_epoch: PartitionEpoch(0),
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    })
}

/// Adding and removing replicas are replicas, distinct from each other, and leave a target.
fn check_reassignment(
    replicas: &[NodeId],
    adding: &[NodeId],
    removing: &[NodeId],
) -> Result<(), Rejected> {
    let within = |ids: &[NodeId]| ids.iter().all(|r| replicas.contains(r));
    if !within(adding) || !within(removing) || adding.iter().any(|r| removing.contains(r)) {
        return Err(Rejected::Invalid(format!(
            "adding {adding:?} / removing {removing:?} of replicas {replicas:?}"
        )));
    }
    if removing.len() >= replicas.len() {
        return Err(Rejected::Invalid(format!(
            "removing every replica of {replicas:?}"
        )));
    }
    Ok(())
}

/// Replicas non-empty and distinct, `isr` ⊆ `replicas` and distinct, leader ∈ `isr`.
fn check_membership(
    replicas: &[NodeId],
    isr: &[NodeId],
    leader: Option<NodeId>,
) -> Result<(), Rejected> {
    let distinct = |ids: &[NodeId]| {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.windows(2).all(|w| w[0] != w[1])
    };
    if replicas.is_empty() || !distinct(replicas) {
        return Err(Rejected::Invalid(format!("replicas {replicas:?}")));
    }
    if !distinct(isr) || !isr.iter().all(|r| replicas.contains(r)) {
        return Err(Rejected::Invalid(format!(
            "isr {isr:?} of replicas {replicas:?}"
        )));
    }
    if let Some(leader) = leader {
        if !isr.contains(&leader) {
            return Err(Rejected::Invalid(format!(
                "leader {leader} not in isr {isr:?}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(node: i32) -> MetadataRecord {
        MetadataRecord::RegisterBroker(BrokerIdentity {
            node_id: NodeId(node),
            incarnation_id: Uuid::from_u128(node as u128),
            log_dir_id: Uuid::from_u128(100 + node as u128),
            endpoint: Endpoint {
                host: "127.0.0.1".into(),
                port: 9000 + node as u16,
            },
            rack: None,
            replica_secret_sha256: None,
            listeners: Default::default(),
        })
    }

    fn topic(name: &str, id: u128, leaders: &[i32]) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: Uuid::from_u128(id),
            internal: false,
            configs: BTreeMap::new(),
            partitions: leaders
                .iter()
                .map(|l| PartitionAssignment {
                    replicas: vec![NodeId(*l)],
                    isr: vec![NodeId(*l)],
                    leader: Some(NodeId(*l)),
                })
                .collect(),
        }
    }

    fn apply(image: &mut MetadataImage, records: Vec<MetadataRecord>) -> Vec<Result<(), Rejected>> {
        let index = LogIndex(image.applied_index.0 + 1);
        image.apply_entry(index, 1, &records)
    }

    #[test]
    fn registration_epoch_is_the_log_index_and_fencing_checks_it() {
        let mut image = MetadataImage::default();
        apply(&mut image, vec![]);
        apply(&mut image, vec![register(1)]);
        let epoch = image.brokers[&NodeId(1)].epoch;
        assert_eq!(epoch, BrokerEpoch(2));
        assert!(
            image.brokers[&NodeId(1)].fenced,
            "a registration starts fenced"
        );
        let unfence = |e| MetadataRecord::UnfenceBroker {
            node_id: NodeId(1),
            broker_epoch: e,
        };
        assert!(matches!(
            apply(&mut image, vec![unfence(BrokerEpoch(1))])[0],
            Err(Rejected::Stale(_))
        ));
        assert_eq!(apply(&mut image, vec![unfence(epoch)]), vec![Ok(())]);
        assert!(image.live_broker(NodeId(1)).is_some());
        // A re-registration (restart) has a new epoch and starts fenced again.
        apply(&mut image, vec![register(1)]);
        assert_eq!(image.brokers[&NodeId(1)].epoch, BrokerEpoch(5));
        assert!(image.live_broker(NodeId(1)).is_none());
    }

    #[test]
    fn racing_topic_creations_apply_once() {
        let mut image = MetadataImage::default();
        let outcomes = apply(&mut image, vec![topic("t", 1, &[1]), topic("t", 2, &[2])]);
        assert_eq!(outcomes[0], Ok(()));
        assert_eq!(outcomes[1], Err(Rejected::TopicExists("t".into())));
        assert_eq!(image.topics["t"].id, Uuid::from_u128(1));
        assert_eq!(
            apply(&mut image, vec![topic("u", 1, &[1])])[0],
            Err(Rejected::Invalid(format!(
                "topic id {} is taken",
                Uuid::from_u128(1)
            )))
        );
    }

    #[test]
    fn partition_change_bumps_epochs_and_refuses_stale_decisions() {
        let mut image = MetadataImage::default();
        apply(&mut image, vec![topic("t", 1, &[1])]);
        let change = |expected, leader: Option<i32>| MetadataRecord::PartitionChange {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            expected_leader_epoch: LeaderEpoch(expected),
            expected_partition_epoch: None,
            leader: leader.map(NodeId),
            isr: vec![NodeId(1)],
        };
        assert_eq!(apply(&mut image, vec![change(0, None)]), vec![Ok(())]);
        let p = image.partition("t", 0).unwrap();
        assert_eq!(
            (p.leader, p.leader_epoch.0, p.partition_epoch.0),
            (None, 1, 1)
        );
        // Decided on the old image: rejected, state unchanged.
        assert!(matches!(
            apply(&mut image, vec![change(0, Some(1))])[0],
            Err(Rejected::Stale(_))
        ));
        assert_eq!(apply(&mut image, vec![change(1, Some(1))]), vec![Ok(())]);
        let p = image.partition("t", 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch.0), (Some(NodeId(1)), 2));
        // A leader outside the ISR breaks an invariant: never applied.
        let bad = MetadataRecord::PartitionChange {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            expected_leader_epoch: LeaderEpoch(2),
            expected_partition_epoch: None,
            leader: Some(NodeId(2)),
            isr: vec![NodeId(1)],
        };
        assert!(matches!(
            apply(&mut image, vec![bad])[0],
            Err(Rejected::Invalid(_))
        ));
    }

    #[test]
    fn partitions_grow_only_from_the_count_decided_on() {
        let mut image = MetadataImage::default();
        apply(&mut image, vec![topic("t", 1, &[1])]);
        let grow = |expected| MetadataRecord::Partitions {
            topic_id: Uuid::from_u128(1),
            expected_count: expected,
            partitions: vec![PartitionAssignment {
                replicas: vec![NodeId(2)],
                isr: vec![NodeId(2)],
                leader: Some(NodeId(2)),
            }],
        };
        let outcomes = apply(&mut image, vec![grow(1), grow(1)]);
        assert_eq!(outcomes[0], Ok(()));
        assert!(matches!(outcomes[1], Err(Rejected::Stale(_))));
        assert_eq!(image.topics["t"].partitions.len(), 2);
    }

    #[test]
    fn remove_and_configs_and_producer_ids() {
        let mut image = MetadataImage::default();
        apply(&mut image, vec![topic("t", 1, &[1])]);
        let configs = MetadataRecord::TopicConfigs {
            topic_id: Uuid::from_u128(1),
            changes: BTreeMap::from([("retention.ms".to_string(), Some("5".to_string()))]),
        };
        apply(&mut image, vec![configs]);
        assert_eq!(image.topics["t"].configs["retention.ms"], "5");
        let ids = |first| MetadataRecord::ProducerIds {
            node_id: NodeId(1),
            first: ProducerId(first),
            count: 1000,
        };
        assert!(apply(&mut image, vec![ids(0), ids(0)])[1].is_err());
        assert_eq!(image.next_producer_id, ProducerId(1000));
        let remove = MetadataRecord::RemoveTopic {
            topic_id: Uuid::from_u128(1),
        };
        assert_eq!(apply(&mut image, vec![remove.clone()]), vec![Ok(())]);
        assert_eq!(
            apply(&mut image, vec![remove]),
            vec![Err(Rejected::UnknownTopic)]
        );
        assert!(image.topics.is_empty());
        assert_eq!(image.check_invariants(), Ok(()));
    }

    #[test]
    fn deserializing_rebuilds_the_id_index() {
        let mut image = MetadataImage::default();
        apply(&mut image, vec![register(1), topic("t", 1, &[1])]);
        let bytes = serde_json::to_vec(&image).unwrap();
        let back: MetadataImage = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, image);
        assert_eq!(back.digest(), image.digest());
        assert!(back.topic_by_id(Uuid::from_u128(1)).is_some());
    }
}
