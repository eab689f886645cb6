//! Partition reassignments (KIP-455: AlterPartitionReassignments, ListPartitionReassignments),
//! decided by the controller into [`PartitionReassignment`] records, KRaft's way:
//!
//! 1. **Start.** Target `T` for a partition whose replicas were `R` (its replicas before any
//!    reassignment under way): replicas become `T` then `R − T`; `adding = T − R`,
//!    `removing = R − T`. Leader and ISR stay. The added replicas are replicas now, so they
//!    fetch from the leader and join the ISR through AlterPartition like any follower.
//! 2. **Switch.** Once every replica of `T` is in the ISR (checked on the controller's tick, and
//!    at once when it already holds), replicas become `T`, the ISR loses the removed ones, and
//!    if the leader was removed the first target replica in the ISR leads (new leader epoch).
//! 3. **Cancel** (`replicas` null): back to `R` with the added replicas out of the ISR.
//!
//! | request                                        | answer                          |
//! |------------------------------------------------|---------------------------------|
//! | unknown topic or partition                     | UNKNOWN_TOPIC_OR_PARTITION      |
//! | target empty, with duplicates or unregistered brokers | INVALID_REPLICA_ASSIGNMENT |
//! | cancel without a reassignment under way        | NO_REASSIGNMENT_IN_PROGRESS     |
//! | target equal to the current replicas, none under way | success, nothing written  |
//!
//! A new target while one is under way replaces it, computed from `R` again.

use std::collections::BTreeSet;

use rill_types::ErrorCode;
use uuid::Uuid;

use crate::controller::{Decision, ReplyPlan};
use crate::image::{MetadataImage, PartitionState};
use crate::record::{MetadataRecord, PartitionReassignment};
use crate::request::{ControllerResponse, PartitionResult};
use crate::types::{LogIndex, NodeId};

/// One partition's requested target (`None` cancels).
pub type Target = (i32, Option<Vec<NodeId>>);

/// One partition's place in the answer.
#[derive(Debug, Clone)]
pub enum ReassignSlot {
    /// Decided without writing.
    Done(PartitionResult),
    /// Answered by the outcome of record number `record`.
    Record {
        /// Position in the entry.
        record: usize,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
}

/// The controller's decision on an AlterPartitionReassignments.
pub fn decide(image: &MetadataImage, topics: &[(String, Vec<Target>)]) -> Decision {
    let mut records = Vec::new();
    let mut slots = Vec::new();
    for (topic, targets) in topics {
        for (partition, target) in targets {
            let found = image.topics.get(topic).and_then(|t| {
                let state = usize::try_from(*partition)
                    .ok()
                    .and_then(|i| t.partitions.get(i))?;
                Some((t.id, state))
            });
            let Some((topic_id, state)) = found else {
                slots.push(ReassignSlot::Done(PartitionResult::failed(
                    topic,
                    *partition,
                    ErrorCode::UnknownTopicOrPartition,
                    "unknown topic or partition",
                )));
                continue;
            };
            let place = (topic_id, *partition as u32);
            match step(image, place, state, target.as_deref()) {
                Ok(Some(record)) => {
                    slots.push(ReassignSlot::Record {
                        record: records.len(),
                        topic: topic.clone(),
                        partition: *partition,
                    });
                    records.push(record);
                }
                Ok(None) => slots.push(ReassignSlot::Done(PartitionResult::ok(topic, *partition))),
                Err((code, message)) => slots.push(ReassignSlot::Done(PartitionResult::failed(
                    topic, *partition, code, message,
                ))),
            }
        }
    }
    if records.is_empty() {
        let results = slots.into_iter().map(done).collect();
        return Decision::Reply(ControllerResponse::PartitionResults {
            results,
            index: LogIndex(0),
        });
    }
    Decision::Propose {
        records,
        plan: ReplyPlan::Reassignments(slots),
    }
}

fn done(slot: ReassignSlot) -> PartitionResult {
    match slot {
        ReassignSlot::Done(result) => result,
        ReassignSlot::Record { .. } => unreachable!("no records, so no record slots"),
    }
}

/// The answer once the entry applied.
pub fn reply(
    slots: Vec<ReassignSlot>,
    outcomes: &[Result<(), crate::image::Rejected>],
    index: LogIndex,
) -> ControllerResponse {
    let results = slots
        .into_iter()
        .map(|slot| match slot {
            ReassignSlot::Done(result) => result,
            ReassignSlot::Record {
                record,
                topic,
                partition,
            } => match &outcomes[record] {
                Ok(()) => PartitionResult::ok(&topic, partition),
                Err(e) => PartitionResult::failed(
                    &topic,
                    partition,
                    ErrorCode::RequestTimedOut,
                    format!("{e}; retry"),
                ),
            },
        })
        .collect();
    ControllerResponse::PartitionResults { results, index }
}

/// The switch of every reassignment whose target is in sync (the controller's tick).
pub fn complete_ready(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (index, state) in topic.partitions.iter().enumerate() {
            if state.reassigning() && target_in_sync(state) {
                tracing::info!(
                    topic = %topic.name,
                    partition = index,
                    "reassignment: target in sync, switching"
                );
                records.push(completed(image, (topic.id, index as u32), state));
            }
        }
    }
    records
}

type Step = Result<Option<MetadataRecord>, (ErrorCode, String)>;

/// The record that starts, replaces, completes or cancels a reassignment (`None`: nothing to do).
fn step(
    image: &MetadataImage,
    place: (Uuid, u32),
    state: &PartitionState,
    target: Option<&[NodeId]>,
) -> Step {
    let original: Vec<NodeId> = state
        .replicas
        .iter()
        .copied()
        .filter(|r| !state.adding_replicas.contains(r))
        .collect();
    let Some(target) = target else {
        if !state.reassigning() {
            return Err((
                ErrorCode::NoReassignmentInProgress,
                "no reassignment is under way".to_string(),
            ));
        }
        // The cancel: back to the original replicas, without the added ones.
        return Ok(Some(settled(image, place, state, original)));
    };
    check_target(image, target)?;
    if target == original.as_slice() && !state.reassigning() {
        return Ok(None);
    }
    let adding: Vec<NodeId> = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let removing: Vec<NodeId> = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    // Replicas dropped by a replaced reassignment leave the ISR with them.
    let isr: Vec<NodeId> = state
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    let mut next = state.clone();
    next.replicas = replicas;
    next.isr = isr;
    next.adding_replicas = adding;
    next.removing_replicas = removing;
    if next.leader.is_some_and(|l| !next.isr.contains(&l)) {
        next.leader = next
            .replicas
            .iter()
            .copied()
            .find(|r| next.isr.contains(r) && image.live_broker(*r).is_some());
    }
    // `next` keeps the image's epochs: either record is checked against them.
    if target_in_sync(&next) {
        return Ok(Some(completed(image, place, &next)));
    }
    Ok(Some(record(place, state, &next)))
}

fn check_target(image: &MetadataImage, target: &[NodeId]) -> Result<(), (ErrorCode, String)> {
    let distinct: BTreeSet<NodeId> = target.iter().copied().collect();
    let invalid = |why: String| Err((ErrorCode::InvalidReplicaAssignment, why));
    if target.is_empty() {
        return invalid("the target replica list is empty".to_string());
    }
    if distinct.len() != target.len() {
        return invalid(format!("replicas {target:?} name a broker twice"));
    }
    if let Some(unknown) = target.iter().find(|r| !image.brokers.contains_key(r)) {
        return invalid(format!("broker {unknown} is not registered"));
    }
    Ok(())
}

/// Every replica of the target is in the ISR.
fn target_in_sync(state: &PartitionState) -> bool {
    state
        .replicas
        .iter()
        .filter(|r| !state.removing_replicas.contains(r))
        .all(|r| state.isr.contains(r))
}

/// The switch: replicas become the target (those not being removed).
fn completed(image: &MetadataImage, place: (Uuid, u32), state: &PartitionState) -> MetadataRecord {
    let target: Vec<NodeId> = state
        .replicas
        .iter()
        .copied()
        .filter(|r| !state.removing_replicas.contains(r))
        .collect();
    settled(image, place, state, target)
}

/// No reassignment under way any more, on `replicas`: the ISR keeps its members among them, the
/// leader stays if it is one of them, else the first of them in the ISR and live leads.
fn settled(
    image: &MetadataImage,
    place: (Uuid, u32),
    state: &PartitionState,
    replicas: Vec<NodeId>,
) -> MetadataRecord {
    let isr: Vec<NodeId> = state
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    let leader = state.leader.filter(|l| replicas.contains(l)).or_else(|| {
        replicas
            .iter()
            .copied()
            .find(|r| isr.contains(r) && image.live_broker(*r).is_some())
    });
    let mut next = state.clone();
    next.replicas = replicas;
    next.isr = isr;
    next.leader = leader;
    next.adding_replicas.clear();
    next.removing_replicas.clear();
    record(place, state, &next)
}

fn record(
    (topic_id, partition): (Uuid, u32),
    from: &PartitionState,
    to: &PartitionState,
) -> MetadataRecord {
    MetadataRecord::PartitionReassignment(PartitionReassignment {
        topic_id,
        partition,
        expected_leader_epoch: from.leader_epoch,
        expected_partition_epoch: from.partition_epoch,
        replicas: to.replicas.clone(),
        adding: to.adding_replicas.clone(),
        removing: to.removing_replicas.clone(),
        leader: to.leader,
        isr: to.isr.clone(),
    })
}

/// The reassignments under way, for ListPartitionReassignments: (topic, partition, replicas,
/// adding, removing), for the named partitions (`None`: all).
pub fn list(
    image: &MetadataImage,
    asked: Option<&[(String, Vec<i32>)]>,
) -> Vec<(String, i32, PartitionState)> {
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for (index, state) in topic.partitions.iter().enumerate() {
            let index = index as i32;
            let wanted = asked.is_none_or(|asked| {
                asked
                    .iter()
                    .any(|(t, ps)| *t == topic.name && ps.contains(&index))
            });
            if wanted && state.reassigning() {
                out.push((topic.name.clone(), index, state.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{apply, image};

    fn ids(ns: &[i32]) -> Vec<NodeId> {
        ns.iter().copied().map(NodeId).collect()
    }

    /// Decide and apply; the error code of each partition.
    fn alter(image: &mut MetadataImage, targets: Vec<(i32, Option<&[i32]>)>) -> Vec<i16> {
        let topics = vec![(
            "t".to_string(),
            targets.into_iter().map(|(p, t)| (p, t.map(ids))).collect(),
        )];
        let response = match decide(image, &topics) {
            Decision::Reply(response) => response,
            Decision::Propose { records, plan } => {
                let outcomes = apply(image, records);
                let ReplyPlan::Reassignments(slots) = plan else {
                    panic!("{plan:?}")
                };
                reply(slots, &outcomes, image.applied_index)
            }
        };
        let ControllerResponse::PartitionResults { results, .. } = response else {
            panic!("{response:?}")
        };
        results.iter().map(|r| r.error_code.code()).collect()
    }

    fn placement(image: &MetadataImage, p: i32) -> (Vec<i32>, Vec<i32>, Vec<i32>, Option<i32>) {
        let s = image.partition("t", p).unwrap();
        let raw = |v: &[NodeId]| v.iter().map(|n| n.0).collect::<Vec<_>>();
        let adding_removing = [raw(&s.adding_replicas), raw(&s.removing_replicas)].concat();
        (
            raw(&s.replicas),
            raw(&s.isr),
            adding_removing,
            s.leader.map(|l| l.0),
        )
    }

    #[test]
    fn a_move_waits_for_the_new_replica_then_switches_and_drops_the_old() {
        let mut image = image(&[(&[1, 2], &[1, 2], Some(1))]);
        // Move 2 → 3: 3 is added, 2 removed once 3 is in sync.
        assert_eq!(alter(&mut image, vec![(0, Some(&[1, 3]))]), vec![0]);
        assert_eq!(
            placement(&image, 0),
            (vec![1, 3, 2], vec![1, 2], vec![3, 2], Some(1))
        );
        let listed = list(&image, None);
        assert_eq!(listed.len(), 1);
        assert!(complete_ready(&image).is_empty(), "3 is not in the ISR yet");
        // 3 caught up: the leader's AlterPartition puts it in the ISR.
        let state = image.partition("t", 0).unwrap().clone();
        let isr = MetadataRecord::PartitionChange {
            topic_id: Uuid::from_u128(crate::test_support::TOPIC),
            partition: 0,
            expected_leader_epoch: state.leader_epoch,
            expected_partition_epoch: Some(state.partition_epoch),
            leader: Some(NodeId(1)),
            isr: ids(&[1, 2, 3]),
        };
        assert_eq!(apply(&mut image, vec![isr]), vec![Ok(())]);
        let switch = complete_ready(&image);
        assert_eq!(switch.len(), 1);
        apply(&mut image, switch);
        assert_eq!(
            placement(&image, 0),
            (vec![1, 3], vec![1, 3], vec![], Some(1))
        );
        assert!(list(&image, None).is_empty());
    }

    #[test]
    fn removing_the_leader_switches_at_once_when_the_target_is_in_sync() {
        let mut image = image(&[(&[1, 2, 3], &[1, 2, 3], Some(1))]);
        assert_eq!(alter(&mut image, vec![(0, Some(&[3, 2]))]), vec![0]);
        let state = image.partition("t", 0).unwrap();
        assert_eq!(
            placement(&image, 0),
            (vec![3, 2], vec![2, 3], vec![], Some(3))
        );
        assert_eq!(state.leader_epoch.0, 1, "a new leader, a new epoch");
    }

    #[test]
    fn cancel_restores_the_original_replicas_and_refusals_carry_codes() {
        let mut image = image(&[(&[1, 2], &[1], Some(1)), (&[2, 3], &[2], Some(2))]);
        assert_eq!(alter(&mut image, vec![(0, Some(&[3, 1]))]), vec![0]);
        assert_eq!(placement(&image, 0).0, vec![3, 1, 2]);
        // A new target replaces the one under way, computed from the original replicas.
        assert_eq!(alter(&mut image, vec![(0, Some(&[1, 3]))]), vec![0]);
        assert_eq!(
            placement(&image, 0),
            (vec![1, 3, 2], vec![1], vec![3, 2], Some(1))
        );
        assert_eq!(alter(&mut image, vec![(0, None)]), vec![0]);
        assert_eq!(placement(&image, 0), (vec![1, 2], vec![1], vec![], Some(1)));
        let codes = alter(
            &mut image,
            vec![
                (0, None),
                (1, Some(&[])),
                (1, Some(&[2, 2])),
                (1, Some(&[2, 9])),
                (7, Some(&[1])),
                (1, Some(&[2, 3])),
            ],
        );
        assert_eq!(codes, vec![85, 39, 39, 39, 3, 0]);
        assert_eq!(image.check_invariants(), Ok(()));
    }
}
