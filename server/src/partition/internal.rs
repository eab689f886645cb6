//! How a shard's partition table serves reads of a single node's internal partitions: the
//! coordinators' private logs (`crate::internal_topics::single_node` has them, `crate::group::journal` and
//! `crate::txn::journal` write them) behind [`PrivateLog`], read-only, with the same routing
//! as any partition but no partition actor. Long polls look at the high watermark every
//! [`WAIT_POLL`] (the coordinators' appends wake nothing here).

use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::lock::Mutex;
use rill_engine::io::Storage;
use rill_engine::PartitionLog;
use rill_protocol::ErrorCode;

use crate::partition::ops::{PartitionOp, PartitionReply};

/// How often a long poll on an internal partition looks for new records.
pub const WAIT_POLL: Duration = Duration::from_millis(50);

/// A coordinator's private log whose engine log a shard serves reads of.
pub trait PrivateLog<S: Storage> {
    /// The engine log the coordinator appends to.
    fn engine_log(&self) -> &Mutex<Option<PartitionLog<S>>>;
}

/// One private coordinator log a shard serves reads of (a `__consumer_offsets` or a
/// `__transaction_state` partition).
pub struct InternalLog<S: Storage>(Rc<dyn PrivateLog<S>>);

impl<S: Storage> InternalLog<S> {
    /// The read-only view of `log`'s engine log.
    pub fn new(log: Rc<dyn PrivateLog<S>>) -> Self {
        InternalLog(log)
    }

    fn log(&self) -> &Mutex<Option<PartitionLog<S>>> {
        self.0.engine_log()
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
