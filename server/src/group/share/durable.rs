//! Share-partition state made durable in the group's own offsets log, as committed-offset
//! records under a reserved group id: `STATE_PREFIX` + the share group's id, the topic id's text
//! as the topic, the partition, the start offset (SPSO) as the offset and the done runs past it
//! ([`super::partition::SharePartition::done_runs`]) as the metadata. They
//! live in the share group's offsets partition (the journal is told the real group id), are
//! compacted by key like any commit, and are taken apart from the classic groups on replay.
//!
//! Delivery counts are not kept (Kafka's `__share_group_state` keeps them): after a restart the
//! records not done are delivered again counting from 1; no done record ever is. No client can name the reserved ids: the coordinator refuses every
//! group id that starts with the prefix (INVALID_GROUP_ID).

use rill_types::limits::RECORD_STRING_BYTES_MAX;
use rill_types::{LeaderEpoch, TopicPartitionRef};
use uuid::Uuid;

use crate::group::offsets::{CommittedOffset, OffsetKey, OffsetRecord};
use crate::group::ops::share::ShareKey;
use crate::group::share::Durable;

/// The reserved prefix of the group ids share state is written under.
pub const STATE_PREFIX: &str = "\u{0}share-state\u{0}";

/// The record of share-partition `key`'s start in `group` (`None`: a tombstone); `None` when
/// the group id is too long for the prefix to fit a record string (such a group's state stays
/// in memory).
pub fn record(
    group: &str,
    key: ShareKey,
    state: Option<&Durable>,
    now: i64,
) -> Option<OffsetRecord> {
    if STATE_PREFIX.len() + group.len() > RECORD_STRING_BYTES_MAX {
        return None;
    }
    Some(OffsetRecord {
        key: OffsetKey::committed(
            &format!("{STATE_PREFIX}{group}"),
            TopicPartitionRef::new(&key.0.to_string(), key.1),
        ),
        value: state.map(|d| CommittedOffset {
            offset: d.start,
            leader_epoch: LeaderEpoch::NONE,
            metadata: (!d.done.is_empty()).then(|| d.done.clone()),
            commit_time_ms: rill_types::TimestampMs(now),
        }),
    })
}

/// Replayed committed offsets.
pub type Live = Vec<(OffsetKey, CommittedOffset)>;
/// Share-partition starts by group: (group, share-partition, start).
pub type Starts = Vec<(String, ShareKey, Durable)>;

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
        if let Ok(topic) = key.tp.topic.parse::<Uuid>() {
            let state = Durable {
                start: value.offset,
                done: value.metadata.unwrap_or_default(),
            };
            starts.push((group.to_string(), (topic, key.tp.partition), state));
        }
    }
    (classic, starts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_types::{Offset, PartitionIndex};

    #[test]
    fn starts_round_trip_and_stay_apart_from_classic_groups() {
        let key = (Uuid::from_u128(9), PartitionIndex(2));
        let state = Durable {
            start: Offset(7),
            done: "2:3".to_string(),
        };
        let r = record("g", key, Some(&state), 1).unwrap();
        let classic = OffsetKey::committed("g", TopicPartitionRef::new("t", PartitionIndex(0)));
        let value = r.value.clone().unwrap();
        let (c, s) = split(vec![(r.key, value.clone()), (classic.clone(), value)]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, classic);
        assert_eq!(s, vec![("g".to_string(), key, state.clone())]);
        assert!(record("g", key, None, 1).unwrap().value.is_none());
        let long = "x".repeat(RECORD_STRING_BYTES_MAX);
        assert!(record(&long, key, Some(&state), 1).is_none());
    }
}
