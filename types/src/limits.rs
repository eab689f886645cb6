//! The one table of limits on the names and ids a client sends (or the broker makes from them),
//! each bound to Kafka's own limit and to what Rill's record formats can hold.
//!
//! | value              | bytes                   | beyond it                           | Kafka's rule |
//! |--------------------|-------------------------|-------------------------------------|--------------|
//! | any wire STRING    | ≤ 32767                 | undecodable: connection closed      | generated readers (`length > 0x7fff`) |
//! | topic name         | 1..=249, `[a-zA-Z0-9._-]`, not `.`/`..` | INVALID_TOPIC_EXCEPTION | `Topic.validate` |
//! | group id           | 1..=32767               | INVALID_GROUP_ID (empty)            | coordinator: `isGroupIdNotEmpty` |
//! | transactional id   | 1..=32767               | INVALID_REQUEST (empty)             | `TransactionCoordinator` |
//! | client id          | ≤ 32767                 | (header INT16 string: cannot be)    | request header |
//! | group instance id  | ≤ 32767                 | undecodable                         | wire STRING |
//! | protocol type/name | ≤ 32767                 | undecodable                         | wire STRING |
//! | member id          | ≤ 32767, made here      | its prefix is cut (see [`member_id`]) | `clientId-uuid`: UNKNOWN_SERVER_ERROR past 32767 |
//! | offset metadata    | ≤ 4096                  | OFFSET_METADATA_TOO_LARGE           | `offset.metadata.max.bytes` |
//! | a frame before SASL authentication | ≤ 524288 | connection closed                | `sasl.server.max.receive.size` |
//! | SCRAM salt, salted password | ≤ 1024         | UNACCEPTABLE_CREDENTIAL             | (none) |
//! | an error message we answer  | ≤ 1024, made here | cut, ending "… (N bytes)" (see [`error_message`]) | (none: Kafka's writer throws past 32767) |
//!
//! Rill's coordinator records (offsets, group metadata, transaction state) store every one of
//! these as a string with an i16 or u16 length, so [`RECORD_STRING_BYTES_MAX`] (32767) bounds
//! them all; a `const` assertion below ties each limit to it, and the record writers assert it
//! (`server/src/record_fields.rs`), so a value this table lets through can never overflow a
//! writer's length prefix.
//!
//! Where each is enforced, once: the wire limit by `rill_protocol::length_guard`, before any
//! handler runs (Kafka's readers refuse the same strings, and Kafka then closes the
//! connection); the topic rule by [`check_topic_name`] wherever a topic may come to exist (the
//! registry, auto-creation, the engine's directory layout); the empty ids by the coordinators'
//! entry points; the member id where it is made.

use crate::ErrorCode;

/// Longest string Kafka's protocol carries: its generated readers refuse a longer one
/// ("string field ... had invalid length") even where the length prefix is a varint.
pub const WIRE_STRING_BYTES_MAX: usize = i16::MAX as usize;

/// Longest string Rill's coordinator records store (an i16 length: Kafka's own record STRING).
pub const RECORD_STRING_BYTES_MAX: usize = i16::MAX as usize;

/// Kafka's limit on topic name length (`Topic.MAX_NAME_LENGTH`).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Kafka's `sasl.server.max.receive.size` default: the largest frame a SASL listener reads
/// before the connection has authenticated (so the largest SaslHandshake or SaslAuthenticate,
/// and every token in one); a larger frame closes the connection, as Kafka's
/// "invalid receive size" does.
pub const SASL_RECEIVE_BYTES_MAX: usize = 524_288;

/// Longest SCRAM salt, and longest salted password, an AlterUserScramCredentials upsertion may
/// carry (Kafka sets no bound; clients send 32-64 bytes): a longer one is UNACCEPTABLE_CREDENTIAL,
/// so no client can grow the metadata by megabytes per user.
pub const SCRAM_SECRET_BYTES_MAX: usize = 1024;

/// Kafka's `offset.metadata.max.bytes` default: longer committed metadata fails its partition.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// Longest error message the broker answers. A message may quote what the client sent (a
/// 32767-byte topic name in "Topic '…' already exists."), and a message over
/// [`WIRE_STRING_BYTES_MAX`] cannot be encoded at all: the response would be lost and the
/// connection closed. A kilobyte keeps every message Rill writes whole and readable.
pub const ERROR_MESSAGE_BYTES_MAX: usize = 1024;

/// The separator and the UUID that follow a member id's prefix (`<prefix>-<uuid>`).
pub const MEMBER_ID_SUFFIX_BYTES: usize = 1 + 36;

/// Longest member id the broker makes: it is stored and answered as a STRING.
pub const MEMBER_ID_BYTES_MAX: usize = RECORD_STRING_BYTES_MAX;

/// What a client-supplied (or broker-made) string is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// A topic name: a directory name on disk.
    TopicName,
    /// `group.id`.
    GroupId,
    /// A group member's id (made by the coordinator, echoed by the client).
    MemberId,
    /// `group.instance.id` of a static member.
    GroupInstanceId,
    /// `transactional.id`.
    TransactionalId,
    /// The request header's client id.
    ClientId,
    /// JoinGroup's protocol type (`consumer`).
    ProtocolType,
    /// A JoinGroup protocol (assignor) name.
    ProtocolName,
    /// Metadata committed with an offset.
    OffsetMetadata,
}

/// One row of the table: a field's length bounds and the error a value outside them gets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// The field.
    pub field: Field,
    /// Fewest bytes (1 where Kafka refuses the empty string).
    pub bytes_min: usize,
    /// Most bytes.
    pub bytes_max: usize,
    /// What a value outside the bounds is answered with (`None` where the wire cannot carry
    /// one: the connection is closed before any handler sees it).
    pub refused_with: Option<ErrorCode>,
}

/// The table, one row per [`Field`].
pub const LIMITS: [Limit; 9] = [
    row(
        Field::TopicName,
        1,
        TOPIC_NAME_BYTES_MAX,
        Some(ErrorCode::InvalidTopicException),
    ),
    row(
        Field::GroupId,
        1,
        WIRE_STRING_BYTES_MAX,
        Some(ErrorCode::InvalidGroupId),
    ),
    row(Field::MemberId, 0, MEMBER_ID_BYTES_MAX, None),
    row(Field::GroupInstanceId, 0, WIRE_STRING_BYTES_MAX, None),
    row(
        Field::TransactionalId,
        1,
        WIRE_STRING_BYTES_MAX,
        Some(ErrorCode::InvalidRequest),
    ),
    row(Field::ClientId, 0, WIRE_STRING_BYTES_MAX, None),
    row(Field::ProtocolType, 0, WIRE_STRING_BYTES_MAX, None),
    row(Field::ProtocolName, 0, WIRE_STRING_BYTES_MAX, None),
    row(
        Field::OffsetMetadata,
        0,
        OFFSET_METADATA_BYTES_MAX,
        Some(ErrorCode::OffsetMetadataTooLarge),
    ),
];

const fn row(field: Field, min: usize, max: usize, refused_with: Option<ErrorCode>) -> Limit {
    Limit {
        field,
        bytes_min: min,
        bytes_max: max,
        refused_with,
    }
}

// Every value the table lets through fits a record string, and the table is in `Field` order.
const _: () = {
    let mut i = 0;
    while i < LIMITS.len() {
        assert!(LIMITS[i].bytes_max <= RECORD_STRING_BYTES_MAX);
        assert!(LIMITS[i].bytes_min <= LIMITS[i].bytes_max);
        assert!(LIMITS[i].field as usize == i);
        i += 1;
    }
    assert!(WIRE_STRING_BYTES_MAX <= RECORD_STRING_BYTES_MAX);
    assert!(MEMBER_ID_SUFFIX_BYTES < MEMBER_ID_BYTES_MAX);
};

/// A value the table refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field:?} is invalid: {reason}")]
pub struct LimitError {
    /// Which field.
    pub field: Field,
    /// Why, in words a client can act on.
    pub reason: String,
    /// The Kafka error to answer with (`UNKNOWN_SERVER_ERROR` for a row without one: a value
    /// the wire cannot carry reached a check, which only a bug makes possible).
    pub code: ErrorCode,
}

impl Field {
    /// This field's row of [`LIMITS`].
    pub const fn limit(self) -> Limit {
        LIMITS[self as usize]
    }

    /// Checks `value` against this field's row (and, for a topic name, Kafka's characters).
    pub fn check(self, value: &str) -> Result<(), LimitError> {
        let limit = self.limit();
        let refuse = |reason: String| {
            Err(LimitError {
                field: self,
                reason,
                code: limit.refused_with.unwrap_or(ErrorCode::UnknownServerError),
            })
        };
        if value.len() < limit.bytes_min {
            return refuse("the empty string is not allowed".into());
        }
        if value.len() > limit.bytes_max {
            let (len, max) = (value.len(), limit.bytes_max);
            return refuse(format!("{len} bytes is longer than the maximum of {max}"));
        }
        if self == Field::TopicName {
            return check_topic_characters(value)
                .or_else(|why| refuse(format!("{value:?}: {why}")));
        }
        Ok(())
    }
}

/// Kafka's topic name rule: 1..=249 of `[a-zA-Z0-9._-]`, and not `.` or `..`. Every path that
/// may make a topic exist (and so a directory under the data dir) checks it.
pub fn check_topic_name(name: &str) -> Result<(), LimitError> {
    Field::TopicName.check(name)
}

fn check_topic_characters(name: &str) -> Result<(), &'static str> {
    if name == "." || name == ".." {
        return Err("'.' and '..' are not allowed");
    }
    let legal = |b: u8| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-';
    if !name.bytes().all(legal) {
        return Err("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// A new member id, `<prefix>-<uuid>` as Kafka makes it (the prefix is the group instance id
/// or the client id), with the prefix cut (at a character boundary) so that the whole fits
/// [`MEMBER_ID_BYTES_MAX`]. Kafka does not cut it: with a 32767-byte client id or group
/// instance id, Kafka 4.4.0 fails to serialize the member id ("'memberId' field is too long to
/// be serialized") and answers JoinGroup UNKNOWN_SERVER_ERROR (peers/kafka, 2026-12-02). The id
/// is opaque to clients, so a shorter prefix changes nothing for them, and the member joins.
pub fn member_id(prefix: &str, uuid: &str) -> String {
    assert_eq!(uuid.len() + 1, MEMBER_ID_SUFFIX_BYTES, "a hyphenated UUID");
    let mut cut = prefix
        .len()
        .min(MEMBER_ID_BYTES_MAX - MEMBER_ID_SUFFIX_BYTES);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let id = format!("{}-{uuid}", &prefix[..cut]);
    assert!(id.len() <= MEMBER_ID_BYTES_MAX);
    id
}

/// `message` as the broker answers it: whole when it fits [`ERROR_MESSAGE_BYTES_MAX`], else cut
/// at a character boundary and ended with "… (N bytes)", N the whole message's length, so that
/// a message quoting a long client string can always be encoded.
pub fn error_message(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= ERROR_MESSAGE_BYTES_MAX {
        return std::borrow::Cow::Borrowed(message);
    }
    let tail = format!("… ({} bytes)", message.len());
    let mut cut = ERROR_MESSAGE_BYTES_MAX - tail.len();
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let clamped = format!("{}{tail}", &message[..cut]);
    assert!(clamped.len() <= ERROR_MESSAGE_BYTES_MAX);
    std::borrow::Cow::Owned(clamped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_message_is_whole_up_to_the_limit_and_cut_one_byte_over() {
        assert_eq!(error_message(""), "");
        let fits = "m".repeat(ERROR_MESSAGE_BYTES_MAX);
        assert!(matches!(error_message(&fits), std::borrow::Cow::Borrowed(m) if m == fits));
        let over = "m".repeat(ERROR_MESSAGE_BYTES_MAX + 1);
        let cut = error_message(&over);
        assert!(cut.len() <= ERROR_MESSAGE_BYTES_MAX, "{}", cut.len());
        assert!(cut.ends_with("… (1025 bytes)"), "{cut}");
        assert!(cut.starts_with("mmmm"));
    }

    #[test]
    fn an_error_message_is_cut_at_a_character_boundary_at_every_length() {
        // 'é' is two bytes and '€' three: every cut position lands inside one of them somewhere.
        for extra in 0..8 {
            let message = format!("{}{}", "x".repeat(extra), "é€".repeat(40_000));
            let cut = error_message(&message);
            assert!(cut.len() <= ERROR_MESSAGE_BYTES_MAX);
            assert!(cut.ends_with(&format!("… ({} bytes)", message.len())));
        }
        let name = "t".repeat(WIRE_STRING_BYTES_MAX);
        let quoted = format!("Topic '{name}' already exists.");
        assert!(error_message(&quoted).len() <= ERROR_MESSAGE_BYTES_MAX);
    }

    const UUID: &str = "01234567-89ab-cdef-0123-456789abcdef";

    #[test]
    fn topic_names_follow_kafka_and_cannot_name_a_path() {
        assert!(check_topic_name(&"x".repeat(TOPIC_NAME_BYTES_MAX)).is_ok());
        assert!(check_topic_name("a.b_c-D9").is_ok());
        assert!(check_topic_name("...").is_ok()); // Kafka allows it; it is a plain file name
        for bad in [
            "", ".", "..", "../x", "a/b", "/abs", "a\\b", "a b", "é", "a\0b",
        ] {
            let e = check_topic_name(bad).expect_err(bad);
            assert_eq!(e.code, ErrorCode::InvalidTopicException, "{bad:?}");
        }
        let long = "x".repeat(TOPIC_NAME_BYTES_MAX + 1);
        assert!(check_topic_name(&long).is_err());
    }

    #[test]
    fn empty_ids_get_kafkas_errors_and_the_wire_maximum_passes() {
        let e = Field::GroupId.check("").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidGroupId);
        let e = Field::TransactionalId.check("").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        let max = "g".repeat(WIRE_STRING_BYTES_MAX);
        for field in [
            Field::GroupId,
            Field::TransactionalId,
            Field::GroupInstanceId,
            Field::ClientId,
            Field::ProtocolType,
            Field::ProtocolName,
            Field::MemberId,
        ] {
            assert!(field.check(&max).is_ok(), "{field:?}");
            assert!(field.check(&format!("{max}g")).is_err(), "{field:?}");
        }
        let metadata = "m".repeat(OFFSET_METADATA_BYTES_MAX + 1);
        let e = Field::OffsetMetadata.check(&metadata).unwrap_err();
        assert_eq!(e.code, ErrorCode::OffsetMetadataTooLarge);
    }

    #[test]
    fn member_ids_fit_a_record_string_whatever_the_prefix() {
        assert_eq!(member_id("client", UUID), format!("client-{UUID}"));
        assert_eq!(member_id("", UUID), format!("-{UUID}"));
        let room = MEMBER_ID_BYTES_MAX - MEMBER_ID_SUFFIX_BYTES;
        for len in [room - 1, room, room + 1, WIRE_STRING_BYTES_MAX] {
            let id = member_id(&"c".repeat(len), UUID);
            assert_eq!(
                id.len(),
                (len + MEMBER_ID_SUFFIX_BYTES).min(MEMBER_ID_BYTES_MAX)
            );
            assert!(id.ends_with(UUID));
        }
        // A cut never splits a character: two-byte characters across the boundary.
        let id = member_id(&"é".repeat(WIRE_STRING_BYTES_MAX / 2), UUID);
        assert!(id.len() <= MEMBER_ID_BYTES_MAX);
        assert!(id.starts_with('é'));
    }
}
