//! AlterPartition (KIP-497): a partition's leader asks the controller to change its ISR. The
//! controller checks the request against the image, in Kafka's order, and answers with the first
//! refusal that applies:
//!
//! | check                                                  | refusal                   |
//! |--------------------------------------------------------|---------------------------|
//! | the sender is registered at `broker_epoch`, unfenced     | STALE_BROKER_EPOCH        |
//! | the topic and partition exist                          | UNKNOWN_TOPIC_OR_PARTITION|
//! | the sender leads the partition                         | NOT_LEADER_OR_FOLLOWER    |
//! | its leader epoch is the partition's (newer / older)    | UNKNOWN / FENCED_LEADER_EPOCH |
//! | its partition epoch is the partition's                 | INVALID_UPDATE_VERSION    |
//! | the new ISR holds the leader, only replicas, only live brokers | INELIGIBLE_REPLICA |
//!
//! An accepted change is a `PartitionChange` that names both epochs, so it applies only if
//! nothing changed the partition in between (a fencing, another AlterPartition); the answer is
//! the partition's state after it, whose partition epoch the leader names next time.
//! Nothing sends it before issue 14 (followers); the rules are here and tested now.

use rill_types::ErrorCode;

use crate::controller::{Decision, ReplyPlan};
use crate::image::{MetadataImage, PartitionState};
use crate::record::MetadataRecord;
use crate::request::{AlterPartition, ControllerResponse};

/// The controller's decision on an AlterPartition.
pub fn decide(image: &MetadataImage, request: &AlterPartition) -> Decision {
    let state = match check(image, request) {
        Ok(state) => state,
        Err((code, message)) => {
            return Decision::Reply(ControllerResponse::error(code, message));
        }
    };
    if state.isr == request.new_isr {
        return Decision::Reply(answer(state));
    }
    Decision::Propose {
        records: vec![MetadataRecord::PartitionChange {
            topic_id: request.topic_id,
            partition: request.partition,
            expected_leader_epoch: state.leader_epoch,
            expected_partition_epoch: Some(state.partition_epoch),
            leader: state.leader,
            isr: request.new_isr.clone(),
        }],
        plan: ReplyPlan::Partition {
            topic_id: request.topic_id,
            partition: request.partition,
        },
    }
}

fn check<'a>(
    image: &'a MetadataImage,
    request: &AlterPartition,
) -> Result<&'a PartitionState, (ErrorCode, String)> {
    let sender = request.node_id;
    let registered = image.live_broker(sender).map(|b| b.epoch);
    if registered != Some(request.broker_epoch) {
        let message = format!(
            "broker {sender} is not live at epoch {}",
            request.broker_epoch.0
        );
        return Err((ErrorCode::StaleBrokerEpoch, message));
    }
    let state = image
        .topic_by_id(request.topic_id)
        .and_then(|t| t.partitions.get(request.partition as usize))
        .ok_or((
            ErrorCode::UnknownTopicOrPartition,
            "unknown partition".to_string(),
        ))?;
    if state.leader != Some(sender) {
        let message = format!(
            "broker {sender} does not lead it (leader {:?})",
            state.leader
        );
        return Err((ErrorCode::NotLeaderOrFollower, message));
    }
    let epochs = format!(
        "leader epoch {} / partition epoch {} asked, {} / {} current",
        request.leader_epoch.0,
        request.partition_epoch.0,
        state.leader_epoch.0,
        state.partition_epoch.0
    );
    if request.leader_epoch > state.leader_epoch {
        return Err((ErrorCode::UnknownLeaderEpoch, epochs));
    }
    if request.leader_epoch < state.leader_epoch {
        return Err((ErrorCode::FencedLeaderEpoch, epochs));
    }
    if request.partition_epoch != state.partition_epoch {
        return Err((ErrorCode::InvalidUpdateVersion, epochs));
    }
    let eligible =
        |r: &crate::types::NodeId| state.replicas.contains(r) && image.live_broker(*r).is_some();
    if !request.new_isr.contains(&sender) || !request.new_isr.iter().all(eligible) {
        let message = format!(
            "ISR {:?} must hold the leader and only live replicas of {:?}",
            request.new_isr, state.replicas
        );
        return Err((ErrorCode::IneligibleReplica, message));
    }
    Ok(state)
}

fn answer(state: &PartitionState) -> ControllerResponse {
    ControllerResponse::Partition {
        leader: state.leader,
        leader_epoch: state.leader_epoch,
        partition_epoch: state.partition_epoch,
        isr: state.isr.clone(),
    }
}

/// The answer once the change applied (or was overtaken).
pub fn reply(
    image: &MetadataImage,
    (topic_id, partition): (uuid::Uuid, u32),
    applied: bool,
) -> ControllerResponse {
    let state = image
        .topic_by_id(topic_id)
        .and_then(|t| t.partitions.get(partition as usize));
    match state {
        Some(state) if applied => answer(state),
        Some(_) => ControllerResponse::error(
            ErrorCode::InvalidUpdateVersion,
            "the partition changed before this request applied",
        ),
        None => ControllerResponse::error(ErrorCode::UnknownTopicOrPartition, "partition gone"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BrokerIdentity, PartitionAssignment};
    use crate::types::{BrokerEpoch, Endpoint, LogIndex, NodeId, PartitionEpoch};
    use rill_types::LeaderEpoch;
    use uuid::Uuid;

    const TOPIC: Uuid = Uuid::from_u128(7);

    /// Brokers 1-3 live (epochs 1), 4 registered but fenced; one partition on 1,2,3 led by 1.
    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        let register = |n: i32| {
            MetadataRecord::RegisterBroker(BrokerIdentity {
                node_id: NodeId(n),
                incarnation_id: Uuid::from_u128(n as u128),
                log_dir_id: Uuid::from_u128(n as u128),
                endpoint: Endpoint {
                    host: "127.0.0.1".into(),
                    port: 9000,
                },
                rack: None,
                replica_secret_sha256: None,
                listeners: Default::default(),
            })
        };
        image.apply_entry(LogIndex(1), 1, &(1..=4).map(register).collect::<Vec<_>>());
        let unfence = |n: i32| MetadataRecord::UnfenceBroker {
            node_id: NodeId(n),
            broker_epoch: BrokerEpoch(1),
        };
        image.apply_entry(LogIndex(2), 1, &(1..=3).map(unfence).collect::<Vec<_>>());
        let topic = MetadataRecord::Topic {
            name: "t".into(),
            topic_id: TOPIC,
            internal: false,
            configs: Default::default(),
            partitions: vec![PartitionAssignment {
                replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
                isr: vec![NodeId(1)],
                leader: Some(NodeId(1)),
            }],
        };
        image.apply_entry(LogIndex(3), 1, &[topic]);
        image
    }

    fn ask(isr: &[i32], partition_epoch: i32) -> AlterPartition {
        AlterPartition {
            node_id: NodeId(1),
            broker_epoch: BrokerEpoch(1),
            topic_id: TOPIC,
            partition: 0,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(partition_epoch),
            new_isr: isr.iter().copied().map(NodeId).collect(),
        }
    }

    /// Decide and, if proposed, apply; the answer.
    fn run(image: &mut MetadataImage, request: &AlterPartition) -> ControllerResponse {
        match decide(image, request) {
            Decision::Reply(response) => response,
            Decision::Propose { records, plan } => {
                let index = LogIndex(image.applied_index.0 + 1);
                let outcomes = image.apply_entry(index, 1, &records);
                crate::controller::Controller::reply(plan, index, &outcomes, image).unwrap()
            }
        }
    }

    fn refused(response: &ControllerResponse) -> i16 {
        match response {
            ControllerResponse::Error { error_code, .. } => error_code.code(),
            other => panic!("accepted: {other:?}"),
        }
    }

    #[test]
    fn followers_join_and_leave_with_each_change_naming_the_last() {
        let mut image = image();
        let grown = run(&mut image, &ask(&[1, 2, 3], 0));
        assert_eq!(
            grown,
            ControllerResponse::Partition {
                leader: Some(NodeId(1)),
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(1),
                isr: vec![NodeId(1), NodeId(2), NodeId(3)],
            }
        );
        let shrunk = run(&mut image, &ask(&[1, 3], 1));
        assert!(matches!(
            shrunk,
            ControllerResponse::Partition {
                partition_epoch: PartitionEpoch(2),
                ..
            }
        ));
        // The same ISR again changes nothing and is answered at once.
        assert!(decide(&image, &ask(&[1, 3], 2)).is_reply());
    }

    #[test]
    fn each_refusal_has_its_code() {
        let mut image = image();
        let code = |image: &mut MetadataImage, r: AlterPartition| refused(&run(image, &r));
        assert_eq!(
            code(&mut image, ask(&[1, 2], 5)),
            ErrorCode::InvalidUpdateVersion.code()
        );
        assert_eq!(
            code(&mut image, ask(&[2, 3], 0)),
            ErrorCode::IneligibleReplica.code()
        );
        assert_eq!(
            code(&mut image, ask(&[1, 4], 0)),
            ErrorCode::IneligibleReplica.code()
        );
        let mut not_leader = ask(&[1, 2], 0);
        not_leader.node_id = NodeId(2);
        assert_eq!(
            code(&mut image, not_leader),
            ErrorCode::NotLeaderOrFollower.code()
        );
        let mut stale_broker = ask(&[1, 2], 0);
        stale_broker.broker_epoch = BrokerEpoch(9);
        assert_eq!(
            code(&mut image, stale_broker),
            ErrorCode::StaleBrokerEpoch.code()
        );
        let mut newer = ask(&[1, 2], 0);
        newer.leader_epoch = LeaderEpoch(1);
        assert_eq!(
            code(&mut image, newer),
            ErrorCode::UnknownLeaderEpoch.code()
        );
        let mut unknown = ask(&[1, 2], 0);
        unknown.partition = 5;
        assert_eq!(
            code(&mut image, unknown),
            ErrorCode::UnknownTopicOrPartition.code()
        );
    }

    #[test]
    fn a_change_overtaken_by_another_is_refused_when_it_applies() {
        let mut image = image();
        let first = decide(&image, &ask(&[1, 2], 0));
        let second = decide(&image, &ask(&[1, 3], 0));
        let apply = |image: &mut MetadataImage, d: Decision| match d {
            Decision::Propose { records, plan } => {
                let index = LogIndex(image.applied_index.0 + 1);
                let outcomes = image.apply_entry(index, 1, &records);
                crate::controller::Controller::reply(plan, index, &outcomes, image).unwrap()
            }
            Decision::Reply(r) => r,
        };
        assert!(matches!(
            apply(&mut image, first),
            ControllerResponse::Partition { .. }
        ));
        assert_eq!(
            refused(&apply(&mut image, second)),
            ErrorCode::InvalidUpdateVersion.code()
        );
        assert_eq!(
            image.partition("t", 0).unwrap().isr,
            vec![NodeId(1), NodeId(2)]
        );
    }
}
