//! Offsets committed inside transactions (TxnOffsetCommit, KIP-98/447): pending per producer
//! until the transaction ends, then committed or dropped, atomically and durably.
//!
//! | operation   | offsets log (one batch)                          | in memory                  |
//! |-------------|--------------------------------------------------|----------------------------|
//! | TxnCommit   | pending keys (group, topic, partition, producer) | `Group::pending_txn`       |
//! | TxnEnd ok   | pending tombstones + the same offsets committed  | moved to `Group::offsets`  |
//! | TxnEnd fail | pending tombstones                               | dropped                    |
//!
//! The transaction coordinator sends TxnCommit only for a group in the producer's transaction
//! and holds the transaction busy meanwhile, so a TxnEnd never overtakes it.

use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, ProducerId, TopicPartitionRef};

use super::coordinator::GroupCoordinator;
use super::journal::Journal;
use super::offsets::{CommittedOffset, OffsetKey, OffsetRecord};
use super::ops::{GroupReply, MemberRef, TopicPartitions};
use super::state::Group;

impl<J: Journal> GroupCoordinator<J> {
    /// TxnOffsetCommit: the offsets, durable, pending in the producer's transaction.
    pub(super) async fn txn_commit(
        &self,
        group_id: &str,
        producer: ProducerId,
        who: MemberRef,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now: rill_types::TimestampMs,
    ) -> GroupReply {
        // Without a generation or member id Kafka does not check the member (clients before
        // KIP-447 send neither); otherwise as for OffsetCommit.
        let unchecked = who.generation_id < 0 && who.member_id.is_empty();
        // A KIP-848 group checks the member and its epoch as OffsetCommit does (Kafka's
        // `ConsumerGroup.validateOffsetCommit`, transactional); TxnOffsetCommit has no
        // STALE_MEMBER_EPOCH, so Kafka answers ILLEGAL_GENERATION for it.
        if let Some(code) = self.validate_consumer_commit(group_id, &who, &offsets) {
            let code = match code {
                _ if unchecked => ErrorCode::None,
                ErrorCode::StaleMemberEpoch => ErrorCode::IllegalGeneration,
                code => code,
            };
            if !code.is_ok() {
                return GroupReply::Commit(vec![code; offsets.len()]);
            }
            return self
                .write_offsets(group_id, offsets, now, |tp| {
                    OffsetKey::pending(group_id, tp, producer)
                })
                .await;
        }
        if !self.may_create(group_id) {
            return GroupReply::Commit(vec![ErrorCode::GroupMaxSizeReached; offsets.len()]);
        }
        let allowed = self
            .with_group(group_id, true, |g| {
                if unchecked {
                    Ok(())
                } else {
                    g.validate_commit(&who, now)
                }
            })
            .expect("created");
        if let Err(code) = allowed {
            return GroupReply::Commit(vec![code; offsets.len()]);
        }
        self.write_offsets(group_id, offsets, now, |tp| {
            OffsetKey::pending(group_id, tp, producer)
        })
        .await
    }

    /// The producer's transaction ended: its pending offsets in the group are committed
    /// (visible to OffsetFetch from now on) or dropped, in one durable batch.
    pub(super) async fn txn_end(
        &self,
        group_id: &str,
        producer: ProducerId,
        commit: bool,
    ) -> GroupReply {
        let pending: Vec<((String, i32), CommittedOffset)> = self
            .with_group(group_id, false, |g| {
                g.pending_txn
                    .get(&producer)
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            })
            .flatten()
            .unwrap_or_default();
        if pending.is_empty() {
            return GroupReply::TxnEnd(ErrorCode::None);
        }
        let mut records = Vec::with_capacity(pending.len() * 2);
        for ((topic, partition), value) in pending {
            let tp = TopicPartitionRef::new(&topic, PartitionIndex(partition));
            records.push(OffsetRecord {
                key: OffsetKey::pending(group_id, tp, producer),
                value: None,
            });
            if commit {
                records.push(OffsetRecord {
                    key: OffsetKey::committed(group_id, tp),
                    value: Some(value),
                });
            }
        }
        if let Err(code) = self.journal().append(group_id, records.clone()).await {
            return GroupReply::TxnEnd(code);
        }
        self.apply(group_id, records);
        GroupReply::TxnEnd(ErrorCode::None)
    }

    /// The partitions (of `topics`, or all) with offsets pending in an open transaction.
    pub(super) fn pending_txn(
        &self,
        group_id: &str,
        topics: Option<Vec<TopicPartitions>>,
    ) -> GroupReply {
        let pending = self
            .with_group(group_id, false, |g| pending_partitions(g, topics))
            .unwrap_or_default();
        GroupReply::PendingTxn(pending)
    }
}

fn pending_partitions(group: &Group, topics: Option<Vec<TopicPartitions>>) -> Vec<(String, i32)> {
    let mut all: Vec<(String, i32)> = group
        .pending_txn
        .values()
        .flat_map(|offsets| offsets.keys().cloned())
        .collect();
    all.sort();
    all.dedup();
    match topics {
        None => all,
        Some(topics) => all
            .into_iter()
            .filter(|(t, p)| {
                topics
                    .iter()
                    .any(|(topic, ps)| topic == t && ps.contains(p))
            })
            .collect(),
    }
}

/// Applies one record to a group's committed or pending offsets.
pub(super) fn apply_record(group: &mut Group, record: OffsetRecord) {
    // The group's maps still key by (topic, i32) (issue 33: next pass).
    let key = (record.key.tp.topic, record.key.tp.partition.0);
    match (record.key.pending_for, record.value) {
        (None, Some(value)) => {
            group.offsets.insert(key, value);
        }
        (None, None) => {
            group.offsets.remove(&key);
        }
        (Some(producer), Some(value)) => {
            group
                .pending_txn
                .entry(producer)
                .or_default()
                .insert(key, value);
        }
        (Some(producer), None) => {
            if let Some(pending) = group.pending_txn.get_mut(&producer) {
                pending.remove(&key);
                if pending.is_empty() {
                    group.pending_txn.remove(&producer);
                }
            }
        }
    }
}
