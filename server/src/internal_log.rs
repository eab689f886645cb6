//! A single node's internal topics, read-only: `__consumer_offsets` and `__transaction_state`
//! as the coordinators' private logs (`crate::group::journal`, `crate::txn::log`) hold them.
//!
//! Kafka lets any consumer read its internal topics (`kcat -C -t __consumer_offsets`): Metadata
//! lists them with `is_internal`, ListOffsets and Fetch serve them, and only the coordinators
//! write them (a client's Produce gets INVALID_TOPIC_EXCEPTION, "Cannot append to internal
//! topic"). A cluster keeps them as replicated partitions (`crate::coordinator_log`); a single
//! node keeps each partition's log inside its coordinator on the shard that owns the partition,
//! and the shard's partition table serves reads of it through [`InternalLog::serve`]: the same
//! routing as any partition, without a partition actor. Long polls look at the high
//! watermark every [`WAIT_POLL`] (the coordinators' appends wake nothing here).

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::lock::Mutex;
use rill_engine::io::Storage;
use rill_engine::PartitionLog;
use rill_protocol::ErrorCode;
use uuid::Uuid;

use crate::group::journal::OffsetsLog;
use crate::partition::ops::{PartitionOp, PartitionReply};
use crate::topics::TopicMeta;
use crate::txn::log::TxnPartitionLog;

/// How often a long poll on an internal partition looks for new records.
pub const WAIT_POLL: Duration = Duration::from_millis(50);

/// Topic ids of a single node's internal topics: fixed, as the logs behind them are (Kafka
/// draws one when it creates the topic; here the topics exist from the first start).
const OFFSETS_TOPIC_ID: Uuid = Uuid::from_u128(0x5f5f_636f_6e73_756d_6572_5f6f_6666_7365);
const TXN_TOPIC_ID: Uuid = Uuid::from_u128(0x5f5f_7472_616e_7361_6374_696f_6e5f_7374);

/// A single node's internal topic `name`, if it is one.
pub fn topic(name: &str) -> Option<Arc<TopicMeta>> {
    let (id, partitions, configs) = match name {
        crate::group::OFFSETS_TOPIC => (
            OFFSETS_TOPIC_ID,
            crate::group::OFFSETS_PARTITIONS,
            crate::internal_topics::offsets_topic_configs(),
        ),
        crate::txn::TXN_TOPIC => (
            TXN_TOPIC_ID,
            crate::txn::TXN_PARTITIONS,
            crate::internal_topics::txn_topic_configs(1),
        ),
        _ => return None,
    };
    Some(Arc::new(TopicMeta {
        id,
        partitions,
        configs,
    }))
}

/// A single node's internal topics, each as [`topic`] gives it.
pub fn topics() -> Vec<(String, Arc<TopicMeta>)> {
    [crate::group::OFFSETS_TOPIC, crate::txn::TXN_TOPIC]
        .into_iter()
        .filter_map(|name| topic(name).map(|meta| (name.to_string(), meta)))
        .collect()
}

/// One private coordinator log a shard serves reads of.
pub enum InternalLog<S: Storage> {
    /// A `__consumer_offsets` partition (the group coordinator's).
    Offsets(Rc<OffsetsLog<S>>),
    /// A `__transaction_state` partition (the transaction coordinator's).
    Txn(Rc<TxnPartitionLog<S>>),
}

impl<S: Storage> InternalLog<S> {
    fn log(&self) -> &Mutex<Option<PartitionLog<S>>> {
        match self {
            InternalLog::Offsets(log) => log.engine_log(),
            InternalLog::Txn(log) => log.engine_log(),
        }
    }

    /// Answer a read-only partition operation (Fetch, ListOffsets, OffsetForLeaderEpoch,
    /// DescribeLogDirs); anything that would change the log is refused as Kafka refuses a
    /// client's write to an internal topic. `sleep` is the runtime's timer (long polls).
    pub async fn serve<F, Fut>(&self, op: PartitionOp, sleep: F) -> PartitionReply
    where
        F: Fn(Duration) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        if let PartitionOp::WaitForData { from, wait_ms, .. } = op {
            let deadline = Instant::now() + Duration::from_millis(wait_ms);
            loop {
                let moved = {
                    let guard = self.log().lock().await;
                    guard.as_ref().is_none_or(|l| l.high_watermark() != from)
                };
                let now = Instant::now();
                if moved || now >= deadline {
                    return PartitionReply::Waited;
                }
                sleep(WAIT_POLL.min(deadline - now)).await;
            }
        }
        let mut guard = self.log().lock().await;
        // Closed: the broker is shutting down.
        let Some(log) = guard.as_mut() else {
            return PartitionReply::Error(ErrorCode::NotLeaderOrFollower);
        };
        let fail = |e: rill_engine::EngineError| PartitionReply::Error(e.kafka_error_code());
        match op {
            // No transaction ever writes these logs: the last stable offset is the high
            // watermark and read_committed reads the same records.
            PartitionOp::Read {
                from, max_bytes, ..
            } => match log.read(from, max_bytes).await {
                Ok(read) => PartitionReply::Read {
                    positions: log.positions(),
                    chunks: read.chunks,
                    aborted: Vec::new(),
                },
                Err(e) => fail(e),
            },
            PartitionOp::Offsets => PartitionReply::Offsets(log.positions()),
            PartitionOp::OffsetForTimestamp { timestamp } => {
                match log.offset_for_timestamp(timestamp).await {
                    Ok(found) => PartitionReply::OffsetForTimestamp(found, log.positions()),
                    Err(e) => fail(e),
                }
            }
            PartitionOp::MaxTimestamp => match log.offset_of_max_timestamp().await {
                Ok(found) => PartitionReply::OffsetForTimestamp(found, log.positions()),
                Err(e) => fail(e),
            },
            // One replica, one leader epoch: nothing was ever truncated.
            PartitionOp::EndOffsetForEpoch { .. } => {
                PartitionReply::EpochEnd(None, log.positions())
            }
            PartitionOp::LogSize => PartitionReply::LogSize {
                bytes: log.size_bytes(),
                positions: log.positions(),
            },
            // The coordinators write without producer ids: no producer to describe (as Kafka
            // answers for its internal partitions; `kafka-transactions find-hanging` asks).
            PartitionOp::DescribeProducers => PartitionReply::Producers(Vec::new()),
            _ => PartitionReply::Error(ErrorCode::InvalidTopicException),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_node_has_both_internal_topics_with_fixed_ids_and_compacted() {
        let listed = topics();
        let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["__consumer_offsets", "__transaction_state"]);
        for (name, meta) in &listed {
            assert!(crate::coordinator_log::is_internal(name));
            assert_eq!(meta.partitions, 8);
            assert!(!meta.id.is_nil());
            assert_eq!(topic(name).unwrap().id, meta.id, "stable across calls");
            let policy = meta.configs.get("cleanup.policy").map(String::as_str);
            assert_eq!(policy, Some("compact"));
        }
        assert_ne!(listed[0].1.id, listed[1].1.id);
        assert!(topic("orders").is_none());
    }
}
