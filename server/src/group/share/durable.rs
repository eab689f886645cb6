//! Share-partition start offsets (SPSO) made durable in the group's own offsets log, as
//! committed-offset records under a reserved group id: `STATE_PREFIX` + the share group's id,
//! the topic id's text as the topic, the partition, and the start offset as the offset. They
//! live in the share group's offsets partition (the journal is told the real group id), are
//! compacted by key like any commit, and are taken apart from the classic groups on replay.
//!
//! Only the start is kept, not the in-flight window (Kafka's `__share_group_state` keeps both):
//! after a restart every record from the start on is delivered again (at least once), and
//! nothing below it ever is. No client can name the reserved ids: the coordinator refuses every
//! group id that starts with the prefix (INVALID_GROUP_ID).

use rill_types::limits::RECORD_STRING_BYTES_MAX;
use rill_types::{LeaderEpoch, Offset};
use uuid::Uuid;

use crate::group::offsets::{CommittedOffset, OffsetKey, OffsetRecord};
use crate::group::ops::share::ShareKey;

/// The reserved prefix of the group ids share state is written under.
pub const STATE_PREFIX: &str = "\u{0}share-state\u{0}";

/// The record of share-partition `key`'s start in `group` (`None`: a tombstone); `None` when
/// the group id is too long for the prefix to fit a record string (such a group's state stays
/// in memory).
pub fn record(group: &str, key: ShareKey, start: Option<Offset>, now: i64) -> Option<OffsetRecord> {
    if STATE_PREFIX.len() + group.len() > RECORD_STRING_BYTES_MAX {
        return None;
    }
    Some(OffsetRecord {
        key: OffsetKey::committed(&format!("{STATE_PREFIX}{group}"), &key.0.to_string(), key.1),
        value: start.map(|offset| CommittedOffset {
            offset,
            leader_epoch: LeaderEpoch::NONE,
            metadata: None,
            commit_time_ms: now,
        }),
    })
}

/// Replayed committed offsets.
pub type Live = Vec<(OffsetKey, CommittedOffset)>;
/// Share-partition starts by group: (group, share-partition, start).
pub type Starts = Vec<(String, ShareKey, Offset)>;

/// Splits replayed entries into the classic groups' and the share groups' starts
/// (group, share-partition, start).
pub fn split(live: Live) -> (Live, Starts) {
    let mut classic = Vec::with_capacity(live.len());
    let mut starts = Vec::new();
    for (key, value) in live {
        let Some(group) = key.group.strip_prefix(STATE_PREFIX) else {
            classic.push((key, value));
            continue;
        };
        if let Ok(topic) = key.topic.parse::<Uuid>() {
            starts.push((group.to_string(), (topic, key.partition), value.offset));
        }
    }
    (classic, starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_round_trip_and_stay_apart_from_classic_groups() {
        let key = (Uuid::from_u128(9), 2);
        let r = record("g", key, Some(Offset(7)), 1).unwrap();
        let classic = OffsetKey::committed("g", "t", 0);
        let value = r.value.clone().unwrap();
        let (c, s) = split(vec![(r.key, value.clone()), (classic.clone(), value)]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, classic);
        assert_eq!(s, vec![("g".to_string(), key, Offset(7))]);
        assert!(record("g", key, None, 1).unwrap().value.is_none());
        let long = "x".repeat(RECORD_STRING_BYTES_MAX);
        assert!(record(&long, key, Some(Offset(1)), 1).is_none());
    }
}
