//! [`TxnEnv`]: what the transaction coordinator needs from the rest of the broker. The real one
//! is the shard (through [`crate::broker::Broker`]); tests use fakes.
//!
//! In a cluster a marker for a partition led by another broker, and the end of a group's
//! offsets coordinated by another broker, go there as WriteTxnMarkers ([`super::remote`]);
//! the rest goes through [`Broker::partition`] and [`Broker::group`] as on a single node.

use rill_engine::TxnMarker;
use rill_protocol::ErrorCode;
use rill_types::TopicPartitionRef;

use super::ProducerId;
use crate::broker::Broker;
use crate::group::ops::MemberRef;
use crate::group::{GroupOp, GroupReply};
use crate::partition::ops::{PartitionOp, PartitionReply};

pub use super::ops::TxnOffsets;

/// The broker as the transaction coordinator sees it.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait TxnEnv {
    /// A new producer id (durable: never handed out twice).
    fn allocate_producer_id(&self) -> Result<ProducerId, ErrorCode>;
    /// Why a partition cannot join a transaction, if it cannot: UNKNOWN_TOPIC_OR_PARTITION.
    /// (A partition without a leader for now may join: its marker is retried until it has one.)
    fn partition_refusal(&self, tp: TopicPartitionRef<'_>) -> Option<ErrorCode>;
    /// Appends `marker` to the partition and makes it durable. UNKNOWN_TOPIC_OR_PARTITION means
    /// the partition is gone (nothing to write); other errors are retried later.
    async fn write_marker(
        &self,
        tp: TopicPartitionRef<'_>,
        marker: TxnMarker,
    ) -> Result<(), ErrorCode>;
    /// Makes the marker's producer's pending offsets in `group` visible (a COMMIT marker) or
    /// drops them (ABORT).
    async fn end_group_txn(&self, group: &str, marker: TxnMarker) -> Result<(), ErrorCode>;
    /// Stores the producer's offsets in `group` as pending until the transaction ends; one
    /// error per offset (the group validates the member as for OffsetCommit).
    async fn commit_group_txn_offsets(
        &self,
        group: &str,
        producer_id: ProducerId,
        member: MemberRef,
        offsets: TxnOffsets,
    ) -> Vec<ErrorCode>;
}

/// The broker is the coordinator's environment: markers go through [`Broker::partition`] (the
/// partition's owner, in a cluster its leader), group offsets through [`Broker::group`].
impl<B: Broker> TxnEnv for B {
    fn allocate_producer_id(&self) -> Result<ProducerId, ErrorCode> {
        self.topics().allocate_producer_id().map_err(|e| {
            tracing::error!(error = %e, "cannot allocate a producer id");
            ErrorCode::CoordinatorNotAvailable
        })
    }

    fn partition_refusal(&self, tp: TopicPartitionRef<'_>) -> Option<ErrorCode> {
        let exists = self
            .topics()
            .get(tp.topic)
            .is_some_and(|m| tp.partition.is_within(m.partitions));
        (!exists).then_some(ErrorCode::UnknownTopicOrPartition)
    }

    async fn write_marker(
        &self,
        tp: TopicPartitionRef<'_>,
        marker: TxnMarker,
    ) -> Result<(), ErrorCode> {
        if let Some(cluster) = self.cluster() {
            let leader = cluster.leader(tp)?;
            if leader != cluster.node_id() {
                let remote = super::remote::write_marker(cluster, leader, tp, marker);
                return Box::pin(remote).await;
            }
        }
        match self
            .partition(tp, PartitionOp::WriteTxnMarker(marker))
            .await
        {
            PartitionReply::MarkerWritten => Ok(()),
            other => Err(other.error_code()),
        }
    }

    async fn end_group_txn(&self, group: &str, marker: TxnMarker) -> Result<(), ErrorCode> {
        if let Some(cluster) = self.cluster() {
            let coordinator = cluster.group_coordinator(group)?;
            if coordinator != cluster.node_id() {
                return Box::pin(super::remote::end_group(
                    cluster,
                    coordinator,
                    group,
                    marker,
                ))
                .await;
            }
        }
        let op = GroupOp::TxnEnd {
            producer_id: marker.producer_id,
            commit: marker.commit,
        };
        match self.group(group, op).await {
            GroupReply::TxnEnd(ErrorCode::None) => Ok(()),
            GroupReply::TxnEnd(code) | GroupReply::Unavailable(code) => Err(code),
            other => unreachable!("TxnEnd answered with {other:?}"),
        }
    }

    async fn commit_group_txn_offsets(
        &self,
        group: &str,
        producer_id: ProducerId,
        member: MemberRef,
        offsets: TxnOffsets,
    ) -> Vec<ErrorCode> {
        let n = offsets.len();
        let op = GroupOp::TxnCommit {
            producer_id,
            member,
            offsets,
        };
        match self.group(group, op).await {
            GroupReply::Commit(codes) => codes,
            GroupReply::Unavailable(code) => vec![code; n],
            other => unreachable!("TxnCommit answered with {other:?}"),
        }
    }
}
