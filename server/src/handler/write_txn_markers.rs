//! WriteTxnMarkers (27): COMMIT/ABORT markers written to partitions this broker leads, sent by
//! a transaction coordinator on another broker (`crate::txn::remote`) or by an admin tool
//! aborting a hanging transaction (KIP-664). Each marker is durable before its partition
//! answers; a producer with no open transaction there is unchanged (markers are idempotent).
//!
//! A marker to a `__consumer_offsets` partition ends the producer's pending transactional
//! offsets in every group of that partition coordinated here (committed or dropped).

use futures::future::join_all;
use rill_engine::TxnMarker;
use rill_protocol::kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use rill_protocol::kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use rill_protocol::kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, ProducerEpoch, ProducerId, TopicPartitionRef};

use super::Broker;
use crate::group::{offsets_partition, GroupOp, GroupReply, OFFSETS_PARTITIONS, OFFSETS_TOPIC};
use crate::partition::ops::{PartitionOp, PartitionReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::WriteTxnMarkersRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer WriteTxnMarkers.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let markers = join_all(req.markers.iter().map(|m| one_marker(broker, m))).await;
    WriteTxnMarkersResponse::default().with_markers(markers)
}

async fn one_marker<B: Broker>(broker: &B, m: &WritableTxnMarker) -> WritableTxnMarkerResult {
    let marker = TxnMarker {
        producer_id: ProducerId(m.producer_id.0),
        producer_epoch: ProducerEpoch(m.producer_epoch),
        commit: m.transaction_result,
        coordinator_epoch: m.coordinator_epoch,
    };
    let topics = join_all(m.topics.iter().map(|t| async move {
        let name = t.name.0.as_str();
        let partitions = join_all(t.partition_indexes.iter().map(|&p| async move {
            let code = write(
                broker,
                TopicPartitionRef::new(name, PartitionIndex(p)),
                marker,
            )
            .await;
            WritableTxnMarkerPartitionResult::default()
                .with_partition_index(p)
                .with_error_code(code.code())
        }));
        WritableTxnMarkerTopicResult::default()
            .with_name(t.name.clone())
            .with_partitions(partitions.await)
    }));
    WritableTxnMarkerResult::default()
        .with_producer_id(m.producer_id)
        .with_topics(topics.await)
}

/// One partition's marker: its error code.
async fn write<B: Broker>(broker: &B, tp: TopicPartitionRef<'_>, marker: TxnMarker) -> ErrorCode {
    if !marker.producer_id.is_some() {
        // A marker ends a producer's transaction: without a producer id there is none to end
        // (issue 26: the live fuzzer's producer id -1 reached the engine's assertion).
        return ErrorCode::InvalidProducerIdMapping;
    }
    if tp.topic == OFFSETS_TOPIC {
        return end_groups(broker, tp.partition, marker).await;
    }
    let exists = broker
        .topics()
        .get(tp.topic)
        .is_some_and(|m| tp.partition.is_within(m.partitions));
    if !exists {
        return ErrorCode::UnknownTopicOrPartition;
    }
    match broker
        .partition(tp, PartitionOp::WriteTxnMarker(marker))
        .await
    {
        PartitionReply::MarkerWritten => ErrorCode::None,
        other => other.error_code(),
    }
}

/// The marker's producer's pending offsets end in every group of offsets partition
/// `partition` (those without any are unchanged).
async fn end_groups<B: Broker>(
    broker: &B,
    partition: PartitionIndex,
    marker: TxnMarker,
) -> ErrorCode {
    if !partition.is_within(OFFSETS_PARTITIONS) {
        return ErrorCode::UnknownTopicOrPartition;
    }
    if let Some(cluster) = broker.cluster() {
        if let Err(code) = cluster.check_leader(TopicPartitionRef::new(OFFSETS_TOPIC, partition)) {
            return code;
        }
    }
    let groups = broker.list_groups().await;
    let ends = groups
        .iter()
        .filter(|g| offsets_partition(&g.group_id) == partition)
        .map(|g| {
            let op = GroupOp::TxnEnd {
                producer_id: marker.producer_id,
                commit: marker.commit,
            };
            broker.group(&g.group_id, op)
        });
    let failed = join_all(ends)
        .await
        .into_iter()
        .find_map(|reply| match reply {
            GroupReply::TxnEnd(ErrorCode::None) => None,
            GroupReply::TxnEnd(code) | GroupReply::Unavailable(code) => Some(code),
            other => {
                tracing::error!(?other, "TxnEnd answered unexpectedly");
                Some(ErrorCode::UnknownServerError)
            }
        });
    failed.unwrap_or(ErrorCode::None)
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::write_txn_markers_request::WritableTxnMarkerTopic;
    use rill_protocol::kafka_protocol::messages::ProducerId as WireProducerId;

    use super::*;
    use crate::group::ops::MemberRef;
    use crate::handler::fake::FakeBroker;
    use crate::handler::topic_name;

    fn marker(topic: &str, partitions: Vec<i32>, commit: bool) -> WriteTxnMarkersRequest {
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(WireProducerId(7))
            .with_transaction_result(commit)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(partitions)])])
    }

    fn codes(r: &WriteTxnMarkersResponse) -> Vec<(i32, i16)> {
        r.markers[0].topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect()
    }

    #[test]
    fn markers_go_to_known_partitions_and_unknown_ones_are_refused() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 2, Default::default()).unwrap();
        let r = block_on(handle(&broker, &marker("t", vec![1, 2, -1], true)));
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(codes(&r), vec![(1, 0), (2, unknown), (-1, unknown)]);
        assert_eq!(r.markers[0].producer_id.0, 7);
        let r = block_on(handle(&broker, &marker("nope", vec![0], false)));
        assert_eq!(codes(&r), vec![(0, unknown)]);
    }

    /// Found by the live fuzzer (issue 26): a marker with producer id -1 reached the engine's
    /// "markers belong to a producer" assertion and the shard died.
    #[test]
    fn a_marker_without_a_producer_id_is_refused() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        for id in [-1, -2, i64::MIN] {
            let mut request = marker("t", vec![0], true);
            request.markers[0].producer_id = WireProducerId(id);
            let r = block_on(handle(&broker, &request));
            let refused = ErrorCode::InvalidProducerIdMapping.code();
            assert_eq!(codes(&r), vec![(0, refused)]);
        }
        assert_eq!(
            broker.log_end(TopicPartitionRef::new("t", PartitionIndex(0))),
            0,
            "nothing was written"
        );
    }

    #[test]
    fn a_marker_to_an_offsets_partition_ends_the_pending_offsets_of_its_groups() {
        let broker = FakeBroker::new();
        broker.topics().create("in", 1, Default::default()).unwrap();
        let group = "g";
        let offset = crate::group::offsets::CommittedOffset {
            offset: rill_types::Offset(5),
            leader_epoch: rill_types::LeaderEpoch::NONE,
            metadata: None,
            commit_time_ms: rill_types::TimestampMs(0),
        };
        let op = GroupOp::TxnCommit {
            producer_id: ProducerId(7),
            member: MemberRef {
                member_id: String::new(),
                group_instance_id: None,
                generation_id: -1,
            },
            offsets: vec![("in".into(), 0, offset)],
        };
        assert_eq!(
            block_on(broker.group(group, op)),
            GroupReply::Commit(vec![ErrorCode::None])
        );
        let pending = || block_on(broker.group(group, GroupOp::PendingTxn(None)));
        assert_ne!(pending(), GroupReply::PendingTxn(Vec::new()));
        let partition = offsets_partition(group).0;
        let r = block_on(handle(
            &broker,
            &marker(OFFSETS_TOPIC, vec![partition], true),
        ));
        assert_eq!(codes(&r), vec![(partition, 0)]);
        assert_eq!(pending(), GroupReply::PendingTxn(Vec::new()));
        let beyond = OFFSETS_PARTITIONS;
        let r = block_on(handle(&broker, &marker(OFFSETS_TOPIC, vec![beyond], true)));
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(codes(&r), vec![(beyond, unknown)]);
    }
}
