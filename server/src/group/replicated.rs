//! Committed offsets in a cluster: written to the replicated `__consumer_offsets` partitions
//! and loaded by the broker that leads each one (the design: `crate::internal_topics::replicated`).
//! Each completed rebalance and each group deletion is written too (`super::metadata_record`):
//! the new coordinator restores Stable groups with their generation and members, so members
//! keep their assignment across a move.

use std::collections::HashMap;
use std::rc::Rc;

use rill_engine::io::{Clock, Storage};
use rill_protocol::ErrorCode;

use super::coordinator::GroupCoordinator;
use super::journal::{apply, Journal};
use super::metadata_record::{encode_group_batch, GroupMetadata};
use super::offsets::{
    decode_log_chunk, encode_batch, CommittedOffset, LogRecord, OffsetKey, OffsetRecord,
};
use super::offsets_partition;
use crate::internal_topics::replicated::{LoadedChunk, ReplicatedLog};

/// The offsets partitions of one shard, on the replicated internal topic.
pub struct ReplicatedJournal<S: Storage> {
    log: ReplicatedLog<S>,
    clock: Rc<dyn Clock>,
}

impl<S: Storage + 'static> ReplicatedJournal<S> {
    /// The journal over `log` (the shard's offsets partitions).
    pub fn new(log: ReplicatedLog<S>, clock: Rc<dyn Clock>) -> Self {
        ReplicatedJournal { log, clock }
    }

    /// Loads the partitions this broker now leads into `coordinator`, drops those it no longer
    /// leads (call every coordinator tick).
    pub async fn follow<J: Journal>(&self, coordinator: &GroupCoordinator<J>) {
        let install = |partition, chunks| {
            let (live, groups, records, consumer) = live_of(chunks)?;
            let groups = groups.into_iter().filter_map(|(g, v)| Some((g, v?)));
            coordinator.load_partition(partition, live.into_iter().collect(), groups.collect());
            coordinator.load_consumer_groups(partition, consumer.into_iter().collect());
            Ok(records)
        };
        let unload = |partition| coordinator.unload_partition(partition);
        self.log.follow(install, unload).await;
    }
}

/// Committed offsets and group records of the loaded live batches (latest per key; a group
/// deleted last maps to `None`).
pub type Loaded = (
    HashMap<OffsetKey, CommittedOffset>,
    HashMap<String, Option<GroupMetadata>>,
    u64,
    HashMap<bytes::Bytes, Option<bytes::Bytes>>,
);

/// The live entries of loaded batches, and how many records were read.
pub fn live_of(chunks: Vec<LoadedChunk>) -> Result<Loaded, String> {
    let mut live = HashMap::new();
    let mut groups = HashMap::new();
    let mut consumer = HashMap::new();
    let mut records = 0;
    for (from, chunk) in chunks {
        let decoded = decode_log_chunk(chunk).map_err(|e| e.to_string())?;
        for (_, record) in decoded.into_iter().filter(|(o, _)| *o >= from) {
            records += 1;
            match record {
                LogRecord::Offset(record) => apply(&mut live, record),
                LogRecord::Group(group, value) => {
                    groups.insert(group, value);
                }
                LogRecord::Consumer(key, value) => {
                    consumer.insert(key, value);
                }
            }
        }
    }
    Ok((live, groups, records, consumer))
}

impl<S: Storage + 'static> Journal for ReplicatedJournal<S> {
    async fn append(&self, group_id: &str, records: Vec<OffsetRecord>) -> Result<(), ErrorCode> {
        let partition = offsets_partition(group_id);
        if records.is_empty() {
            return self.log.ready(partition);
        }
        let batch = encode_batch(&records, self.clock.now());
        self.log.append(partition, batch).await
    }

    fn ready(&self, group_id: &str) -> Result<(), ErrorCode> {
        self.log.ready(offsets_partition(group_id))
    }

    fn writes_membership(&self) -> bool {
        true
    }

    async fn append_group(
        &self,
        group_id: &str,
        value: Option<GroupMetadata>,
    ) -> Result<(), ErrorCode> {
        let batch = encode_group_batch(group_id, value.as_ref(), self.clock.now());
        self.log.append(offsets_partition(group_id), batch).await
    }

    async fn append_consumer(
        &self,
        group_id: &str,
        records: Vec<super::consumer::records::RawRecord>,
    ) -> Result<(), ErrorCode> {
        match super::consumer::records::encode_batch(records, self.clock.now()) {
            Some(batch) => self.log.append(offsets_partition(group_id), batch).await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_types::{LeaderEpoch, Offset, PartitionIndex, TimestampMs, TopicPartitionRef};

    fn record(group: &str, partition: i32, offset: Option<i64>) -> OffsetRecord {
        OffsetRecord {
            key: OffsetKey::committed(
                group,
                TopicPartitionRef::new("t", PartitionIndex(partition)),
            ),
            value: offset.map(|o| CommittedOffset {
                offset: Offset(o),
                leader_epoch: LeaderEpoch::NONE,
                metadata: None,
                commit_time_ms: TimestampMs(5),
            }),
        }
    }

    #[test]
    fn a_load_keeps_the_latest_value_of_each_key_and_skips_what_precedes_a_read() {
        let first = encode_batch(
            &[record("g", 0, Some(1)), record("g", 1, Some(7))],
            TimestampMs(1),
        );
        let second = encode_batch(
            &[record("g", 0, Some(2)), record("g", 1, None)],
            TimestampMs(2),
        );
        let first = bytes::Bytes::copy_from_slice(first.as_bytes());
        let mut second = bytes::BytesMut::from(second.as_bytes());
        second[..8].copy_from_slice(&2i64.to_be_bytes()); // base offset 2
        let second = second.freeze();
        let chunks = vec![
            (Offset(0), first.clone()),
            (Offset(2), second),
            (Offset(4), first), // offsets 0-1 again, before this read's start: skipped
        ];
        let (live, _, records, _) = live_of(chunks).unwrap();
        assert_eq!(records, 4);
        assert_eq!(live.len(), 1);
        assert_eq!(
            live[&OffsetKey::committed("g", TopicPartitionRef::new("t", PartitionIndex(0)))].offset,
            Offset(2)
        );
    }

    #[test]
    fn a_load_keeps_each_groups_latest_membership_and_its_tombstone() {
        use crate::group::metadata_record::{encode_group_batch, GroupMetadata};
        let meta = |generation| GroupMetadata {
            protocol_type: "consumer".into(),
            generation,
            protocol_name: Some("range".into()),
            leader: None,
            current_state_timestamp_ms: TimestampMs(1),
            members: vec![],
        };
        let at = |base: i64, batch: rill_types::batch::ValidatedBatch| {
            let mut b = bytes::BytesMut::from(batch.as_bytes());
            b[..8].copy_from_slice(&base.to_be_bytes());
            (Offset(base), b.freeze())
        };
        let chunks = vec![
            at(0, encode_group_batch("g", Some(&meta(1)), TimestampMs(1))),
            at(1, encode_group_batch("h", Some(&meta(4)), TimestampMs(1))),
            at(2, encode_group_batch("g", Some(&meta(2)), TimestampMs(1))),
            at(3, encode_group_batch("h", None, TimestampMs(1))),
            at(4, encode_batch(&[record("g", 0, Some(3))], TimestampMs(1))),
        ];
        let (live, groups, records, _) = live_of(chunks).unwrap();
        assert_eq!(records, 5);
        assert_eq!(live.len(), 1);
        assert_eq!(groups["g"].as_ref().map(|m| m.generation), Some(2));
        assert_eq!(groups["h"], None, "deleted");
    }
}
