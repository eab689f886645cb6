//! The active controller's decisions (KRaft's QuorumController, minus the I/O): turn broker
//! requests and the passage of time into metadata records. Pure: the caller passes the image and
//! the time; records reach the image only through the log, so a decision made here is never
//! trusted until it is applied (and [`crate::image`] rejects one made on a stale image).
//!
//! | input                                  | records proposed                                |
//! |----------------------------------------|-------------------------------------------------|
//! | RegisterBroker (new or restarted)      | RegisterBroker + leadership moved off it         |
//! | Heartbeat, fenced, caught up           | UnfenceBroker + leaderless partitions it can lead |
//! | Heartbeat with want_shut_down          | FenceBroker + leadership moved off it            |
//! | no heartbeat for the session timeout   | FenceBroker + leadership moved off it            |
//! | CreateTopics / CreatePartitions        | Topic / Partitions, replicas round-robin         |
//! | DeleteTopics, AlterTopicConfigs        | RemoveTopic, TopicConfigs                        |
//! | first tick of the first leader         | ClusterInit                                      |
//! | ElectLeaders                           | PartitionChange per elected partition            |
//! | leader imbalance check (periodic)      | PartitionChange back to preferred replicas       |
//! | AlterPartitionReassignments            | PartitionReassignment (start, replace, cancel)   |
//! | a reassignment's target in the ISR     | PartitionReassignment (the switch)               |
//!
//! Leadership ([`reconcile`]): a partition is led by its first live ISR member in replica order;
//! with no live ISR member it has no leader (LEADER_NOT_AVAILABLE) and keeps its last ISR, so the
//! broker holding its data leads again when it returns; unless `unclean.leader.election.enable`
//! (the topic's, else the controller's) allows an unclean election: then its first live replica
//! leads, with an ISR of itself, and what only the old ISR held is lost (Kafka's rule).
//!
//! ISR at creation is every replica, as Kafka's: a new partition is empty, so each of its (live)
//! replicas holds all of it. A leader shrinks it through AlterPartition once a follower has not
//! caught up for `replica.lag.time.max.ms` (`rill_server::replication`). Starting at the leader
//! alone made a topic with `min.insync.replicas` above 1 refuse acks=all writes until its
//! followers had fetched once.

use std::collections::{BTreeMap, BTreeSet};

use rill_types::{ErrorCode, ProducerId};
use uuid::Uuid;

use crate::image::{MetadataImage, PartitionState, PARTITIONS_PER_TOPIC_MAX};
use crate::placement::{assign, PlacementError};
use crate::record::{BrokerIdentity, MetadataRecord, PartitionAssignment};
use crate::request::{ControllerRequest, ControllerResponse, NewTopic, TopicRef, TopicResult};
use crate::types::{BrokerEpoch, LogIndex, NodeId};

/// Producer ids handed to a broker per AllocateProducerIds (Kafka's block size).
pub const PRODUCER_ID_BLOCK: i64 = 1000;

/// The controller's settings (Kafka's names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker without a heartbeat this long is fenced.
    pub session_timeout_ms: u64,
    /// `default.replication.factor`: replicas of a topic created without a factor.
    pub default_replication_factor: u16,
    /// `unclean.leader.election.enable`: topics without their own setting allow unclean
    /// elections ([`crate::elect_leaders`]).
    pub unclean_leader_election: bool,
    /// `auto.leader.rebalance.enable`: move leadership back to preferred replicas.
    pub auto_leader_rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms: how often the rebalance looks.
    pub leader_imbalance_check_interval_ms: u64,
    /// `leader.imbalance.per.broker.percentage`: the imbalance a broker may have untouched.
    pub leader_imbalance_per_broker_percentage: u32,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            session_timeout_ms: 9000,
            default_replication_factor: 1,
            unclean_leader_election: false,
            auto_leader_rebalance: true,
            leader_imbalance_check_interval_ms: 300_000,
            leader_imbalance_per_broker_percentage: 10,
        }
    }
}

/// What to do with a request.
#[derive(Debug)]
pub enum Decision {
    /// Answer now; nothing to write.
    Reply(ControllerResponse),
    /// Write these records as one entry; answer with `plan` once it is applied.
    Propose {
        /// The entry's records.
        records: Vec<MetadataRecord>,
        /// How to build the answer from the outcomes.
        plan: ReplyPlan,
    },
}

impl Decision {
    /// Whether it answers without writing anything.
    pub fn is_reply(&self) -> bool {
        matches!(self, Decision::Reply(_))
    }
}

/// How to answer a request once its entry is applied.
#[derive(Debug, Clone)]
pub enum ReplyPlan {
    /// `Registered` with the entry's index as the broker epoch.
    Registered,
    /// `Heartbeat` with the broker's fenced state after the entry.
    Heartbeat {
        /// The broker.
        node_id: NodeId,
        /// It asked to shut down.
        shutting_down: bool,
    },
    /// `Topics`, one result per slot.
    Topics(Vec<TopicSlot>),
    /// `ProducerIds` if the record applied.
    ProducerIds {
        /// First id.
        first: ProducerId,
        /// How many.
        count: i64,
    },
    /// `PartitionResults`, one result per slot (ElectLeaders).
    Elections(Vec<crate::elect_leaders::ElectionSlot>),
    /// `PartitionResults`, one result per slot (AlterPartitionReassignments).
    Reassignments(Vec<crate::reassign::ReassignSlot>),
    /// `Partition` with the partition's state after the entry (AlterPartition).
    Partition {
        /// The topic.
        topic_id: Uuid,
        /// The partition.
        partition: u32,
    },
    /// `Scram` with these results (decided before the entry; a removal overtaken by another
    /// leaves the same state).
    Scram(Vec<crate::scram::ScramResult>),
    /// `Acls` with these matches (decided before the entry).
    Acls(Vec<Vec<crate::acl::AclBinding>>),
    /// `ClientQuotas` with these outcomes (decided before the entry).
    ClientQuotas(crate::client_quota::AlterResults),
    /// Nobody waits (the controller's own decisions).
    Nothing,
}

/// One topic's place in a `Topics` answer.
#[derive(Debug, Clone)]
pub enum TopicSlot {
    /// Decided without writing (refused, or validate_only).
    Done(TopicResult),
    /// The outcome of record number `record` of the entry.
    Record {
        /// Position in the entry.
        record: usize,
        /// The topic as the request named it.
        name: String,
        /// Its id.
        topic_id: Uuid,
    },
}

/// The active controller's memory: broker sessions (not in the log: a new controller gives
/// every broker a fresh session) and what it proposed but has not seen applied.
pub struct Controller {
    config: ControllerConfig,
    /// Last heartbeat per broker, in the caller's milliseconds.
    sessions: BTreeMap<NodeId, u64>,
    /// End of the producer-id blocks proposed so far (so racing requests get distinct blocks).
    producer_ids_proposed_until: ProducerId,
    /// The image index and expiry set of the last reconciliation (skip when nothing changed).
    last_reconciled: Option<(LogIndex, BTreeSet<NodeId>)>,
    /// When the next leader-imbalance check is due (`None` until the first tick).
    next_rebalance_ms: Option<u64>,
    rng: fastrand::Rng,
}

impl Controller {
    /// A controller with a seeded random source (placement start points and new ids).
    pub fn new(config: ControllerConfig, seed: u64) -> Self {
        Self {
            config,
            sessions: BTreeMap::new(),
            producer_ids_proposed_until: ProducerId(0),
            last_reconciled: None,
            next_rebalance_ms: None,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// This node just became the active controller: every registered broker starts a fresh
    /// session now (KIP-631), and nothing proposed earlier is assumed.
    pub fn on_elected(&mut self, image: &MetadataImage, now_ms: u64) {
        self.sessions = image.brokers.keys().map(|id| (*id, now_ms)).collect();
        self.producer_ids_proposed_until = ProducerId(0);
        self.last_reconciled = None;
        self.next_rebalance_ms = None;
    }

    /// Decide a request against the applied image.
    pub fn decide(
        &mut self,
        image: &MetadataImage,
        request: &ControllerRequest,
        now_ms: u64,
    ) -> Decision {
        match request {
            ControllerRequest::RegisterBroker(identity) => self.register(image, identity, now_ms),
            ControllerRequest::BrokerHeartbeat {
                node_id,
                broker_epoch,
                applied_index,
                want_shut_down,
            } => self.heartbeat(
                image,
                (*node_id, *broker_epoch),
                *applied_index,
                *want_shut_down,
                now_ms,
            ),
            ControllerRequest::CreateTopics {
                topics,
                validate_only,
            } => self.create_topics(image, topics, *validate_only),
            ControllerRequest::DeleteTopics { topics } => delete_topics(image, topics),
            ControllerRequest::CreatePartitions {
                topics,
                validate_only,
            } => self.create_partitions(image, topics, *validate_only),
            ControllerRequest::AlterTopicConfigs { topic, changes } => {
                alter_configs(image, topic, changes)
            }
            ControllerRequest::AllocateProducerIds { node_id } => {
                self.allocate_producer_ids(image, *node_id)
            }
            ControllerRequest::AlterPartition(alter) => {
                crate::alter_partition::decide(image, alter)
            }
            ControllerRequest::ElectLeaders {
                election,
                partitions,
            } => {
                crate::elect_leaders::decide(image, &self.config, *election, partitions.as_deref())
            }
            ControllerRequest::AlterPartitionReassignments { topics } => {
                crate::reassign::decide(image, topics)
            }
            ControllerRequest::AlterUserScramCredentials {
                deletions,
                upsertions,
            } => alter_scram(image, deletions, upsertions),
            ControllerRequest::CreateAcls { bindings } => {
                let new = crate::acl::decide_create(&image.acls, bindings);
                acl_decision(Vec::new(), new, |binding| {
                    MetadataRecord::AccessControlEntry { binding }
                })
            }
            ControllerRequest::DeleteAcls { filters } => {
                let (matched, gone) = crate::acl::decide_delete(&image.acls, filters);
                acl_decision(matched, gone, |binding| {
                    MetadataRecord::RemoveAccessControlEntry { binding }
                })
            }
            ControllerRequest::AlterClientQuotas {
                alterations,
                validate_only,
            } => alter_client_quotas(image, alterations, *validate_only),
            ControllerRequest::FetchImage { applied_index } => {
                let newer = image.applied_index > *applied_index;
                Decision::Reply(ControllerResponse::Image {
                    image: newer.then(|| Box::new(image.clone())),
                })
            }
        }
    }

    fn allocate_producer_ids(&mut self, image: &MetadataImage, node_id: NodeId) -> Decision {
        let first = image.next_producer_id.max(self.producer_ids_proposed_until);
        self.producer_ids_proposed_until = ProducerId(first.0 + PRODUCER_ID_BLOCK);
        Decision::Propose {
            records: vec![MetadataRecord::ProducerIds {
                node_id,
                first,
                count: PRODUCER_ID_BLOCK,
            }],
            plan: ReplyPlan::ProducerIds {
                first,
                count: PRODUCER_ID_BLOCK,
            },
        }
    }

    fn register(
        &mut self,
        image: &MetadataImage,
        identity: &BrokerIdentity,
        now_ms: u64,
    ) -> Decision {
        let node_id = &identity.node_id;
        if let Some(existing) = image.brokers.get(node_id) {
            if existing.incarnation_id == identity.incarnation_id {
                // A retry of a registration that already applied.
                return Decision::Reply(ControllerResponse::Registered {
                    broker_epoch: existing.epoch,
                });
            }
            if !existing.fenced
                && existing.log_dir_id != identity.log_dir_id
                && self.alive(*node_id, now_ms)
            {
                return Decision::Reply(ControllerResponse::error(
                    ErrorCode::DuplicateBrokerRegistration,
                    format!(
                        "node.id={node_id} is registered by another live broker (another data \
                         directory, heartbeating at {})",
                        existing.endpoint
                    ),
                ));
            }
        }
        let node = *node_id;
        self.sessions.insert(node, now_ms);
        let mut records = vec![MetadataRecord::RegisterBroker(identity.clone())];
        records.extend(reconcile(image, &self.config, &|n| {
            n != node && image.live_broker(n).is_some()
        }));
        Decision::Propose {
            records,
            plan: ReplyPlan::Registered,
        }
    }

    fn heartbeat(
        &mut self,
        image: &MetadataImage,
        (node_id, broker_epoch): (NodeId, BrokerEpoch),
        applied_index: LogIndex,
        want_shut_down: bool,
        now_ms: u64,
    ) -> Decision {
        let Some(broker) = image.brokers.get(&node_id) else {
            return Decision::Reply(ControllerResponse::error(
                ErrorCode::BrokerIdNotRegistered,
                format!("broker {node_id} is not registered"),
            ));
        };
        if broker.epoch != broker_epoch {
            return Decision::Reply(ControllerResponse::error(
                ErrorCode::StaleBrokerEpoch,
                format!(
                    "broker {node_id} epoch {} is not {}",
                    broker_epoch.0, broker.epoch.0
                ),
            ));
        }
        self.sessions.insert(node_id, now_ms);
        let plan = ReplyPlan::Heartbeat {
            node_id,
            shutting_down: want_shut_down,
        };
        let caught_up = i64::try_from(applied_index.0).unwrap_or(i64::MAX) >= broker.epoch.0;
        let (fence, live): (MetadataRecord, &dyn Fn(NodeId) -> bool) = match () {
            _ if want_shut_down && !broker.fenced => (
                MetadataRecord::FenceBroker {
                    node_id,
                    broker_epoch,
                },
                &|n| n != node_id && image.live_broker(n).is_some(),
            ),
            _ if !want_shut_down && broker.fenced && caught_up => (
                MetadataRecord::UnfenceBroker {
                    node_id,
                    broker_epoch,
                },
                &|n| n == node_id || image.live_broker(n).is_some(),
            ),
            _ => {
                return Decision::Reply(ControllerResponse::Heartbeat {
                    fenced: broker.fenced,
                    should_shut_down: want_shut_down && broker.fenced,
                })
            }
        };
        let mut records = vec![fence];
        records.extend(reconcile(image, &self.config, live));
        Decision::Propose { records, plan }
    }

    fn alive(&self, node_id: NodeId, now_ms: u64) -> bool {
        self.sessions
            .get(&node_id)
            .is_some_and(|last| now_ms.saturating_sub(*last) <= self.config.session_timeout_ms)
    }

    fn create_topics(
        &mut self,
        image: &MetadataImage,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Decision {
        let live: Vec<NodeId> = image.live_brokers().map(|b| b.node_id).collect();
        let mut records = Vec::new();
        let mut slots = Vec::new();
        let mut seen = BTreeSet::new();
        for topic in topics {
            let name = topic.name.as_str();
            if image.topics.contains_key(name) || !seen.insert(name) {
                let message = format!("topic {name} already exists");
                slots.push(TopicSlot::Done(TopicResult::failed(
                    name,
                    ErrorCode::TopicAlreadyExists,
                    message,
                )));
                continue;
            }
            let partitions = topic.partitions as usize;
            if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
                let message =
                    format!("{partitions} partitions is outside 1..={PARTITIONS_PER_TOPIC_MAX}");
                slots.push(TopicSlot::Done(TopicResult::failed(
                    name,
                    ErrorCode::InvalidPartitions,
                    message,
                )));
                continue;
            }
            let factor = topic
                .replication_factor
                .unwrap_or(self.config.default_replication_factor);
            let replicas = match self.place(&live, 0, partitions, factor) {
                Ok(replicas) => replicas,
                Err(e) => {
                    slots.push(TopicSlot::Done(placement_failed(name, e)));
                    continue;
                }
            };
            if validate_only {
                slots.push(TopicSlot::Done(TopicResult::ok(name, Uuid::nil())));
                continue;
            }
            let topic_id = loop {
                let id = self.new_uuid();
                if image.topic_by_id(id).is_none() {
                    break id;
                }
            };
            slots.push(TopicSlot::Record {
                record: records.len(),
                name: name.to_string(),
                topic_id,
            });
            records.push(MetadataRecord::Topic {
                name: name.to_string(),
                topic_id,
                internal: topic.internal,
                configs: topic.configs.clone(),
                partitions: replicas.into_iter().map(led_by_first).collect(),
            });
        }
        propose_or_reply(records, slots)
    }

    fn create_partitions(
        &mut self,
        image: &MetadataImage,
        topics: &[(String, u32)],
        validate_only: bool,
    ) -> Decision {
        let live: Vec<NodeId> = image.live_brokers().map(|b| b.node_id).collect();
        let mut records = Vec::new();
        let mut slots = Vec::new();
        for (name, total) in topics {
            let Some(topic) = image.topics.get(name).filter(|t| !t.internal) else {
                slots.push(TopicSlot::Done(TopicResult::failed(
                    name,
                    ErrorCode::UnknownTopicOrPartition,
                    format!("unknown topic {name}"),
                )));
                continue;
            };
            let (current, total) = (topic.partitions.len(), *total as usize);
            if total <= current || total > PARTITIONS_PER_TOPIC_MAX {
                let message = format!(
                    "topic has {current} partitions; {total} is not more (or above \
                     {PARTITIONS_PER_TOPIC_MAX})"
                );
                slots.push(TopicSlot::Done(TopicResult::failed(
                    name,
                    ErrorCode::InvalidPartitions,
                    message,
                )));
                continue;
            }
            let factor = u16::try_from(topic.partitions[0].replicas.len()).unwrap_or(u16::MAX);
            let replicas = match self.place(&live, current, total - current, factor) {
                Ok(replicas) => replicas,
                Err(e) => {
                    slots.push(TopicSlot::Done(placement_failed(name, e)));
                    continue;
                }
            };
            if validate_only {
                slots.push(TopicSlot::Done(TopicResult::ok(name, topic.id)));
                continue;
            }
            slots.push(TopicSlot::Record {
                record: records.len(),
                name: name.clone(),
                topic_id: topic.id,
            });
            records.push(MetadataRecord::Partitions {
                topic_id: topic.id,
                expected_count: current as u32,
                partitions: replicas.into_iter().map(led_by_first).collect(),
            });
        }
        propose_or_reply(records, slots)
    }

    fn place(
        &mut self,
        live: &[NodeId],
        first: usize,
        count: usize,
        factor: u16,
    ) -> Result<Vec<Vec<NodeId>>, PlacementError> {
        let n = live.len().max(1);
        let start = self.rng.usize(..n);
        let shift = self.rng.usize(..n);
        assign(live, first, count, usize::from(factor), (start, shift))
    }

    fn new_uuid(&mut self) -> Uuid {
        loop {
            let id = uuid::Builder::from_random_bytes(self.rng.u128(..).to_le_bytes()).into_uuid();
            if !id.is_nil() {
                return id;
            }
        }
    }

    /// The controller's own decisions at `now_ms`: the cluster id, expired sessions, and
    /// partitions whose leadership disagrees with which brokers are live.
    pub fn tick(&mut self, image: &MetadataImage, now_ms: u64) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        if image.cluster_id.is_none() {
            records.push(MetadataRecord::ClusterInit {
                cluster_id: self.new_uuid().simple().to_string(),
            });
        }
        for id in image.brokers.keys() {
            self.sessions.entry(*id).or_insert(now_ms);
        }
        let expired: BTreeSet<NodeId> = image
            .live_brokers()
            .filter(|b| !self.alive(b.node_id, now_ms))
            .map(|b| b.node_id)
            .collect();
        for node_id in &expired {
            tracing::info!(broker = node_id.0, "broker session expired: fencing it");
            records.push(MetadataRecord::FenceBroker {
                node_id: *node_id,
                broker_epoch: image.brokers[node_id].epoch,
            });
        }
        let key = (image.applied_index, expired);
        if self.last_reconciled.as_ref() != Some(&key) {
            let dead = &key.1;
            records.extend(reconcile(image, &self.config, &|n| {
                !dead.contains(&n) && image.live_broker(n).is_some()
            }));
            self.last_reconciled = Some(key);
        }
        records.extend(crate::reassign::complete_ready(image));
        // A rebalance change that meets a reconciliation of the same partition is rejected
        // when applied (both name the epoch they were decided on): the log keeps the first.
        if self.rebalance_due(now_ms) {
            records.extend(crate::elect_leaders::rebalance(image, &self.config));
        }
        records
    }

    /// Whether the leader-imbalance check is due now (then the next one is scheduled).
    fn rebalance_due(&mut self, now_ms: u64) -> bool {
        if !self.config.auto_leader_rebalance {
            return false;
        }
        let interval = self.config.leader_imbalance_check_interval_ms;
        let next = *self.next_rebalance_ms.get_or_insert(now_ms + interval);
        if now_ms < next {
            return false;
        }
        self.next_rebalance_ms = Some(now_ms + interval);
        true
    }

    /// Build the answer to a request whose entry applied at `index` with `outcomes`.
    pub fn reply(
        plan: ReplyPlan,
        index: LogIndex,
        outcomes: &[Result<(), crate::image::Rejected>],
        image: &MetadataImage,
    ) -> Option<ControllerResponse> {
        let first_ok = outcomes.first().is_some_and(|o| o.is_ok());
        let response = match plan {
            ReplyPlan::Nothing => return None,
            ReplyPlan::Registered if first_ok => ControllerResponse::Registered {
                broker_epoch: BrokerEpoch(i64::try_from(index.0).expect("index fits i64")),
            },
            ReplyPlan::ProducerIds { first, count } if first_ok => {
                ControllerResponse::ProducerIds { first, count }
            }
            ReplyPlan::Registered | ReplyPlan::ProducerIds { .. } => ControllerResponse::error(
                ErrorCode::RequestTimedOut,
                "the decision was overtaken by another; retry",
            ),
            ReplyPlan::Heartbeat {
                node_id,
                shutting_down,
            } => {
                let fenced = image.brokers.get(&node_id).is_none_or(|b| b.fenced);
                ControllerResponse::Heartbeat {
                    fenced,
                    should_shut_down: shutting_down && fenced,
                }
            }
            ReplyPlan::Partition {
                topic_id,
                partition,
            } => crate::alter_partition::reply(image, (topic_id, partition), first_ok),
            ReplyPlan::Elections(slots) => crate::elect_leaders::reply(image, slots, index),
            ReplyPlan::Reassignments(slots) => crate::reassign::reply(slots, outcomes, index),
            ReplyPlan::Scram(results) => ControllerResponse::Scram { results, index },
            ReplyPlan::Acls(matched) => ControllerResponse::Acls { matched, index },
            ReplyPlan::ClientQuotas(results) => ControllerResponse::ClientQuotas { results, index },
            ReplyPlan::Topics(slots) => ControllerResponse::Topics {
                results: slots
                    .into_iter()
                    .map(|slot| slot_result(slot, outcomes))
                    .collect(),
                index,
            },
        };
        Some(response)
    }
}

/// CreateAcls / DeleteAcls: one record per binding added or removed (`record`'s variant).
fn acl_decision(
    matched: Vec<Vec<crate::acl::AclBinding>>,
    changed: Vec<crate::acl::AclBinding>,
    record: fn(crate::acl::AclBinding) -> MetadataRecord,
) -> Decision {
    if changed.is_empty() {
        return Decision::Reply(ControllerResponse::Acls {
            matched,
            index: LogIndex(0),
        });
    }
    Decision::Propose {
        records: changed.into_iter().map(record).collect(),
        plan: ReplyPlan::Acls(matched),
    }
}

/// AlterClientQuotas: Kafka's decision ([`crate::client_quota::decide_alter`]) on the image's
/// quotas, one ClientQuota record per change (none when validating only).
fn alter_client_quotas(
    image: &MetadataImage,
    alterations: &[crate::client_quota::Alteration],
    validate_only: bool,
) -> Decision {
    let (results, changes) = crate::client_quota::decide_alter(&image.client_quotas, alterations);
    if validate_only || changes.is_empty() {
        return Decision::Reply(ControllerResponse::ClientQuotas {
            results,
            index: LogIndex(0),
        });
    }
    Decision::Propose {
        records: changes
            .into_iter()
            .map(MetadataRecord::ClientQuota)
            .collect(),
        plan: ReplyPlan::ClientQuotas(results),
    }
}

/// AlterUserScramCredentials: Kafka's decision ([`crate::scram::decide_alter`]) on the image's
/// credentials, its changes as KRaft's records.
fn alter_scram(
    image: &MetadataImage,
    deletions: &[crate::scram::ScramDeletion],
    upsertions: &[crate::scram::ScramUpsertion],
) -> Decision {
    use crate::scram::ScramChange;
    let (results, changes) = crate::scram::decide_alter(&image.scram, deletions, upsertions);
    if changes.is_empty() {
        return Decision::Reply(ControllerResponse::Scram {
            results,
            index: LogIndex(0),
        });
    }
    let records = changes
        .into_iter()
        .map(|change| match change {
            ScramChange::Upsert(name, mechanism, credential) => {
                MetadataRecord::UserScramCredential {
                    name,
                    mechanism,
                    credential,
                }
            }
            ScramChange::Remove(name, mechanism) => {
                MetadataRecord::RemoveUserScramCredential { name, mechanism }
            }
        })
        .collect();
    Decision::Propose {
        records,
        plan: ReplyPlan::Scram(results),
    }
}

fn slot_result(slot: TopicSlot, outcomes: &[Result<(), crate::image::Rejected>]) -> TopicResult {
    use crate::image::Rejected;
    match slot {
        TopicSlot::Done(result) => result,
        TopicSlot::Record {
            record,
            name,
            topic_id,
        } => match &outcomes[record] {
            Ok(()) => TopicResult::ok(&name, topic_id),
            Err(Rejected::TopicExists(_)) => TopicResult::failed(
                &name,
                ErrorCode::TopicAlreadyExists,
                format!("topic {name} already exists"),
            ),
            Err(Rejected::UnknownTopic) => TopicResult::failed(
                &name,
                ErrorCode::UnknownTopicOrPartition,
                format!("unknown topic {name}"),
            ),
            Err(e @ Rejected::Stale(_)) => {
                TopicResult::failed(&name, ErrorCode::RequestTimedOut, format!("{e}; retry"))
            }
            Err(e @ Rejected::Invalid(_)) => {
                TopicResult::failed(&name, ErrorCode::InvalidRequest, e.to_string())
            }
        },
    }
}

fn alter_configs(
    image: &MetadataImage,
    topic: &str,
    changes: &BTreeMap<String, Option<String>>,
) -> Decision {
    match image.topics.get(topic).filter(|t| !t.internal) {
        None => topics_reply(vec![TopicResult::failed(
            topic,
            ErrorCode::UnknownTopicOrPartition,
            format!("unknown topic {topic}"),
        )]),
        Some(t) => Decision::Propose {
            records: vec![MetadataRecord::TopicConfigs {
                topic_id: t.id,
                changes: changes.clone(),
            }],
            plan: ReplyPlan::Topics(vec![TopicSlot::Record {
                record: 0,
                name: topic.to_string(),
                topic_id: t.id,
            }]),
        },
    }
}

fn delete_topics(image: &MetadataImage, topics: &[TopicRef]) -> Decision {
    let mut records = Vec::new();
    let mut slots = Vec::new();
    let mut seen = BTreeSet::new();
    for topic in topics {
        let found = match topic {
            TopicRef::Name(name) => image.topics.get(name),
            TopicRef::Id(id) => image.topic_by_id(*id),
        }
        .filter(|t| !t.internal);
        let Some(found) = found else {
            let (name, code) = match topic {
                TopicRef::Name(name) => (name.clone(), ErrorCode::UnknownTopicOrPartition),
                TopicRef::Id(id) => (id.to_string(), ErrorCode::UnknownTopicId),
            };
            let message = format!("unknown topic {name}");
            slots.push(TopicSlot::Done(TopicResult::failed(&name, code, message)));
            continue;
        };
        if !seen.insert(found.id) {
            slots.push(TopicSlot::Done(TopicResult::ok(&found.name, found.id)));
            continue;
        }
        slots.push(TopicSlot::Record {
            record: records.len(),
            name: found.name.clone(),
            topic_id: found.id,
        });
        records.push(MetadataRecord::RemoveTopic { topic_id: found.id });
    }
    propose_or_reply(records, slots)
}

fn propose_or_reply(records: Vec<MetadataRecord>, slots: Vec<TopicSlot>) -> Decision {
    if records.is_empty() {
        let results = slots
            .into_iter()
            .map(|slot| match slot {
                TopicSlot::Done(result) => result,
                TopicSlot::Record { .. } => unreachable!("no records, so no record slots"),
            })
            .collect();
        return topics_reply(results);
    }
    Decision::Propose {
        records,
        plan: ReplyPlan::Topics(slots),
    }
}

fn topics_reply(results: Vec<TopicResult>) -> Decision {
    Decision::Reply(ControllerResponse::Topics {
        results,
        index: LogIndex(0),
    })
}

fn placement_failed(name: &str, e: PlacementError) -> TopicResult {
    TopicResult::failed(name, ErrorCode::InvalidReplicationFactor, e.to_string())
}

/// A new partition on live `replicas`: led by the first, every replica in the ISR (module doc).
fn led_by_first(replicas: Vec<NodeId>) -> PartitionAssignment {
    let leader = replicas[0];
    PartitionAssignment {
        isr: replicas.clone(),
        replicas,
        leader: Some(leader),
    }
}

/// Partition changes that make every partition's leadership agree with `live` (module doc).
pub fn reconcile(
    image: &MetadataImage,
    config: &ControllerConfig,
    live: &dyn Fn(NodeId) -> bool,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let unclean = crate::elect_leaders::unclean_enabled(topic, config);
        for (index, state) in topic.partitions.iter().enumerate() {
            let (leader, isr) = elect(state, unclean, live);
            if leader != state.leader || isr != state.isr {
                records.push(MetadataRecord::PartitionChange {
                    topic_id: topic.id,
                    partition: index as u32,
                    expected_leader_epoch: state.leader_epoch,
                    expected_partition_epoch: None,
                    leader,
                    isr,
                });
            }
        }
    }
    records
}

/// The leader and ISR a partition should have given which brokers are live; `unclean`: a
/// replica outside the ISR may lead when no ISR member is live.
fn elect(
    state: &PartitionState,
    unclean: bool,
    live: &dyn Fn(NodeId) -> bool,
) -> (Option<NodeId>, Vec<NodeId>) {
    if let Some(leader) = state.leader.filter(|l| live(*l)) {
        // A live leader stays; fenced followers leave the ISR.
        let isr = state
            .isr
            .iter()
            .copied()
            .filter(|r| *r == leader || live(*r))
            .collect();
        return (Some(leader), isr);
    }
    let live_isr: Vec<NodeId> = state.isr.iter().copied().filter(|r| live(*r)).collect();
    if live_isr.is_empty() {
        if let Some(first) = state.replicas.iter().copied().find(|r| unclean && live(*r)) {
            tracing::warn!(
                leader = first.0,
                isr = ?state.isr,
                "unclean leader election: a replica outside the ISR leads"
            );
            return (Some(first), vec![first]);
        }
        // No eligible replica: no leader; the last ISR stays so its data comes back with it.
        let isr = match state.leader {
            Some(old) => vec![old],
            None => state.isr.clone(),
        };
        return (None, isr);
    }
    let leader = state
        .replicas
        .iter()
        .copied()
        .find(|r| live_isr.contains(r));
    debug_assert!(leader.is_some(), "live ISR members are replicas");
    (leader, live_isr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Endpoint;

    fn register(node: i32, incarnation: u128, log_dir: u128) -> ControllerRequest {
        ControllerRequest::RegisterBroker(BrokerIdentity {
            node_id: NodeId(node),
            incarnation_id: Uuid::from_u128(incarnation),
            log_dir_id: Uuid::from_u128(log_dir),
            endpoint: Endpoint {
                host: "127.0.0.1".into(),
                port: 9090 + node as u16,
            },
            rack: None,
            replica_secret_sha256: None,
            listeners: Default::default(),
        })
    }

    fn heartbeat(image: &MetadataImage, node: i32, shut_down: bool) -> ControllerRequest {
        ControllerRequest::BrokerHeartbeat {
            node_id: NodeId(node),
            broker_epoch: image.brokers[&NodeId(node)].epoch,
            applied_index: image.applied_index,
            want_shut_down: shut_down,
        }
    }

    /// Decide and apply at once (a one-node log), returning the answer.
    fn run(
        controller: &mut Controller,
        image: &mut MetadataImage,
        request: &ControllerRequest,
        now: u64,
    ) -> ControllerResponse {
        match controller.decide(image, request, now) {
            Decision::Reply(response) => response,
            Decision::Propose { records, plan } => {
                let index = LogIndex(image.applied_index.0 + 1);
                let outcomes = image.apply_entry(index, 1, &records);
                Controller::reply(plan, index, &outcomes, image).unwrap()
            }
        }
    }

    fn beat(
        controller: &mut Controller,
        image: &mut MetadataImage,
        node: i32,
        shut_down: bool,
        now: u64,
    ) -> ControllerResponse {
        let request = heartbeat(image, node, shut_down);
        run(controller, image, &request, now)
    }

    fn tick(controller: &mut Controller, image: &mut MetadataImage, now: u64) {
        let records = controller.tick(image, now);
        if !records.is_empty() {
            let index = LogIndex(image.applied_index.0 + 1);
            image.apply_entry(index, 1, &records);
        }
    }

    fn three_live_brokers() -> (Controller, MetadataImage) {
        let mut controller = Controller::new(ControllerConfig::default(), 7);
        let mut image = MetadataImage::default();
        controller.on_elected(&image, 0);
        for node in 1..=3 {
            run(
                &mut controller,
                &mut image,
                &register(node, node as u128, node as u128),
                0,
            );
            let response = beat(&mut controller, &mut image, node, false, 0);
            assert_eq!(
                response,
                ControllerResponse::Heartbeat {
                    fenced: false,
                    should_shut_down: false
                }
            );
        }
        (controller, image)
    }

    fn create(name: &str, partitions: u32, factor: Option<u16>) -> ControllerRequest {
        ControllerRequest::CreateTopics {
            topics: vec![NewTopic {
                name: name.into(),
                partitions,
                replication_factor: factor,
                configs: BTreeMap::new(),
                internal: false,
            }],
            validate_only: false,
        }
    }

    #[test]
    fn six_partitions_with_three_replicas_lead_on_all_brokers() {
        let (mut controller, mut image) = three_live_brokers();
        let response = run(&mut controller, &mut image, &create("t", 6, Some(3)), 0);
        let ControllerResponse::Topics { results, .. } = response else {
            panic!("{response:?}")
        };
        assert_eq!(results[0].error_code, ErrorCode::None);
        let leaders: BTreeSet<i32> = image.topics["t"]
            .partitions
            .iter()
            .map(|p| p.leader.unwrap().0)
            .collect();
        assert_eq!(leaders.len(), 3);
        for p in &image.topics["t"].partitions {
            assert_eq!(p.replicas.len(), 3);
            assert_eq!(
                p.isr, p.replicas,
                "a new partition is empty: every replica is in sync"
            );
            assert_eq!(p.leader, Some(p.replicas[0]));
        }
    }

    #[test]
    fn create_refusals_carry_kafka_codes() {
        let (mut controller, mut image) = three_live_brokers();
        run(&mut controller, &mut image, &create("t", 1, None), 0);
        let codes = |r: ControllerResponse| match r {
            ControllerResponse::Topics { results, .. } => results
                .iter()
                .map(|r| r.error_code.code())
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let again = run(&mut controller, &mut image, &create("t", 1, None), 0);
        assert_eq!(codes(again), vec![36]);
        let too_many = run(&mut controller, &mut image, &create("u", 1, Some(4)), 0);
        assert_eq!(codes(too_many), vec![38]);
        let none = run(&mut controller, &mut image, &create("u", 0, None), 0);
        assert_eq!(codes(none), vec![37]);
        let validate = ControllerRequest::CreateTopics {
            topics: vec![NewTopic {
                name: "v".into(),
                partitions: 2,
                replication_factor: Some(2),
                configs: BTreeMap::new(),
                internal: false,
            }],
            validate_only: true,
        };
        assert_eq!(
            codes(run(&mut controller, &mut image, &validate, 0)),
            vec![0]
        );
        assert!(!image.topics.contains_key("v"));
    }

    #[test]
    fn an_expired_session_fences_and_its_partitions_lose_their_leader_until_it_returns() {
        let (mut controller, mut image) = three_live_brokers();
        run(&mut controller, &mut image, &create("t", 3, Some(1)), 0);
        let led_by_2: Vec<usize> = image.topics["t"]
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.leader == Some(NodeId(2)))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(led_by_2.len(), 1);
        // Brokers 1 and 3 heartbeat; 2 falls silent past the 9 s session.
        for now in (1000..=10_000).step_by(1000) {
            beat(&mut controller, &mut image, 1, false, now);
            beat(&mut controller, &mut image, 3, false, now);
            tick(&mut controller, &mut image, now);
        }
        assert!(image.brokers[&NodeId(2)].fenced);
        let p = &image.topics["t"].partitions[led_by_2[0]];
        assert_eq!((p.leader, p.leader_epoch.0), (None, 1));
        assert_eq!(
            p.isr,
            vec![NodeId(2)],
            "the ISR keeps the broker holding the data"
        );
        // It comes back: unfenced on its heartbeat, leads again at a new epoch.
        beat(&mut controller, &mut image, 2, false, 11_000);
        let p = &image.topics["t"].partitions[led_by_2[0]];
        assert_eq!((p.leader, p.leader_epoch.0), (Some(NodeId(2)), 2));
    }

    #[test]
    fn with_no_live_isr_member_only_a_topic_allowing_it_elects_uncleanly() {
        let (mut controller, mut image) = three_live_brokers();
        for (name, unclean) in [("clean", None), ("unclean", Some("true"))] {
            let mut request = create(name, 3, Some(2));
            if let (ControllerRequest::CreateTopics { topics, .. }, Some(value)) =
                (&mut request, unclean)
            {
                topics[0].configs.insert(
                    crate::elect_leaders::UNCLEAN_CONFIG.to_string(),
                    value.to_string(),
                );
            }
            run(&mut controller, &mut image, &request, 0);
        }
        let led_by_2 = |image: &MetadataImage, name: &str| {
            image.topics[name]
                .partitions
                .iter()
                .position(|p| p.leader == Some(NodeId(2)))
                .expect("round-robin leads one partition on 2")
        };
        let (clean, unclean) = (led_by_2(&image, "clean"), led_by_2(&image, "unclean"));
        // Leader 2 shrinks each ISR to itself (its followers lag); then 2 falls silent.
        for (name, index) in [("clean", clean), ("unclean", unclean)] {
            let topic = &image.topics[name];
            let p = &topic.partitions[index];
            let alter = ControllerRequest::AlterPartition(crate::request::AlterPartition {
                node_id: NodeId(2),
                broker_epoch: image.brokers[&NodeId(2)].epoch,
                topic_id: topic.id,
                partition: index as u32,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                new_isr: vec![NodeId(2)],
            });
            run(&mut controller, &mut image, &alter, 500);
            assert_eq!(image.topics[name].partitions[index].isr, vec![NodeId(2)]);
        }
        for now in (1000..=10_000).step_by(1000) {
            beat(&mut controller, &mut image, 1, false, now);
            beat(&mut controller, &mut image, 3, false, now);
            tick(&mut controller, &mut image, now);
        }
        assert!(image.brokers[&NodeId(2)].fenced);
        let p = &image.topics["clean"].partitions[clean];
        assert_eq!((p.leader, p.isr.clone()), (None, vec![NodeId(2)]));
        let p = &image.topics["unclean"].partitions[unclean];
        let follower = p.replicas[1];
        assert_eq!(
            (p.leader, p.isr.clone(), p.leader_epoch.0),
            (Some(follower), vec![follower], 1)
        );
    }

    #[test]
    fn duplicate_ids_are_refused_while_alive_and_restarts_are_not() {
        let (mut controller, mut image) = three_live_brokers();
        // Another data directory while broker 2 heartbeats: a second process with its id.
        let dup = run(&mut controller, &mut image, &register(2, 99, 999), 1000);
        assert!(matches!(
            dup,
            ControllerResponse::Error {
                error_code: ErrorCode::DuplicateBrokerRegistration,
                ..
            }
        ));
        // The same data directory: broker 2 restarted; it registers at once, fenced.
        let restart = run(&mut controller, &mut image, &register(2, 100, 2), 1000);
        assert!(matches!(restart, ControllerResponse::Registered { .. }));
        assert!(image.brokers[&NodeId(2)].fenced);
        // The retry of an applied registration answers with the same epoch.
        let again = run(&mut controller, &mut image, &register(2, 100, 2), 1000);
        assert_eq!(again, restart);
        // Once its session expired, another directory may take the id over.
        tick(&mut controller, &mut image, 20_000);
        let takeover = run(&mut controller, &mut image, &register(2, 101, 555), 20_000);
        assert!(matches!(takeover, ControllerResponse::Registered { .. }));
    }

    #[test]
    fn controlled_shutdown_fences_at_once() {
        let (mut controller, mut image) = three_live_brokers();
        run(&mut controller, &mut image, &create("t", 3, Some(1)), 0);
        let r = beat(&mut controller, &mut image, 3, true, 10);
        assert_eq!(
            r,
            ControllerResponse::Heartbeat {
                fenced: true,
                should_shut_down: true
            }
        );
        assert!(image.topics["t"]
            .partitions
            .iter()
            .all(|p| p.leader != Some(NodeId(3))));
    }

    #[test]
    fn stale_heartbeats_and_unknown_brokers_are_told_to_register() {
        let (mut controller, mut image) = three_live_brokers();
        let stale = ControllerRequest::BrokerHeartbeat {
            node_id: NodeId(1),
            broker_epoch: BrokerEpoch(0),
            applied_index: image.applied_index,
            want_shut_down: false,
        };
        let r = run(&mut controller, &mut image, &stale, 0);
        assert!(matches!(
            r,
            ControllerResponse::Error {
                error_code: ErrorCode::StaleBrokerEpoch,
                ..
            }
        ));
        let unknown = ControllerRequest::BrokerHeartbeat {
            node_id: NodeId(9),
            broker_epoch: BrokerEpoch(1),
            applied_index: image.applied_index,
            want_shut_down: false,
        };
        let r = run(&mut controller, &mut image, &unknown, 0);
        assert!(matches!(
            r,
            ControllerResponse::Error {
                error_code: ErrorCode::BrokerIdNotRegistered,
                ..
            }
        ));
    }

    #[test]
    fn a_broker_behind_the_log_stays_fenced() {
        let mut controller = Controller::new(ControllerConfig::default(), 1);
        let mut image = MetadataImage::default();
        run(&mut controller, &mut image, &register(1, 1, 1), 0);
        let behind = ControllerRequest::BrokerHeartbeat {
            node_id: NodeId(1),
            broker_epoch: image.brokers[&NodeId(1)].epoch,
            applied_index: LogIndex(0),
            want_shut_down: false,
        };
        let r = run(&mut controller, &mut image, &behind, 0);
        assert_eq!(
            r,
            ControllerResponse::Heartbeat {
                fenced: true,
                should_shut_down: false
            }
        );
    }

    #[test]
    fn partitions_delete_configs_and_producer_ids() {
        let (mut controller, mut image) = three_live_brokers();
        run(&mut controller, &mut image, &create("t", 2, Some(2)), 0);
        let grow = ControllerRequest::CreatePartitions {
            topics: vec![("t".into(), 5), ("nope".into(), 2)],
            validate_only: false,
        };
        let r = run(&mut controller, &mut image, &grow, 0);
        let ControllerResponse::Topics { results, .. } = r else {
            panic!()
        };
        assert_eq!(
            (results[0].error_code, results[1].error_code),
            (ErrorCode::None, ErrorCode::UnknownTopicOrPartition)
        );
        assert_eq!(image.topics["t"].partitions.len(), 5);
        assert!(image.topics["t"]
            .partitions
            .iter()
            .all(|p| p.replicas.len() == 2));
        let alter = ControllerRequest::AlterTopicConfigs {
            topic: "t".into(),
            changes: BTreeMap::from([("retention.ms".into(), Some("10".into()))]),
        };
        run(&mut controller, &mut image, &alter, 0);
        assert_eq!(image.topics["t"].configs["retention.ms"], "10");
        let a = ControllerRequest::AllocateProducerIds { node_id: NodeId(1) };
        let first = controller.decide(&image, &a, 0);
        let second = controller.decide(&image, &a, 0);
        let firsts: Vec<ProducerId> = [first, second]
            .into_iter()
            .map(|d| match d {
                Decision::Propose {
                    plan: ReplyPlan::ProducerIds { first, .. },
                    ..
                } => first,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            firsts,
            vec![ProducerId(0), ProducerId(PRODUCER_ID_BLOCK)],
            "racing blocks never overlap"
        );
        let delete = ControllerRequest::DeleteTopics {
            topics: vec![TopicRef::Name("t".into()), TopicRef::Id(Uuid::from_u128(5))],
        };
        let r = run(&mut controller, &mut image, &delete, 0);
        let ControllerResponse::Topics { results, .. } = r else {
            panic!()
        };
        assert_eq!(
            (results[0].error_code, results[1].error_code),
            (ErrorCode::None, ErrorCode::UnknownTopicId)
        );
        assert!(image.topics.is_empty());
    }

    #[test]
    fn the_first_tick_names_the_cluster_once() {
        let mut controller = Controller::new(ControllerConfig::default(), 3);
        let mut image = MetadataImage::default();
        tick(&mut controller, &mut image, 0);
        let id = image.cluster_id.clone().unwrap();
        assert_eq!(id.len(), 32);
        tick(&mut controller, &mut image, 1);
        assert_eq!(image.cluster_id.unwrap(), id);
    }
}
