//! Transactions across the brokers of a cluster, as Kafka runs them: a transactional id's
//! coordinator is the leader of its `__transaction_state` partition; it writes the COMMIT/ABORT
//! markers of partitions led elsewhere, and ends the offsets of groups coordinated elsewhere,
//! with WriteTxnMarkers to those brokers; a partition leader or group coordinator that is not
//! the id's coordinator asks it with the verify-only AddPartitionsToTxn (KIP-890) before a
//! partition's first transactional append and before storing a TxnOffsetCommit.
//!
//! A group's offsets end with a marker to its `__consumer_offsets` partition, which ends the
//! producer's pending offsets in every group of that partition on the receiving broker (as
//! Kafka's marker does); the groups that have none are unchanged.

use rill_engine::TxnMarker;
use rill_metadata::types::NodeId;
use rill_protocol::kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use rill_protocol::kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use rill_protocol::kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProducerId as WireProducerId, TransactionalId,
    WriteTxnMarkersRequest,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartition, TopicPartitionRef};

use super::ops::{TxnOp, TxnProducer, TxnReply};
use crate::broker::{topic_name, Broker};
use crate::cluster::peer;
use crate::cluster::view::ClusterView;
use crate::group::{offsets_partition, OFFSETS_TOPIC};

/// The WriteTxnMarkers version sent (the only one the codec knows).
const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// The AddPartitionsToTxn version sent: v5 reports TRANSACTION_ABORTABLE as it is.
const VERIFY_VERSION: i16 = 5;

/// Write `marker` to partition `tp`, which `leader` leads.
pub async fn write_marker(
    cluster: &ClusterView,
    leader: NodeId,
    tp: TopicPartitionRef<'_>,
    marker: TxnMarker,
) -> Result<(), ErrorCode> {
    let endpoint = cluster
        .endpoint(leader)
        .ok_or(ErrorCode::LeaderNotAvailable)?;
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(WireProducerId(marker.producer_id.0))
            .with_producer_epoch(marker.producer_epoch.0)
            .with_transaction_result(marker.commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(topic_name(tp.topic))
                .with_partition_indexes(vec![tp.partition.0])])]);
    let response = peer::call(
        cluster.peer_client(),
        &endpoint,
        WRITE_TXN_MARKERS_VERSION,
        &request,
    )
    .await?;
    let code = response
        .markers
        .iter()
        .flat_map(|m| m.topics.iter())
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == tp.partition.0)
        .map_or(ErrorCode::UnknownServerError, |p| wire_code(p.error_code));
    match code {
        ErrorCode::None => Ok(()),
        code => Err(code),
    }
}

/// End `group`'s pending offsets of the marker's producer on `coordinator` (a marker to the
/// group's `__consumer_offsets` partition).
pub async fn end_group(
    cluster: &ClusterView,
    coordinator: NodeId,
    group: &str,
    marker: TxnMarker,
) -> Result<(), ErrorCode> {
    let partition = offsets_partition(group);
    let tp = TopicPartitionRef::new(OFFSETS_TOPIC, partition);
    write_marker(cluster, coordinator, tp, marker).await
}

/// Ask `coordinator` whether `partitions` are in the transaction of `id` and `producer`: one
/// code per partition (NONE if it is).
pub async fn verify(
    cluster: &ClusterView,
    coordinator: NodeId,
    id: &str,
    producer: TxnProducer,
    partitions: &[TopicPartition],
) -> Vec<ErrorCode> {
    let n = partitions.len();
    let Some(endpoint) = cluster.endpoint(coordinator) else {
        return vec![ErrorCode::CoordinatorNotAvailable; n];
    };
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for tp in partitions {
        let index = tp.partition.0;
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.partitions.push(index),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(&tp.topic))
                    .with_partitions(vec![index]),
            ),
        }
    }
    let transaction = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_string())))
        .with_producer_id(WireProducerId(producer.id.0))
        .with_producer_epoch(producer.epoch.0)
        .with_verify_only(true)
        .with_topics(topics);
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![transaction]);
    let response =
        match peer::call(cluster.peer_client(), &endpoint, VERIFY_VERSION, &request).await {
            Ok(response) => response,
            Err(code) => return vec![code; n],
        };
    if response.error_code != 0 {
        return vec![wire_code(response.error_code); n];
    }
    let Some(result) = response
        .results_by_transaction
        .iter()
        .find(|r| r.transactional_id.0.as_str() == id)
    else {
        return vec![ErrorCode::UnknownServerError; n];
    };
    partitions
        .iter()
        .map(|tp| {
            result
                .topic_results
                .iter()
                .filter(|t| t.name.0.as_str() == tp.topic)
                .flat_map(|t| t.results_by_partition.iter())
                .find(|p| PartitionIndex(p.partition_index) == tp.partition)
                .map_or(ErrorCode::UnknownServerError, |p| {
                    wire_code(p.partition_error_code)
                })
        })
        .collect()
}

/// Runs `op` on `id` in a cluster: on this broker (`here`) if it leads the id's
/// `__transaction_state` partition; else what a partition leader or group coordinator does
/// for another broker's id ([`serve_for`]); ListTransactions always here (each broker lists
/// its own ids).
pub async fn route<B: Broker, F: std::future::Future<Output = TxnReply>>(
    broker: &B,
    cluster: &ClusterView,
    id: &str,
    op: TxnOp,
    here: impl FnOnce(TxnOp) -> F,
) -> TxnReply {
    if matches!(op, TxnOp::List(_)) {
        return here(op).await;
    }
    match cluster.txn_coordinator(id) {
        Ok(node) if node == cluster.node_id() => here(op).await,
        // Boxed: the request future's type would otherwise nest too deep.
        Ok(node) => Box::pin(serve_for(broker, cluster, node, id, op)).await,
        Err(code) => TxnReply::Unavailable(code),
    }
}

/// `op` for an id that `coordinator`, another broker, coordinates. Only what a partition
/// leader or group coordinator does for it is served here (verification, then the group's
/// pending offsets); anything else belongs to the coordinator: NOT_COORDINATOR.
pub async fn serve_for<B: Broker>(
    broker: &B,
    cluster: &ClusterView,
    coordinator: NodeId,
    id: &str,
    op: TxnOp,
) -> TxnReply {
    match op {
        TxnOp::AddPartitions {
            producer,
            partitions,
            verify_only: true,
        } => TxnReply::Partitions(verify(cluster, coordinator, id, producer, &partitions).await),
        TxnOp::CommitOffsets {
            producer,
            group,
            member,
            offsets,
        } => {
            let n = offsets.len();
            let partition = TopicPartition::new(OFFSETS_TOPIC, offsets_partition(&group));
            let verdict = verify(cluster, coordinator, id, producer, &[partition]).await;
            match verdict.first().copied() {
                Some(ErrorCode::None) => {
                    let env = super::env::TxnEnv::commit_group_txn_offsets(
                        broker,
                        &group,
                        producer.id,
                        member,
                        offsets,
                    );
                    TxnReply::Offsets(env.await)
                }
                Some(code) => TxnReply::Offsets(vec![code; n]),
                None => TxnReply::Offsets(vec![ErrorCode::UnknownServerError; n]),
            }
        }
        _ => TxnReply::Unavailable(ErrorCode::NotCoordinator),
    }
}

/// A peer's error code; one this broker does not know is UNKNOWN_SERVER_ERROR.
fn wire_code(code: i16) -> ErrorCode {
    ErrorCode::try_from(code).unwrap_or(ErrorCode::UnknownServerError)
}
