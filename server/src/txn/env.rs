//! [`TxnEnv`]: what the transaction coordinator needs from the rest of the broker. The real one
//! is the shard (through [`crate::handler::Broker`]), so a cluster routes markers to partition
//! leaders and group offsets to group coordinators by implementing `Broker`; tests use fakes.

use rill_engine::TxnMarker;
use rill_protocol::ErrorCode;

use super::ProducerId;
use crate::group::offsets::CommittedOffset;
use crate::group::ops::MemberRef;

/// A transaction's offsets for one group: (topic, partition, offset).
pub type TxnOffsets = Vec<(String, i32, CommittedOffset)>;

/// The broker as the transaction coordinator sees it.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait TxnEnv {
    /// A new producer id (durable: never handed out twice).
    fn allocate_producer_id(&self) -> Result<ProducerId, ErrorCode>;
    /// Whether the partition exists (AddPartitionsToTxn refuses unknown ones).
    fn partition_exists(&self, topic: &str, partition: i32) -> bool;
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
