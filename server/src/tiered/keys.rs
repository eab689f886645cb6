//! Where a segment's objects live in the bucket.
//!
//! ```text
//! <prefix>/<topic>-<topic id>/<partition>/<base offset, 20 digits>-<segment id>.<suffix>
//!
//! rill/orders-6b1d…c0/3/00000000000000001234-0f4e…9a.log               the .log, byte for byte
//!                                               ….index             the sparse offset index
//!                                               ….timeindex         the sparse time index
//!                                               ….txnindex          aborted transactions (if any)
//!                                               ….snapshot          producer.snapshot at copy time
//!                                               ….leader_epoch_checkpoint
//! ```
//! As Kafka's remote storage managers name them: the topic id keeps a re-created topic of the
//! same name apart; the segment id (a UUID per copy attempt) keeps an interrupted copy's
//! objects apart from a retried one, so a retry never overwrites what the metadata may point
//! at, and a crash leaves only objects under ids the metadata names (`COPY_STARTED`), which
//! the next start deletes.

use rill_types::{Offset, PartitionIndex};
use uuid::Uuid;

/// The files of a segment copied to the remote tier, by object suffix.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// `.log`.
    Log,
    /// `.index`.
    Index,
    /// `.timeindex`.
    TimeIndex,
    /// `.txnindex`.
    TxnIndex,
    /// `producer.snapshot`.
    ProducerSnapshot,
    /// `leader-epoch-checkpoint`.
    LeaderEpochs,
}

impl ObjectKind {
    /// The object name's suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            ObjectKind::Log => "log",
            ObjectKind::Index => "index",
            ObjectKind::TimeIndex => "timeindex",
            ObjectKind::TxnIndex => "txnindex",
            ObjectKind::ProducerSnapshot => "snapshot",
            ObjectKind::LeaderEpochs => "leader_epoch_checkpoint",
        }
    }
}

/// A partition's place in the bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionKeys {
    /// `<prefix>/<topic>-<topic id>/<partition>`.
    dir: String,
}

impl PartitionKeys {
    /// The keys of `topic`'s (id `topic_id`) partition `partition` under `prefix`.
    pub fn new(prefix: &str, topic: &str, topic_id: Uuid, partition: PartitionIndex) -> Self {
        let dir = format!("{topic}-{}/{partition}", topic_id.simple());
        let dir = if prefix.is_empty() {
            dir
        } else {
            format!("{prefix}/{dir}")
        };
        PartitionKeys { dir }
    }

    /// The key of one object of the segment at `base` copied as `segment_id`.
    pub fn object(&self, base: Offset, segment_id: Uuid, kind: ObjectKind) -> String {
        format!(
            "{}/{:020}-{}.{}",
            self.dir,
            base.0,
            segment_id.simple(),
            kind.suffix()
        )
    }

    /// The prefix every object of the partition starts with.
    pub fn dir(&self) -> &str {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_documented_layout() {
        let id = Uuid::from_u128(0xab);
        let seg = Uuid::from_u128(0xcd);
        let keys = PartitionKeys::new("rill", "orders", id, PartitionIndex(3));
        let key = keys.object(Offset(1234), seg, ObjectKind::Log);
        assert_eq!(
            key,
            "rill/orders-000000000000000000000000000000ab/3/00000000000000001234-000000000000000000000000000000cd.log"
        );
        assert!(key.starts_with(keys.dir()));
        let bare = PartitionKeys::new("", "t", id, PartitionIndex(0));
        assert!(bare.dir().starts_with("t-"));
    }
}
