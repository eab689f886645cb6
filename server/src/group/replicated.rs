//! Committed offsets in a cluster: written to the replicated `__consumer_offsets` partitions
//! and loaded by the broker that leads each one (the design: `crate::coordinator_log`).
//! Group membership is not written, as on a single node: after a move the members find the
//! new coordinator and join again.

use std::collections::HashMap;
use std::rc::Rc;

use rill_engine::io::{Clock, Storage};
use rill_protocol::ErrorCode;

use super::coordinator::GroupCoordinator;
use super::journal::{apply, Journal};
use super::offsets::{decode_chunk, encode_batch, CommittedOffset, OffsetKey, OffsetRecord};
use super::offsets_partition;
use crate::coordinator_log::{CoordinatorLog, LoadedChunk};

/// The offsets partitions of one shard, on the replicated internal topic.
pub struct ReplicatedJournal<S: Storage> {
    log: CoordinatorLog<S>,
    clock: Rc<dyn Clock>,
}

impl<S: Storage + 'static> ReplicatedJournal<S> {
    /// The journal over `log` (the shard's offsets partitions).
    pub fn new(log: CoordinatorLog<S>, clock: Rc<dyn Clock>) -> Self {
        ReplicatedJournal { log, clock }
    }

    /// Loads the partitions this broker now leads into `coordinator`, drops those it no longer
    /// leads (call every coordinator tick).
    pub async fn follow<J: Journal>(&self, coordinator: &GroupCoordinator<J>) {
        let install = |partition, chunks| {
            let (live, records) = live_of(chunks)?;
            coordinator.load_partition(partition, live.into_iter().collect());
            Ok(records)
        };
        let unload = |partition| coordinator.unload_partition(partition);
        self.log.follow(install, unload).await;
    }
}

/// The live entries of loaded batches, and how many records were read.
pub fn live_of(
    chunks: Vec<LoadedChunk>,
) -> Result<(HashMap<OffsetKey, CommittedOffset>, u64), String> {
    let mut live = HashMap::new();
    let mut records = 0;
    for (from, chunk) in chunks {
        let decoded = decode_chunk(chunk).map_err(|e| e.to_string())?;
        for (offset, record) in decoded.into_iter().filter(|(o, _)| *o >= from) {
            debug_assert!(offset >= from);
            records += 1;
            apply(&mut live, record);
        }
    }
    Ok((live, records))
}

impl<S: Storage + 'static> Journal for ReplicatedJournal<S> {
    async fn append(&self, group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        let partition = offsets_partition(group_id);
        if records.is_empty() {
            return self.log.ready(partition);
        }
        let batch = encode_batch(&records, self.clock.now().0);
        self.log.append(partition, batch).await
    }

    fn ready(&self, group_id: &str) -> Result<(), ErrorCode> {
        self.log.ready(offsets_partition(group_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_types::{LeaderEpoch, Offset};

    fn record(group: &str, partition: i32, offset: Option<i64>) -> OffsetRecord {
        OffsetRecord {
            key: OffsetKey::committed(group, "t", partition),
            value: offset.map(|o| CommittedOffset {
                offset: Offset(o),
                leader_epoch: LeaderEpoch::NONE,
                metadata: None,
                commit_time_ms: 5,
            }),
        }
    }

    #[test]
    fn a_load_keeps_the_latest_value_of_each_key_and_skips_what_precedes_a_read() {
        let first = encode_batch(&[record("g", 0, Some(1)), record("g", 1, Some(7))], 1);
        let second = encode_batch(&[record("g", 0, Some(2)), record("g", 1, None)], 2);
        let first = bytes::Bytes::copy_from_slice(first.as_bytes());
        let mut second = bytes::BytesMut::from(second.as_bytes());
        second[..8].copy_from_slice(&2i64.to_be_bytes()); // base offset 2
        let second = second.freeze();
        let chunks = vec![
            (Offset(0), first.clone()),
            (Offset(2), second),
            (Offset(4), first), // offsets 0-1 again, before this read's start: skipped
        ];
        let (live, records) = live_of(chunks).unwrap();
        assert_eq!(records, 4);
        assert_eq!(live.len(), 1);
        assert_eq!(live[&OffsetKey::committed("g", "t", 0)].offset, Offset(2));
    }
}
