//! A consumer group in `__consumer_offsets`, in Kafka's coordinator record types (its
//! group-coordinator JSONs): ConsumerGroupMetadata (key 3: the group epoch),
//! ConsumerGroupMemberMetadata (5: a member's subscription), ConsumerGroupTargetAssignmentMetadata
//! (6: the target's epoch), ConsumerGroupTargetAssignmentMember (7: a member's target) and
//! ConsumerGroupCurrentMemberAssignment (8: its epochs, state, owned and pending partitions).
//!
//! A key is an i16 record type then the group id (and member id) as non-flexible strings; a
//! value is an i16 version (0) then its fields in the flexible encoding (compact strings and
//! arrays, a tagged-field section after each struct); a tombstone (no value) deletes the key.
//! Rill's own offset and group keys start with a version byte 1-3, these with 0x00, so both live
//! in one log. The coordinator writes a group's records before it answers the heartbeat that
//! changed it; a new coordinator rebuilds the group from the latest record of each key.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_types::PartitionIndex;
use uuid::Uuid;

use super::{Assignment, ConsumerConfig, ConsumerGroup, MemberState};
use crate::record_fields::{get_i16, get_nullable_str, put_nullable_str, Malformed};

const GROUP_METADATA: i16 = 3;
const MEMBER_METADATA: i16 = 5;
const TARGET_METADATA: i16 = 6;
const TARGET_MEMBER: i16 = 7;
const CURRENT_MEMBER: i16 = 8;
const VALUE_VERSION: i16 = 0;

/// One record: key bytes and value bytes (`None`: a tombstone).
pub type RawRecord = (Bytes, Option<Bytes>);

/// `records` as one batch for the offsets log, stamped `timestamp_ms` (`None`: no record).
pub fn encode_batch(
    records: Vec<RawRecord>,
    timestamp_ms: rill_types::TimestampMs,
) -> Option<rill_types::batch::ValidatedBatch> {
    if records.is_empty() {
        return None;
    }
    let bytes = rill_protocol::record::encode_plain_batch(records.into_iter().map(|(k, v)| {
        rill_protocol::record::PlainRecord {
            key: Some(k),
            value: v,
            timestamp_ms: timestamp_ms.0,
        }
    }));
    let batch = rill_types::batch::ValidatedBatch::new(bytes, usize::MAX)
        .expect("an encoded consumer group batch is valid");
    Some(batch)
}

/// Whether a key of the offsets log is one of these records (its first byte is 0x00).
pub fn is_consumer_group_key(key: &[u8]) -> bool {
    key.first() == Some(&0)
}

fn key(kind: i16, group: &str, member: Option<&str>) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(kind);
    put_nullable_str(&mut out, Some(group));
    if let Some(m) = member {
        put_nullable_str(&mut out, Some(m));
    }
    out.freeze()
}

fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn put_compact_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => {
            put_uvarint(out, s.len() as u64 + 1);
            out.put_slice(s.as_bytes());
        }
    }
}

fn put_len(out: &mut BytesMut, n: usize) {
    put_uvarint(out, n as u64 + 1);
}

/// An empty tagged-field section.
fn put_no_tags(out: &mut BytesMut) {
    put_uvarint(out, 0);
}

fn put_partitions(out: &mut BytesMut, a: &Assignment) {
    put_len(out, a.len());
    for (topic, parts) in a {
        out.put_slice(topic.as_bytes());
        put_len(out, parts.len());
        for p in parts {
            out.put_i32(p.0);
        }
        put_no_tags(out);
    }
}

fn value(fill: impl FnOnce(&mut BytesMut)) -> Option<Bytes> {
    let mut out = BytesMut::new();
    out.put_i16(VALUE_VERSION);
    fill(&mut out);
    put_no_tags(&mut out);
    Some(out.freeze())
}

/// The records that bring the log up to `group`: its epochs, every member's three records, and
/// tombstones for the members in `removed`.
pub fn encode(group: &ConsumerGroup, removed: &[String]) -> Vec<RawRecord> {
    let id = group.id.as_str();
    let mut out = vec![
        (
            key(GROUP_METADATA, id, None),
            value(|o| o.put_i32(group.epoch)),
        ),
        (
            key(TARGET_METADATA, id, None),
            value(|o| o.put_i32(group.assignment_epoch)),
        ),
    ];
    for m in group.members.values() {
        out.push((
            key(MEMBER_METADATA, id, Some(&m.id)),
            value(|o| {
                put_compact_str(o, m.instance_id.as_deref());
                put_compact_str(o, m.rack_id.as_deref());
                put_compact_str(o, Some(&m.client_id));
                put_compact_str(o, Some(&m.client_host));
                put_len(o, m.topic_names.len());
                for t in &m.topic_names {
                    put_compact_str(o, Some(t));
                }
                put_compact_str(o, m.regex.as_deref());
                o.put_i32(m.rebalance_timeout_ms);
                put_compact_str(o, m.server_assignor.as_deref());
            }),
        ));
        let target = group.target.get(&m.id).cloned().unwrap_or_default();
        out.push((
            key(TARGET_MEMBER, id, Some(&m.id)),
            value(|o| put_partitions(o, &target)),
        ));
        out.push((
            key(CURRENT_MEMBER, id, Some(&m.id)),
            value(|o| {
                o.put_i32(m.epoch);
                o.put_i32(m.previous_epoch);
                o.put_i8(m.state.code());
                put_partitions(o, &m.assigned);
                put_partitions(o, &m.pending_revocation);
            }),
        ));
    }
    for gone in removed.iter().filter(|r| !group.members.contains_key(*r)) {
        for kind in [MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER] {
            out.push((key(kind, id, Some(gone)), None));
        }
    }
    out
}

/// Tombstones of a deleted group's own records (its members' are gone already: it had none).
pub fn encode_deleted(group_id: &str) -> Vec<RawRecord> {
    vec![
        (key(GROUP_METADATA, group_id, None), None),
        (key(TARGET_METADATA, group_id, None), None),
    ]
}

/// A key's (record type, group id, member id).
fn parse_key(mut k: Bytes) -> Result<(i16, String, Option<String>), Malformed> {
    let kind = get_i16(&mut k)?;
    let group = get_nullable_str(&mut k)?.ok_or(Malformed)?;
    let member = match kind {
        GROUP_METADATA | TARGET_METADATA => None,
        MEMBER_METADATA | TARGET_MEMBER | CURRENT_MEMBER => {
            Some(get_nullable_str(&mut k)?.ok_or(Malformed)?)
        }
        _ => return Err(Malformed),
    };
    if k.has_remaining() {
        return Err(Malformed);
    }
    Ok((kind, group, member))
}

fn get_uvarint(b: &mut Bytes) -> Result<u64, Malformed> {
    let mut v = 0u64;
    for shift in (0..35).step_by(7) {
        if !b.has_remaining() {
            return Err(Malformed);
        }
        let byte = b.get_u8();
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(Malformed)
}

fn get_compact_str(b: &mut Bytes) -> Result<Option<String>, Malformed> {
    let n = get_uvarint(b)? as usize;
    if n == 0 {
        return Ok(None);
    }
    if b.remaining() < n - 1 {
        return Err(Malformed);
    }
    let s = b.split_to(n - 1);
    String::from_utf8(s.to_vec())
        .map(Some)
        .map_err(|_| Malformed)
}

/// A compact array's length, checked against what is left (each element takes `min` bytes).
fn get_len(b: &mut Bytes, min: usize) -> Result<usize, Malformed> {
    let n = get_uvarint(b)? as usize;
    let n = n.checked_sub(1).ok_or(Malformed)?;
    if n > b.remaining() / min.max(1) {
        return Err(Malformed);
    }
    Ok(n)
}

fn skip_tags(b: &mut Bytes) -> Result<(), Malformed> {
    for _ in 0..get_uvarint(b)? {
        get_uvarint(b)?;
        let size = get_uvarint(b)? as usize;
        if b.remaining() < size {
            return Err(Malformed);
        }
        b.advance(size);
    }
    Ok(())
}

fn get_i32(b: &mut Bytes) -> Result<i32, Malformed> {
    if b.remaining() < 4 {
        return Err(Malformed);
    }
    Ok(b.get_i32())
}

fn get_partitions(b: &mut Bytes) -> Result<Assignment, Malformed> {
    let mut out = Assignment::new();
    for _ in 0..get_len(b, 18)? {
        if b.remaining() < 16 {
            return Err(Malformed);
        }
        let mut id = [0u8; 16];
        b.copy_to_slice(&mut id);
        let mut parts = std::collections::BTreeSet::new();
        for _ in 0..get_len(b, 4)? {
            parts.insert(PartitionIndex(get_i32(b)?));
        }
        skip_tags(b)?;
        if !parts.is_empty() {
            out.insert(Uuid::from_bytes(id), parts);
        }
    }
    Ok(out)
}

fn value_body(mut v: Bytes) -> Result<Bytes, Malformed> {
    if get_i16(&mut v)? != VALUE_VERSION {
        return Err(Malformed);
    }
    Ok(v)
}

/// The consumer groups the latest records (key bytes → value, `None`: deleted) describe, with
/// sessions not yet started ([`ConsumerGroup::restart_sessions`]). A record that does not parse
/// is skipped with a warning (the rest of the group still loads).
pub fn restore(records: Vec<RawRecord>, config: ConsumerConfig) -> Vec<ConsumerGroup> {
    let mut groups: BTreeMap<String, ConsumerGroup> = BTreeMap::new();
    let mut current: Vec<(String, String, Bytes)> = Vec::new();
    let mut targets: Vec<(String, String, Bytes)> = Vec::new();
    for (k, v) in records {
        let Some(v) = v else { continue };
        let parsed = parse_key(k).and_then(|(kind, g, m)| Ok((kind, g, m, value_body(v)?)));
        let Ok((kind, group_id, member, mut body)) = parsed else {
            tracing::warn!("skipping a malformed consumer group record");
            continue;
        };
        let group = groups
            .entry(group_id.clone())
            .or_insert_with(|| ConsumerGroup::new(&group_id, config));
        let ok = match (kind, member) {
            (GROUP_METADATA, None) => get_i32(&mut body).map(|e| group.epoch = e),
            (TARGET_METADATA, None) => get_i32(&mut body).map(|e| group.assignment_epoch = e),
            (MEMBER_METADATA, Some(m)) => member_metadata(group, m, &mut body),
            (CURRENT_MEMBER, Some(m)) => {
                current.push((group_id.clone(), m, body));
                Ok(())
            }
            (TARGET_MEMBER, Some(m)) => {
                targets.push((group_id.clone(), m, body));
                Ok(())
            }
            _ => Err(Malformed),
        };
        if ok.is_err() {
            tracing::warn!(
                group = group_id,
                "skipping a malformed consumer group record"
            );
        }
    }
    for (group_id, member, mut body) in targets {
        if let (Some(g), Ok(a)) = (groups.get_mut(&group_id), get_partitions(&mut body)) {
            if g.members.contains_key(&member) {
                g.target.insert(member, a);
            }
        }
    }
    for (group_id, member, mut body) in current {
        let Some(m) = groups
            .get_mut(&group_id)
            .and_then(|g| g.members.get_mut(&member))
        else {
            continue;
        };
        if apply_current(m, &mut body).is_err() {
            tracing::warn!(
                group = group_id,
                "skipping a malformed member assignment record"
            );
        }
    }
    for g in groups.values_mut() {
        // The assignor is chosen anew at the next target; until then, what the members ask.
        g.assignor = g.choose_assignor();
    }
    groups.into_values().collect()
}

/// A ConsumerGroupCurrentMemberAssignmentValue's fields into the member.
fn apply_current(m: &mut super::ConsumerMember, body: &mut Bytes) -> Result<(), Malformed> {
    let epoch = get_i32(body)?;
    let previous = get_i32(body)?;
    if !body.has_remaining() {
        return Err(Malformed);
    }
    let state = MemberState::from_code(body.get_i8());
    let assigned = get_partitions(body)?;
    let pending = get_partitions(body)?;
    m.epoch = epoch;
    m.previous_epoch = previous;
    m.state = state;
    // Held since this epoch at the latest (the records keep no assignment epochs): a commit
    // at it still lands after the first heartbeat of a restored group bumps the epoch.
    m.assigned_at = assigned
        .iter()
        .chain(pending.iter())
        .flat_map(|(topic, parts)| parts.iter().map(move |p| ((*topic, *p), epoch)))
        .collect();
    m.assigned = assigned;
    m.pending_revocation = pending;
    Ok(())
}

fn member_metadata(group: &mut ConsumerGroup, id: String, b: &mut Bytes) -> Result<(), Malformed> {
    let instance_id = get_compact_str(b)?;
    let rack_id = get_compact_str(b)?;
    let client_id = get_compact_str(b)?.unwrap_or_default();
    let client_host = get_compact_str(b)?.unwrap_or_default();
    let mut topic_names = Vec::new();
    for _ in 0..get_len(b, 1)? {
        topic_names.extend(get_compact_str(b)?);
    }
    let regex = get_compact_str(b)?;
    let rebalance_timeout_ms = get_i32(b)?;
    let server_assignor = get_compact_str(b)?;
    let member = ConsumerGroup::restored_member(
        id,
        instance_id,
        rack_id,
        client_id,
        client_host,
        topic_names,
        regex,
        server_assignor,
        rebalance_timeout_ms,
    );
    group.restore_member(member);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::consumer::Assignor;
    use crate::group::ops::{ConsumerHeartbeatArgs, TopicInfo};
    use rill_protocol::ErrorCode;
    use rill_types::{TimestampMs, TopicPartitionRef};

    fn latest(records: Vec<RawRecord>) -> Vec<RawRecord> {
        let mut map: BTreeMap<Bytes, Option<Bytes>> = BTreeMap::new();
        for (k, v) in records {
            map.insert(k, v);
        }
        map.into_iter().collect()
    }

    #[test]
    fn a_restored_member_commits_at_its_epoch_after_the_first_heartbeat_bumps_it() {
        let config = ConsumerConfig::default();
        let mut g = ConsumerGroup::new("g", config);
        let topics = vec![TopicInfo {
            name: "t".into(),
            id: Uuid::from_bytes([7; 16]),
            partitions: 2,
        }];
        let args = |epoch, owned: Option<Vec<_>>| ConsumerHeartbeatArgs {
            version: 1,
            member_id: "a".into(),
            member_epoch: epoch,
            rebalance_timeout_ms: if epoch == 0 { 9_000 } else { -1 },
            subscribed_topic_names: (epoch == 0).then(|| vec!["t".into()]),
            owned,
            topics: topics.clone(),
            ..Default::default()
        };
        let joined = g.heartbeat(args(0, Some(Vec::new())), TimestampMs(0));
        let epoch = joined.member_epoch;
        let owned = joined.assignment.expect("assigned");
        let commit = |g: &ConsumerGroup, epoch| {
            let at = |p| TopicPartitionRef::new("t", PartitionIndex(p));
            g.validate_commit("a", epoch, [at(0), at(1)])
        };
        assert_eq!(commit(&g, epoch), ErrorCode::None);
        // Restored, the group resolves its subscriptions anew: the first heartbeat bumps the
        // epoch, while a commit the client sent before its answer still carries the old one.
        let mut restored = restore(latest(encode(&g, &[])), config).remove(0);
        restored.restart_sessions(TimestampMs(10));
        let answer = restored.heartbeat(args(epoch, Some(owned)), TimestampMs(10));
        assert!(answer.error_code.is_ok(), "{answer:?}");
        assert!(answer.member_epoch > epoch, "the epoch moved: {answer:?}");
        assert_eq!(commit(&restored, epoch), ErrorCode::None);
        assert_eq!(commit(&restored, answer.member_epoch), ErrorCode::None);
        assert_eq!(commit(&restored, epoch - 1), ErrorCode::StaleMemberEpoch);
    }

    #[test]
    fn a_group_round_trips_through_its_records() {
        let config = ConsumerConfig::default();
        let mut g = ConsumerGroup::new("g", config);
        let topics = vec![TopicInfo {
            name: "t".into(),
            id: Uuid::from_bytes([7; 16]),
            partitions: 4,
        }];
        for (m, inst) in [("a", Some("i-a")), ("b", None)] {
            let r = g.heartbeat(
                ConsumerHeartbeatArgs {
                    version: 1,
                    member_id: m.into(),
                    member_epoch: 0,
                    instance_id: inst.map(String::from),
                    rebalance_timeout_ms: 9_000,
                    subscribed_topic_names: Some(vec!["t".into()]),
                    subscribed_topic_regex: Some("x.*".into()),
                    server_assignor: Some("range".into()),
                    owned: Some(Vec::new()),
                    client_id: format!("c-{m}"),
                    topics: topics.clone(),
                    ..Default::default()
                },
                TimestampMs(0),
            );
            assert!(r.error_code.is_ok());
        }
        let mut records = encode(&g, &[]);
        records.extend(encode(&g, &["gone".to_string()]));
        let restored = restore(latest(records), config);
        assert_eq!(restored.len(), 1);
        let r = &restored[0];
        assert_eq!((r.epoch, r.assignment_epoch), (g.epoch, g.assignment_epoch));
        assert_eq!(r.target, g.target);
        assert_eq!(r.assignor, Assignor::Range);
        for (id, m) in &g.members {
            let back = &r.members[id];
            assert_eq!(back.instance_id, m.instance_id);
            assert_eq!(back.client_id, m.client_id);
            assert_eq!(back.topic_names, m.topic_names);
            assert_eq!(back.regex, m.regex);
            assert_eq!(back.rebalance_timeout_ms, 9_000);
            assert_eq!(
                (back.epoch, back.previous_epoch),
                (m.epoch, m.previous_epoch)
            );
            assert_eq!(back.state, m.state);
            assert_eq!(back.assigned, m.assigned);
            assert_eq!(back.pending_revocation, m.pending_revocation);
        }
        // A removed member's tombstones remove it; a deleted group's remove the group.
        let mut records = encode(&g, &[]);
        g.remove("b");
        records.extend(encode(&g, &["b".to_string()]));
        let restored = restore(latest(records), config);
        assert!(!restored[0].members.contains_key("b"));
    }

    #[test]
    fn malformed_records_are_skipped_not_fatal() {
        let config = ConsumerConfig::default();
        let junk: Vec<RawRecord> = vec![
            (
                Bytes::from_static(b"\x00\x05\x00\x01g"),
                Some(Bytes::from_static(b"\x00")),
            ),
            (
                key(MEMBER_METADATA, "g", Some("m")),
                Some(Bytes::from_static(b"\x00\x00\xff\xff\xff\xff\xff")),
            ),
            (
                key(CURRENT_MEMBER, "g", Some("m")),
                Some(Bytes::from_static(b"\x00\x00\x00")),
            ),
            (key(9, "g", None), Some(Bytes::new())),
        ];
        let restored = restore(junk, config);
        assert!(restored.iter().all(|g| g.members.is_empty()));
        assert!(is_consumer_group_key(&key(GROUP_METADATA, "g", None)));
        assert!(!is_consumer_group_key(b"\x01abc"));
    }
}
