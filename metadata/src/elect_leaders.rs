//! Leader elections an operator asks for (ElectLeaders, KIP-460) and the controller's own
//! preferred-leader rebalance (`auto.leader.rebalance.enable`). Both end in `PartitionChange`
//! records that name the epochs they were decided on, so they go through the metadata log like
//! every other decision and a stale one never applies.
//!
//! | election  | partition state                                   | outcome                        |
//! |-----------|---------------------------------------------------|--------------------------------|
//! | preferred | led by its first replica (live)                   | ELECTION_NOT_NEEDED            |
//! | preferred | first replica live and in the ISR                 | it leads; ISR unchanged        |
//! | preferred | first replica fenced or out of the ISR            | PREFERRED_LEADER_NOT_AVAILABLE |
//! | unclean   | a live leader                                     | ELECTION_NOT_NEEDED            |
//! | unclean   | a live ISR member                                 | the first one (replica order) leads |
//! | unclean   | no live ISR member, unclean election enabled      | the first live replica leads, ISR = it |
//! | unclean   | no live ISR member, unclean election disabled     | ELIGIBLE_LEADERS_NOT_AVAILABLE |
//! | either    | unknown topic or partition                        | UNKNOWN_TOPIC_OR_PARTITION     |
//!
//! Unclean elections need `unclean.leader.election.enable` (the topic's override, else the
//! controller's setting). Kafka lets an explicit unclean ElectLeaders through regardless; Rill
//! asks for the setting, so no admin call loses acknowledged data on a cluster that said no.
//!
//! The rebalance (Kafka's `leader.imbalance.*`): every check interval, each broker's imbalance is
//! the share of the partitions it is preferred for that another broker leads; above
//! `leader.imbalance.per.broker.percentage`, each of those whose preferred replica is live and in
//! the ISR moves back to it.

use std::collections::BTreeMap;

use rill_types::ErrorCode;
use uuid::Uuid;

use crate::controller::{ControllerConfig, Decision, ReplyPlan};
use crate::image::{MetadataImage, PartitionState, TopicImage};
use crate::record::MetadataRecord;
use crate::request::{ControllerResponse, ElectionType, PartitionResult};
use crate::types::{LogIndex, NodeId};

/// The topic config (and controller setting) that allows unclean elections.
pub const UNCLEAN_CONFIG: &str = "unclean.leader.election.enable";

/// One partition's place in an `Elections` answer.
#[derive(Debug, Clone)]
pub enum ElectionSlot {
    /// Decided without writing.
    Done(PartitionResult),
    /// The outcome of record number `record` of the entry: `leader` leads once it applied.
    Record {
        /// Position in the entry.
        record: usize,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
        /// The leader elected.
        leader: NodeId,
    },
}

/// The controller's decision on an ElectLeaders: `partitions` by topic name, `None` for all.
pub fn decide(
    image: &MetadataImage,
    config: &ControllerConfig,
    election: ElectionType,
    partitions: Option<&[(String, Vec<i32>)]>,
) -> Decision {
    let asked: Vec<(String, i32)> = match partitions {
        Some(asked) => asked
            .iter()
            .flat_map(|(topic, ps)| ps.iter().map(move |p| (topic.clone(), *p)))
            .collect(),
        None => image
            .topics
            .values()
            .flat_map(|t| (0..t.partitions.len() as i32).map(move |p| (t.name.clone(), p)))
            .collect(),
    };
    let mut records = Vec::new();
    let mut slots = Vec::new();
    for (topic, partition) in asked {
        let found = image.topics.get(&topic).and_then(|t| {
            let state = usize::try_from(partition)
                .ok()
                .and_then(|i| t.partitions.get(i))?;
            Some((t, state))
        });
        let Some((t, state)) = found else {
            slots.push(ElectionSlot::Done(PartitionResult::failed(
                &topic,
                partition,
                ErrorCode::UnknownTopicOrPartition,
                "unknown topic or partition",
            )));
            continue;
        };
        let outcome = match election {
            ElectionType::Preferred => preferred(image, state),
            ElectionType::Unclean => unclean(image, state, unclean_enabled(t, config)),
        };
        match outcome {
            Ok((leader, isr)) => {
                slots.push(ElectionSlot::Record {
                    record: records.len(),
                    topic: topic.clone(),
                    partition,
                    leader,
                });
                records.push(change(t.id, partition as u32, state, leader, isr));
            }
            Err((code, message)) => slots.push(ElectionSlot::Done(PartitionResult::failed(
                &topic, partition, code, message,
            ))),
        }
    }
    if records.is_empty() {
        let results = slots
            .into_iter()
            .map(|slot| match slot {
                ElectionSlot::Done(result) => result,
                ElectionSlot::Record { .. } => unreachable!("no records, so no record slots"),
            })
            .collect();
        return Decision::Reply(ControllerResponse::PartitionResults {
            results,
            index: LogIndex(0),
        });
    }
    Decision::Propose {
        records,
        plan: ReplyPlan::Elections(slots),
    }
}

/// The answer once the entry applied: a record that did not apply (the partition changed in
/// between) counts as elected only if its leader leads now.
pub fn reply(
    image: &MetadataImage,
    slots: Vec<ElectionSlot>,
    index: LogIndex,
) -> ControllerResponse {
    let results = slots
        .into_iter()
        .map(|slot| match slot {
            ElectionSlot::Done(result) => result,
            ElectionSlot::Record {
                topic,
                partition,
                leader,
                ..
            } => match image.partition(&topic, partition) {
                Some(state) if state.leader == Some(leader) => {
                    PartitionResult::ok(&topic, partition)
                }
                Some(_) => PartitionResult::failed(
                    &topic,
                    partition,
                    ErrorCode::RequestTimedOut,
                    "the partition changed while electing; retry",
                ),
                None => PartitionResult::failed(
                    &topic,
                    partition,
                    ErrorCode::UnknownTopicOrPartition,
                    "the topic was deleted while electing",
                ),
            },
        })
        .collect();
    ControllerResponse::PartitionResults { results, index }
}

/// The controller's preferred-leader rebalance (module doc): the changes for every broker whose
/// imbalance is above the configured share.
pub fn rebalance(image: &MetadataImage, config: &ControllerConfig) -> Vec<MetadataRecord> {
    // Per broker: (partitions it is preferred for, those another broker leads).
    let mut counts: BTreeMap<NodeId, (u64, u64)> = BTreeMap::new();
    for topic in image.topics.values() {
        for state in &topic.partitions {
            let preferred = state.replicas[0];
            let entry = counts.entry(preferred).or_default();
            entry.0 += 1;
            if state.leader != Some(preferred) {
                entry.1 += 1;
            }
        }
    }
    let over = |broker: NodeId| {
        counts.get(&broker).is_some_and(|(total, not_led)| {
            // not_led / total > percentage / 100, in integers.
            not_led * 100 > total * u64::from(config.leader_imbalance_per_broker_percentage)
        })
    };
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (index, state) in topic.partitions.iter().enumerate() {
            if !over(state.replicas[0]) {
                continue;
            }
            if let Ok((leader, isr)) = preferred(image, state) {
                tracing::info!(
                    topic = %topic.name,
                    partition = index,
                    leader = leader.0,
                    "leader rebalance: back to the preferred replica"
                );
                records.push(change(topic.id, index as u32, state, leader, isr));
            }
        }
    }
    records
}

type Elected = Result<(NodeId, Vec<NodeId>), (ErrorCode, String)>;

fn preferred(image: &MetadataImage, state: &PartitionState) -> Elected {
    let preferred = state.replicas[0];
    let live = image.live_broker(preferred).is_some();
    if state.leader == Some(preferred) && live {
        return Err((
            ErrorCode::ElectionNotNeeded,
            format!("the preferred replica {preferred} leads already"),
        ));
    }
    if live && state.isr.contains(&preferred) {
        return Ok((preferred, state.isr.clone()));
    }
    let why = if live { "not in the ISR" } else { "not live" };
    Err((
        ErrorCode::PreferredLeaderNotAvailable,
        format!(
            "the preferred replica {preferred} is {why} (ISR {:?})",
            state.isr
        ),
    ))
}

fn unclean(image: &MetadataImage, state: &PartitionState, enabled: bool) -> Elected {
    let live = |r: &NodeId| image.live_broker(*r).is_some();
    if state.leader.as_ref().is_some_and(live) {
        return Err((
            ErrorCode::ElectionNotNeeded,
            "the partition has a live leader".to_string(),
        ));
    }
    if let Some(clean) = state
        .replicas
        .iter()
        .find(|r| live(r) && state.isr.contains(r))
    {
        let isr = state.isr.iter().copied().filter(live).collect();
        return Ok((*clean, isr));
    }
    match state.replicas.iter().find(|r| live(r)) {
        Some(first) if enabled => Ok((*first, vec![*first])),
        Some(_) => Err((
            ErrorCode::EligibleLeadersNotAvailable,
            format!("no ISR member is live and {UNCLEAN_CONFIG} is false"),
        )),
        None => Err((
            ErrorCode::EligibleLeadersNotAvailable,
            format!("none of the replicas {:?} is live", state.replicas),
        )),
    }
}

/// Whether `topic` allows unclean elections: its own setting, else the controller's.
pub(crate) fn unclean_enabled(topic: &TopicImage, config: &ControllerConfig) -> bool {
    match topic.configs.get(UNCLEAN_CONFIG) {
        Some(value) => value.trim().eq_ignore_ascii_case("true"),
        None => config.unclean_leader_election,
    }
}

fn change(
    topic_id: Uuid,
    partition: u32,
    state: &PartitionState,
    leader: NodeId,
    isr: Vec<NodeId>,
) -> MetadataRecord {
    MetadataRecord::PartitionChange {
        topic_id,
        partition,
        expected_leader_epoch: state.leader_epoch,
        expected_partition_epoch: Some(state.partition_epoch),
        leader: Some(leader),
        isr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::{apply, fence, image, TOPIC};

    /// Decide, apply and answer: (error code per partition, leader per partition after).
    fn elect(
        image: &mut MetadataImage,
        config: &ControllerConfig,
        election: ElectionType,
        partitions: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<i16> {
        let response = match decide(image, config, election, partitions) {
            Decision::Reply(response) => response,
            Decision::Propose { records, plan } => {
                apply(image, records);
                let ReplyPlan::Elections(slots) = plan else {
                    panic!("{plan:?}")
                };
                reply(image, slots, image.applied_index)
            }
        };
        let ControllerResponse::PartitionResults { results, .. } = response else {
            panic!("{response:?}")
        };
        results.iter().map(|r| r.error_code.code()).collect()
    }

    fn leader(image: &MetadataImage, partition: i32) -> Option<i32> {
        image.partition("t", partition).unwrap().leader.map(|l| l.0)
    }

    #[test]
    fn preferred_moves_back_only_to_a_live_isr_member() {
        let mut image = image(&[
            (&[1, 2, 3], &[1, 2, 3], Some(1)), // preferred leads already
            (&[1, 2, 3], &[1, 2, 3], Some(2)), // preferred in the ISR: moves
            (&[3, 1, 2], &[1, 2], Some(1)),    // preferred out of the ISR
        ]);
        let config = ControllerConfig::default();
        let codes = elect(&mut image, &config, ElectionType::Preferred, None);
        assert_eq!(codes, vec![84, 0, 80]);
        assert_eq!(
            (leader(&image, 0), leader(&image, 1), leader(&image, 2)),
            (Some(1), Some(1), Some(1))
        );
        let p1 = image.partition("t", 1).unwrap();
        assert_eq!(
            (p1.leader_epoch.0, p1.isr.len()),
            (1, 3),
            "new epoch, same ISR"
        );
        // A fenced preferred replica cannot lead; unknown partitions are named as such.
        fence(&mut image, 3);
        let asked = [("t".to_string(), vec![2, 9]), ("nope".to_string(), vec![0])];
        let codes = elect(&mut image, &config, ElectionType::Preferred, Some(&asked));
        assert_eq!(codes, vec![80, 3, 3]);
    }

    #[test]
    fn unclean_needs_the_setting_unless_an_isr_member_is_live() {
        let mut image = image(&[
            (&[1, 2, 3], &[1], Some(1)),    // its only ISR member dies
            (&[1, 2, 3], &[1, 2], Some(1)), // a clean choice remains
            (&[2, 3, 1], &[2], Some(2)),    // leader alive: nothing to do
        ]);
        fence(&mut image, 1);
        // The fence alone leaves partitions 0 and 1 led by a fenced broker until reconciled;
        // ElectLeaders decides on that image as it is.
        let config = ControllerConfig::default();
        let codes = elect(&mut image, &config, ElectionType::Unclean, None);
        assert_eq!(codes, vec![83, 0, 84]);
        assert_eq!((leader(&image, 0), leader(&image, 1)), (Some(1), Some(2)));
        let enabled = ControllerConfig {
            unclean_leader_election: true,
            ..ControllerConfig::default()
        };
        let codes = elect(&mut image, &enabled, ElectionType::Unclean, None);
        assert_eq!(codes, vec![0, 84, 84]);
        let p0 = image.partition("t", 0).unwrap();
        assert_eq!(
            (p0.leader, p0.isr.clone()),
            (Some(NodeId(2)), vec![NodeId(2)])
        );
    }

    #[test]
    fn a_topic_override_decides_over_the_controller_setting() {
        let mut image = image(&[(&[1, 2], &[1], Some(1))]);
        let allow = MetadataRecord::TopicConfigs {
            topic_id: Uuid::from_u128(TOPIC),
            changes: [(UNCLEAN_CONFIG.to_string(), Some("true".to_string()))].into(),
        };
        apply(&mut image, vec![allow]);
        fence(&mut image, 1);
        let codes = elect(
            &mut image,
            &ControllerConfig::default(),
            ElectionType::Unclean,
            None,
        );
        assert_eq!(codes, vec![0]);
        assert_eq!(leader(&image, 0), Some(2));
    }

    #[test]
    fn rebalance_moves_partitions_of_brokers_above_the_imbalance_share() {
        // Broker 1 is preferred for 10 partitions and leads 9: 10% is not above 10%.
        let mut spec: Vec<(&[i32], &[i32], Option<i32>)> = vec![(&[1, 2], &[1, 2], Some(1)); 9];
        spec.push((&[1, 2], &[1, 2], Some(2)));
        let image10 = image(&spec);
        assert!(rebalance(&image10, &ControllerConfig::default()).is_empty());
        // Two of ten led elsewhere: 20% > 10%; only the one whose preferred is in the ISR moves.
        spec.push((&[1, 2], &[2], Some(2)));
        let mut image11 = image(&spec);
        let records = rebalance(&image11, &ControllerConfig::default());
        assert_eq!(records.len(), 1);
        apply(&mut image11, records);
        assert_eq!(
            (leader(&image11, 9), leader(&image11, 10)),
            (Some(1), Some(2))
        );
    }

    #[test]
    fn the_controller_rebalances_on_its_interval_when_enabled() {
        use crate::controller::Controller;
        let image = image(&[(&[1, 2], &[1, 2], Some(2))]);
        let config = ControllerConfig {
            leader_imbalance_check_interval_ms: 1000,
            ..ControllerConfig::default()
        };
        let mut controller = Controller::new(config.clone(), 1);
        controller.on_elected(&image, 0);
        let changes = |records: Vec<MetadataRecord>| {
            records
                .iter()
                .filter(|r| matches!(r, MetadataRecord::PartitionChange { .. }))
                .count()
        };
        // Heartbeats keep the sessions alive; only the periodic check moves leadership.
        assert_eq!(changes(controller.tick(&image, 10)), 0);
        assert_eq!(changes(controller.tick(&image, 500)), 0);
        assert_eq!(changes(controller.tick(&image, 1010)), 1);
        assert_eq!(
            changes(controller.tick(&image, 1020)),
            0,
            "once per interval"
        );
        let off = ControllerConfig {
            auto_leader_rebalance: false,
            ..config
        };
        let mut controller = Controller::new(off, 1);
        controller.on_elected(&image, 0);
        controller.tick(&image, 10);
        assert_eq!(changes(controller.tick(&image, 5000)), 0);
    }
}
