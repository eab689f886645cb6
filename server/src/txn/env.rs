//! [`TxnEnv`]: what the transaction coordinator needs from the rest of the broker. The real one
//! is the shard (through [`crate::handler::Broker`]); tests use fakes.
//!
//! The cluster seam: a coordinator writes each marker through [`Broker::partition`] and ends
//! each group's offsets through [`Broker::group`], so routing them to the partition's leader and
//! the group's coordinator on other brokers (Kafka's WriteTxnMarkers, and the verify-only
//! AddPartitionsToTxn back from partition leaders) belongs there. Until brokers can send those to
//! each other, a coordinator in a cluster accepts only partitions it leads itself
//! ([`TxnEnv::partition_refusal`]): a partition it could not end a transaction on would keep
//! its last stable offset there for good.

use rill_engine::TxnMarker;
use rill_protocol::ErrorCode;

use super::ProducerId;
use crate::group::offsets::CommittedOffset;
use crate::group::ops::MemberRef;
use crate::group::{GroupOp, GroupReply};
use crate::handler::Broker;
use crate::partition::ops::{PartitionOp, PartitionReply};

/// A transaction's offsets for one group: (topic, partition, offset).
pub type TxnOffsets = Vec<(String, i32, CommittedOffset)>;

/// The broker as the transaction coordinator sees it.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait TxnEnv {
    /// A new producer id (durable: never handed out twice).
    fn allocate_producer_id(&self) -> Result<ProducerId, ErrorCode>;
    /// Why a partition cannot join a transaction coordinated here, if it cannot:
    /// UNKNOWN_TOPIC_OR_PARTITION, or in a cluster the error of a partition another broker
    /// leads (its markers could not be written from here, see the module doc).
    fn partition_refusal(&self, topic: &str, partition: i32) -> Option<ErrorCode>;
    /// Appends `marker` to the partition and makes it durable. UNKNOWN_TOPIC_OR_PARTITION means
    /// the partition is gone (nothing to write); other errors are retried later.
    async fn write_marker(
        &self,
        topic: &str,
        partition: i32,
        marker: TxnMarker,
    ) -> Result<(), ErrorCode>;
    /// Makes the producer's pending offsets in `group` visible (commit) or drops them (abort).
    async fn end_group_txn(
        &self,
        group: &str,
        producer_id: ProducerId,
        commit: bool,
    ) -> Result<(), ErrorCode>;
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

    fn partition_refusal(&self, topic: &str, partition: i32) -> Option<ErrorCode> {
        let exists = self
            .topics()
            .get(topic)
            .is_some_and(|m| partition >= 0 && partition < m.partitions);
        if !exists {
            return Some(ErrorCode::UnknownTopicOrPartition);
        }
        let cluster = self.cluster()?;
        let refused = cluster.route(topic, partition).err();
        if let Some(code) = refused {
            tracing::warn!(topic, partition, ?code, "a transaction asked for a partition this broker does not lead: markers to other brokers are not written yet");
        }
        refused
    }

    async fn write_marker(
        &self,
        topic: &str,
        partition: i32,
        marker: TxnMarker,
    ) -> Result<(), ErrorCode> {
        match self
            .partition(topic, partition, PartitionOp::WriteTxnMarker(marker))
            .await
        {
            PartitionReply::MarkerWritten => Ok(()),
            other => Err(other.error_code()),
        }
    }

    async fn end_group_txn(
        &self,
        group: &str,
        producer_id: ProducerId,
        commit: bool,
    ) -> Result<(), ErrorCode> {
        let op = GroupOp::TxnEnd {
            producer_id,
            commit,
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
