//! A group's membership as a record of the offsets log (Kafka's GroupMetadata record): what a
//! coordinator writes when a rebalance completes and what a new coordinator restores.
//!
//! The key is one version byte ([`GROUP_KEY_VERSION`], after the offset keys' 1 and 2) and the
//! group id, so compaction keeps one record per group and a tombstone (no value) deletes it.
//! The value follows Kafka's GroupMetadataValue (version 3): protocol type, generation, protocol
//! name, leader, current state timestamp, then each member's id, instance id, client id and
//! host, rebalance and session timeouts, subscription and assignment. Strings are i16-length
//! (-1 = null), bytes i32-length, all big-endian, behind an i16 version.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_protocol::record::{encode_plain_batch, PlainRecord};
use rill_types::batch::ValidatedBatch;
use rill_types::TimestampMs;

use super::offsets::OffsetRecordError;
use crate::record_fields::{
    get_bytes, get_i16, get_i32, get_i64, get_nullable_str, put_bytes, put_nullable_str,
};

/// Key version of a group metadata record (offset keys use 1 and 2).
pub const GROUP_KEY_VERSION: u8 = 3;

/// Value version written (Kafka's GroupMetadataValue v3, with group instance ids).
const VALUE_VERSION: i16 = 3;

/// One member as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Its metadata for the chosen protocol.
    pub subscription: Bytes,
    /// What the leader assigned it.
    pub assignment: Bytes,
}

/// A group as written: a Stable generation and its members (none once the group is Empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// Protocol type (`consumer`), empty when unknown.
    pub protocol_type: String,
    /// Generation.
    pub generation: i32,
    /// Chosen protocol (assignor).
    pub protocol_name: Option<String>,
    /// Leader's member id.
    pub leader: Option<String>,
    /// When the group entered this state (ms since the epoch).
    pub current_state_timestamp_ms: TimestampMs,
    /// Members.
    pub members: Vec<MemberMetadata>,
}

/// Key bytes of `group`'s metadata record.
pub fn encode_group_key(group: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(3 + group.len());
    out.put_u8(GROUP_KEY_VERSION);
    put_nullable_str(&mut out, Some(group));
    out.freeze()
}

/// The group id of a key whose version byte is [`GROUP_KEY_VERSION`] (checked here too).
pub fn decode_group_key(mut buf: Bytes) -> Result<String, OffsetRecordError> {
    if buf.remaining() < 1 || buf.get_u8() != GROUP_KEY_VERSION {
        return Err(OffsetRecordError::Record);
    }
    let group = get_nullable_str(&mut buf)?.ok_or(OffsetRecordError::Record)?;
    if buf.has_remaining() {
        return Err(OffsetRecordError::Record);
    }
    Ok(group)
}

/// Value bytes of a group metadata record.
pub fn encode_group_value(group: &GroupMetadata) -> Bytes {
    let mut out = BytesMut::with_capacity(64 + group.members.len() * 128);
    out.put_i16(VALUE_VERSION);
    put_nullable_str(&mut out, Some(&group.protocol_type));
    out.put_i32(group.generation);
    put_nullable_str(&mut out, group.protocol_name.as_deref());
    put_nullable_str(&mut out, group.leader.as_deref());
    out.put_i64(group.current_state_timestamp_ms.0);
    out.put_i32(i32::try_from(group.members.len()).expect("member count fits"));
    for m in &group.members {
        put_nullable_str(&mut out, Some(&m.member_id));
        put_nullable_str(&mut out, m.group_instance_id.as_deref());
        put_nullable_str(&mut out, Some(&m.client_id));
        put_nullable_str(&mut out, Some(&m.client_host));
        out.put_i32(m.rebalance_timeout_ms);
        out.put_i32(m.session_timeout_ms);
        put_bytes(&mut out, &m.subscription);
        put_bytes(&mut out, &m.assignment);
    }
    out.freeze()
}

/// Parse [`encode_group_value`]'s bytes: a truncated, overlong or unknown-version value is an
/// error.
pub fn decode_group_value(mut buf: Bytes) -> Result<GroupMetadata, OffsetRecordError> {
    if get_i16(&mut buf)? != VALUE_VERSION {
        return Err(OffsetRecordError::Record);
    }
    let protocol_type = required(get_nullable_str(&mut buf)?)?;
    let generation = get_i32(&mut buf)?;
    let protocol_name = get_nullable_str(&mut buf)?;
    let leader = get_nullable_str(&mut buf)?;
    let current_state_timestamp_ms = TimestampMs(get_i64(&mut buf)?);
    let count = usize::try_from(get_i32(&mut buf)?).map_err(|_| OffsetRecordError::Record)?;
    // Every member takes at least 24 bytes: a count beyond that is corrupt, not a huge alloc.
    if count > buf.remaining() / 24 {
        return Err(OffsetRecordError::Record);
    }
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        members.push(MemberMetadata {
            member_id: required(get_nullable_str(&mut buf)?)?,
            group_instance_id: get_nullable_str(&mut buf)?,
            client_id: required(get_nullable_str(&mut buf)?)?,
            client_host: required(get_nullable_str(&mut buf)?)?,
            rebalance_timeout_ms: get_i32(&mut buf)?,
            session_timeout_ms: get_i32(&mut buf)?,
            subscription: get_bytes(&mut buf)?,
            assignment: get_bytes(&mut buf)?,
        });
    }
    if buf.has_remaining() {
        return Err(OffsetRecordError::Record);
    }
    Ok(GroupMetadata {
        protocol_type,
        generation,
        protocol_name,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

/// One v2 record batch holding `group`'s record (`None`: its tombstone), ready to append.
pub fn encode_group_batch(
    group: &str,
    value: Option<&GroupMetadata>,
    timestamp_ms: TimestampMs,
) -> ValidatedBatch {
    let bytes = encode_plain_batch(std::iter::once(PlainRecord {
        key: Some(encode_group_key(group)),
        value: value.map(encode_group_value),
        timestamp_ms: timestamp_ms.0,
    }));
    ValidatedBatch::new(bytes, usize::MAX).expect("an encoded group batch is valid")
}

fn required(s: Option<String>) -> Result<String, OffsetRecordError> {
    s.ok_or(OffsetRecordError::Record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> GroupMetadata {
        let member = |id: &str, instance: Option<&str>| MemberMetadata {
            member_id: id.to_string(),
            group_instance_id: instance.map(str::to_string),
            client_id: "rdkafka".to_string(),
            client_host: "/127.0.0.1".to_string(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 10_000,
            subscription: Bytes::from_static(b"\x00\x01sub"),
            assignment: Bytes::from_static(b"\x00\x01assigned"),
        };
        GroupMetadata {
            protocol_type: "consumer".to_string(),
            generation: 7,
            protocol_name: Some("range".to_string()),
            leader: Some("a-1".to_string()),
            current_state_timestamp_ms: TimestampMs(1_700_000_000_000),
            members: vec![member("a-1", None), member("b-2", Some("static-b"))],
        }
    }

    #[test]
    fn group_records_round_trip() {
        let g = group();
        assert_eq!(decode_group_value(encode_group_value(&g)).unwrap(), g);
        let empty = GroupMetadata {
            protocol_name: None,
            leader: None,
            members: vec![],
            ..g
        };
        assert_eq!(
            decode_group_value(encode_group_value(&empty)).unwrap(),
            empty
        );
        assert_eq!(decode_group_key(encode_group_key("grp")).unwrap(), "grp");
    }

    #[test]
    fn the_state_timestamp_is_stored_as_big_endian_epoch_millis() {
        // The bytes the untyped `i64` wrote: typing it changed no byte on disk. It follows the
        // version, the protocol type, the generation, the protocol name and the leader.
        let g = group();
        let at = 2 + (2 + 8) + 4 + (2 + 5) + (2 + 3);
        let value = encode_group_value(&g);
        assert_eq!(value[at..at + 8], 1_700_000_000_000i64.to_be_bytes());
    }

    #[test]
    fn truncated_or_padded_group_records_are_errors_not_panics() {
        let value = encode_group_value(&group());
        for cut in 0..value.len() {
            assert!(decode_group_value(value.slice(..cut)).is_err(), "cut {cut}");
        }
        let mut padded = BytesMut::from(&value[..]);
        padded.put_u8(0);
        assert!(decode_group_value(padded.freeze()).is_err());
        let key = encode_group_key("grp");
        for cut in 0..key.len() {
            assert!(decode_group_key(key.slice(..cut)).is_err());
        }
        let mut other_version = BytesMut::from(&value[..]);
        other_version[..2].copy_from_slice(&9i16.to_be_bytes());
        assert!(decode_group_value(other_version.freeze()).is_err());
        let mut huge_count = BytesMut::from(
            &encode_group_value(&GroupMetadata {
                members: vec![],
                ..group()
            })[..],
        );
        let at = huge_count.len() - 4;
        huge_count[at..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_group_value(huge_count.freeze()).is_err());
    }
}
