//! Checks every length read off the wire against the frame before the codec allocates for it.
//!
//! Why: `kafka_protocol` 0.18 decodes an array by `Vec::with_capacity(count)` with the count
//! straight off the wire, so 8 bytes claiming 2^31 topics make the allocator abort the process
//! (upstream PRs #152/#161/#200 are still open). This module walks the request body once,
//! driven by Kafka's own JSON spec of that API ([`crate::schema`]), without allocating, and
//! rejects any string, bytes, array or tag section that cannot fit in the bytes that remain,
//! any array longer than [`ARRAY_ELEMENTS_MAX`], and any string longer than Kafka's
//! [`WIRE_STRING_BYTES_MAX`] (32767: Kafka's generated readers refuse one even behind a compact
//! varint length, and Kafka then closes the connection; the codec here would accept it).
//! Only then does the codec run.
//!
//! Cost: one pass over the non-record bytes; record payloads are skipped by length.

use crate::kafka_protocol::messages::ApiKey;
use crate::schema::{request_spec, Field, FieldType, MessageSpec};
use rill_types::limits::WIRE_STRING_BYTES_MAX;

/// Most elements any single array in a request may hold. A Fetch of every partition of a
/// large cluster is ~10^5; a million leaves room and caps what one array may make us allocate.
pub const ARRAY_ELEMENTS_MAX: usize = 1 << 20;

/// Deepest struct nesting walked (the deepest spec nests 4 levels).
const NESTING_MAX: usize = 16;

/// A length prefix in the body that cannot fit in the bytes that follow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason} at byte {at}")]
pub struct LengthError {
    /// Spec name of the field being read.
    pub field: String,
    /// What was wrong.
    pub reason: String,
    /// Offset in the body where it was detected.
    pub at: usize,
}

/// Walks the body of `api_key` v`version` and checks each length prefix against the frame.
///
/// APIs without a pinned spec pass unchecked (the registry only holds APIs that have one).
pub fn check_request_body(api_key: ApiKey, version: i16, body: &[u8]) -> Result<(), LengthError> {
    let Some(spec) = request_spec(api_key) else {
        return Ok(());
    };
    check_message(spec, version, body)
}

/// Walks `body` as message `spec` at `version`.
pub fn check_message(spec: &MessageSpec, version: i16, body: &[u8]) -> Result<(), LengthError> {
    walked_bytes(spec, version, body).map(|_| ())
}

/// Walks `body` as message `spec` at `version` and returns how many bytes the message spans
/// (trailing bytes are tolerated, as Kafka does; tests use this to compare with the codec).
pub fn walked_bytes(spec: &MessageSpec, version: i16, body: &[u8]) -> Result<usize, LengthError> {
    let mut walker = Walker {
        buf: body,
        pos: 0,
        version,
        depth: 0,
    };
    let flexible = spec.flexible_versions.contains(version);
    walker.fields(&spec.fields, flexible)?;
    assert!(walker.pos <= body.len());
    Ok(walker.pos)
}

struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    version: i16,
    depth: usize,
}

impl Walker<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn fail<T>(&self, field: &Field, reason: impl Into<String>) -> Result<T, LengthError> {
        Err(LengthError {
            field: field.name.clone(),
            reason: reason.into(),
            at: self.pos,
        })
    }

    fn fields(&mut self, fields: &[Field], flexible: bool) -> Result<(), LengthError> {
        self.depth += 1;
        assert!(
            self.depth <= NESTING_MAX,
            "spec nesting deeper than {NESTING_MAX}"
        );
        let version = self.version;
        for field in fields.iter().filter(|f| f.versions.contains(version)) {
            if flexible && field.tagged_versions.contains(self.version) {
                continue; // lives in the tag section below
            }
            self.value(field, &field.ty, flexible)?;
        }
        if flexible {
            self.tag_section(fields)?;
        }
        self.depth -= 1;
        Ok(())
    }

    fn value(&mut self, field: &Field, ty: &FieldType, flexible: bool) -> Result<(), LengthError> {
        let compact = flexible
            && field
                .flexible_versions
                .is_none_or(|v| v.contains(self.version));
        match ty {
            FieldType::Fixed(n) => self.skip(field, *n),
            FieldType::String => {
                let len = if compact {
                    self.compact_len(field)?
                } else {
                    self.i16_len(field)?
                };
                // Kafka's readers refuse a longer string even behind a varint length, and
                // Rill's records could not store it (rill_types::limits).
                if len > WIRE_STRING_BYTES_MAX {
                    return self.fail(
                        field,
                        format!("string of {len} bytes exceeds {WIRE_STRING_BYTES_MAX}"),
                    );
                }
                self.skip(field, len)
            }
            FieldType::Bytes => {
                let len = if compact {
                    self.compact_len(field)?
                } else {
                    self.i32_len(field)?
                };
                self.skip(field, len)
            }
            FieldType::Array(inner) => {
                let count = if compact {
                    self.compact_len(field)?
                } else {
                    self.i32_len(field)?
                };
                self.elements(field, inner, count, flexible)
            }
            FieldType::Struct(fields) => {
                // A nullable struct field (not an array's element) leads with an INT8 marker:
                // -1 null, 1 present (DescribeTopicPartitions' Cursor).
                let nullable =
                    std::ptr::eq(ty, &field.ty) && field.nullable_versions.contains(self.version);
                if nullable {
                    let [marker] = self.take::<1>(field)?;
                    match marker as i8 {
                        -1 => return Ok(()),
                        1 => {}
                        m => return self.fail(field, format!("nullable struct marker {m}")),
                    }
                }
                self.fields(fields, flexible)
            }
        }
    }

    fn elements(
        &mut self,
        field: &Field,
        inner: &FieldType,
        count: usize,
        flexible: bool,
    ) -> Result<(), LengthError> {
        if count > ARRAY_ELEMENTS_MAX {
            return self.fail(
                field,
                format!("array of {count} exceeds {ARRAY_ELEMENTS_MAX}"),
            );
        }
        if count > self.remaining() {
            return self.fail(
                field,
                format!("array of {count} in {} bytes", self.remaining()),
            );
        }
        for _ in 0..count {
            self.value(field, inner, flexible)?;
        }
        Ok(())
    }

    /// Tag section: count, then (tag, size, bytes); known tags are walked inside their bytes.
    fn tag_section(&mut self, fields: &[Field]) -> Result<(), LengthError> {
        let section = section_field();
        let count = self.uvarint(&section)?;
        if count as usize > self.remaining() {
            return self.fail(
                &section,
                format!("{count} tags in {} bytes", self.remaining()),
            );
        }
        for _ in 0..count {
            let tag = self.uvarint(&section)?;
            let size = self.uvarint(&section)? as usize;
            let end = self.pos + size;
            if size > self.remaining() {
                return self.fail(&section, format!("tag {tag} of {size} bytes"));
            }
            if let Some(field) = self.tagged_field(fields, tag) {
                let mut inner = Walker {
                    buf: &self.buf[..end],
                    ..*self
                };
                inner.value(field, &field.ty, true)?;
            }
            self.pos = end;
        }
        Ok(())
    }

    fn tagged_field<'f>(&self, fields: &'f [Field], tag: u32) -> Option<&'f Field> {
        fields
            .iter()
            .find(|f| f.tag == Some(tag) && f.tagged_versions.contains(self.version))
    }

    fn skip(&mut self, field: &Field, n: usize) -> Result<(), LengthError> {
        if n > self.remaining() {
            return self.fail(
                field,
                format!("{n} bytes needed, {} left", self.remaining()),
            );
        }
        self.pos += n;
        Ok(())
    }

    fn take<const N: usize>(&mut self, field: &Field) -> Result<[u8; N], LengthError> {
        let Some(bytes) = self.buf[self.pos..].first_chunk::<N>() else {
            return self.fail(field, "truncated length");
        };
        self.pos += N;
        Ok(*bytes)
    }

    /// INT16 length; -1 (null) is zero bytes; other negatives are malformed.
    fn i16_len(&mut self, field: &Field) -> Result<usize, LengthError> {
        let len = i16::from_be_bytes(self.take::<2>(field)?);
        self.signed_len(field, i32::from(len))
    }

    /// INT32 length or count; -1 (null) is zero; other negatives are malformed.
    fn i32_len(&mut self, field: &Field) -> Result<usize, LengthError> {
        let len = i32::from_be_bytes(self.take::<4>(field)?);
        self.signed_len(field, len)
    }

    fn signed_len(&self, field: &Field, len: i32) -> Result<usize, LengthError> {
        match len {
            -1 => Ok(0),
            n if n < -1 => self.fail(field, format!("negative length {n}")),
            n => Ok(n as usize),
        }
    }

    /// Compact length: unsigned varint N+1, 0 = null.
    fn compact_len(&mut self, field: &Field) -> Result<usize, LengthError> {
        Ok((self.uvarint(field)? as usize).saturating_sub(1))
    }

    /// Unsigned varint of at most 5 bytes (a u32).
    fn uvarint(&mut self, field: &Field) -> Result<u32, LengthError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let [byte] = self.take::<1>(field)?;
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        self.fail(field, "varint longer than 5 bytes")
    }
}

/// A stand-in field naming the tag section in errors.
fn section_field() -> Field {
    Field {
        name: "tagged fields".to_owned(),
        ty: FieldType::Fixed(0),
        versions: crate::schema::Versions::NONE,
        tagged_versions: crate::schema::Versions::NONE,
        tag: None,
        flexible_versions: None,
        type_name: String::new(),
        entity_type: None,
        nullable_versions: crate::schema::Versions::NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_registry::ENTRIES;
    use crate::kafka_protocol::messages::RequestKind;
    use bytes::BytesMut;

    fn default_request(api_key: ApiKey) -> RequestKind {
        use crate::kafka_protocol::messages::*;
        match api_key {
            ApiKey::Produce => RequestKind::Produce(ProduceRequest::default()),
            ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
            ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
            ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
            ApiKey::OffsetCommit => RequestKind::OffsetCommit(OffsetCommitRequest::default()),
            ApiKey::OffsetFetch => RequestKind::OffsetFetch(OffsetFetchRequest::default()),
            ApiKey::FindCoordinator => {
                RequestKind::FindCoordinator(FindCoordinatorRequest::default())
            }
            ApiKey::JoinGroup => RequestKind::JoinGroup(JoinGroupRequest::default()),
            ApiKey::Heartbeat => RequestKind::Heartbeat(HeartbeatRequest::default()),
            ApiKey::LeaveGroup => RequestKind::LeaveGroup(LeaveGroupRequest::default()),
            ApiKey::SyncGroup => RequestKind::SyncGroup(SyncGroupRequest::default()),
            ApiKey::DescribeGroups => RequestKind::DescribeGroups(DescribeGroupsRequest::default()),
            ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
            ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
            ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
            ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default()),
            ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default()),
            ApiKey::OffsetForLeaderEpoch => {
                RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
            }
            ApiKey::DescribeConfigs => {
                RequestKind::DescribeConfigs(DescribeConfigsRequest::default())
            }
            ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default()),
            ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
            ApiKey::IncrementalAlterConfigs => {
                RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
            }
            ApiKey::CreatePartitions => {
                RequestKind::CreatePartitions(CreatePartitionsRequest::default())
            }
            ApiKey::DeleteGroups => RequestKind::DeleteGroups(DeleteGroupsRequest::default()),
            ApiKey::OffsetDelete => RequestKind::OffsetDelete(OffsetDeleteRequest::default()),
            ApiKey::DescribeCluster => {
                RequestKind::DescribeCluster(DescribeClusterRequest::default())
            }
            other => transaction_default(other),
        }
    }

    /// The transaction APIs' default requests (kept apart: one match arm per API).
    fn transaction_default(api_key: ApiKey) -> RequestKind {
        use crate::kafka_protocol::messages::*;
        match api_key {
            ApiKey::AddPartitionsToTxn => {
                RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default())
            }
            ApiKey::AddOffsetsToTxn => {
                RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default())
            }
            ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default()),
            ApiKey::WriteTxnMarkers => {
                RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default())
            }
            ApiKey::TxnOffsetCommit => {
                RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default())
            }
            ApiKey::DescribeProducers => {
                RequestKind::DescribeProducers(DescribeProducersRequest::default())
            }
            ApiKey::DescribeTransactions => {
                RequestKind::DescribeTransactions(DescribeTransactionsRequest::default())
            }
            ApiKey::ListTransactions => {
                RequestKind::ListTransactions(ListTransactionsRequest::default())
            }
            other => replication_default(other),
        }
    }

    /// The replication admin APIs' default requests (issue 14).
    fn replication_default(api_key: ApiKey) -> RequestKind {
        use crate::kafka_protocol::messages::*;
        match api_key {
            ApiKey::DescribeLogDirs => {
                RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default())
            }
            ApiKey::AlterReplicaLogDirs => {
                RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default())
            }
            ApiKey::ElectLeaders => RequestKind::ElectLeaders(ElectLeadersRequest::default()),
            ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsRequest::default(),
            ),
            ApiKey::ListPartitionReassignments => {
                RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default())
            }
            other => consumer_group_default(other),
        }
    }

    /// The KIP-848 consumer group APIs' default requests (issue 29), and DescribeTopicPartitions'.
    fn consumer_group_default(api_key: ApiKey) -> RequestKind {
        use crate::kafka_protocol::messages::*;
        match api_key {
            ApiKey::ConsumerGroupHeartbeat => {
                RequestKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default())
            }
            ApiKey::ConsumerGroupDescribe => {
                RequestKind::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default())
            }
            ApiKey::ShareGroupHeartbeat => {
                RequestKind::ShareGroupHeartbeat(ShareGroupHeartbeatRequest::default())
            }
            ApiKey::ShareGroupDescribe => {
                RequestKind::ShareGroupDescribe(ShareGroupDescribeRequest::default())
            }
            ApiKey::ShareFetch => RequestKind::ShareFetch(ShareFetchRequest::default()),
            ApiKey::ShareAcknowledge => {
                RequestKind::ShareAcknowledge(ShareAcknowledgeRequest::default())
            }
            ApiKey::DescribeShareGroupOffsets => {
                RequestKind::DescribeShareGroupOffsets(DescribeShareGroupOffsetsRequest::default())
            }
            ApiKey::AlterShareGroupOffsets => {
                RequestKind::AlterShareGroupOffsets(AlterShareGroupOffsetsRequest::default())
            }
            ApiKey::DeleteShareGroupOffsets => {
                RequestKind::DeleteShareGroupOffsets(DeleteShareGroupOffsetsRequest::default())
            }
            // Issue 30 (the Java AdminClient's describeTopics).
            ApiKey::DescribeTopicPartitions => {
                RequestKind::DescribeTopicPartitions(DescribeTopicPartitionsRequest::default())
            }
            other => security_default(other),
        }
    }

    /// The SASL, SCRAM, ACL and quota APIs' default requests (issue 27).
    fn security_default(api_key: ApiKey) -> RequestKind {
        use crate::kafka_protocol::messages::*;
        match api_key {
            ApiKey::SaslHandshake => RequestKind::SaslHandshake(SaslHandshakeRequest::default()),
            ApiKey::SaslAuthenticate => {
                RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default())
            }
            ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsRequest::default(),
            ),
            ApiKey::AlterUserScramCredentials => {
                RequestKind::AlterUserScramCredentials(AlterUserScramCredentialsRequest::default())
            }
            ApiKey::DescribeAcls => RequestKind::DescribeAcls(DescribeAclsRequest::default()),
            ApiKey::CreateAcls => RequestKind::CreateAcls(
                CreateAclsRequest::default().with_creations(vec![Default::default()]),
            ),
            ApiKey::DeleteAcls => RequestKind::DeleteAcls(
                DeleteAclsRequest::default().with_filters(vec![Default::default()]),
            ),
            ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(
                DescribeClientQuotasRequest::default().with_components(vec![Default::default()]),
            ),
            ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(
                AlterClientQuotasRequest::default().with_entries(vec![Default::default()]),
            ),
            other => panic!("no default for {other:?}"),
        }
    }

    /// The walker and the codec agree on the span of every registry API at every version.
    #[test]
    fn walker_spans_exactly_what_codec_encodes() {
        for e in ENTRIES {
            let spec = request_spec(e.api_key).unwrap();
            for version in e.decodable_min..=e.advertised_max {
                let mut out = BytesMut::new();
                default_request(e.api_key)
                    .encode(&mut out, version)
                    .unwrap();
                let walked = walked_bytes(spec, version, &out);
                assert_eq!(walked, Ok(out.len()), "{:?} v{version}", e.api_key);
            }
        }
    }

    #[test]
    fn a_present_nullable_struct_is_walked_behind_its_marker() {
        use crate::kafka_protocol::messages::describe_topic_partitions_request::Cursor;
        use crate::kafka_protocol::messages::{DescribeTopicPartitionsRequest, TopicName};
        use crate::kafka_protocol::protocol::StrBytes;
        let req = DescribeTopicPartitionsRequest::default().with_cursor(Some(
            Cursor::default()
                .with_topic_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_index(3),
        ));
        let mut out = BytesMut::new();
        RequestKind::DescribeTopicPartitions(req)
            .encode(&mut out, 0)
            .unwrap();
        let spec = request_spec(ApiKey::DescribeTopicPartitions).unwrap();
        assert_eq!(walked_bytes(spec, 0, &out), Ok(out.len()));
        let mut bad = out.to_vec();
        let marker = bad.len() - 1 - 4 - 2 - 1 - 1; // tags, index, name, its length, marker
        bad[marker] = 7;
        assert!(walked_bytes(spec, 0, &bad).is_err());
    }

    #[test]
    fn metadata_v1_huge_topic_count_is_rejected() {
        let err = check_request_body(ApiKey::Metadata, 1, &[0x3b, 0x9a, 0xca, 0x00]).unwrap_err();
        assert_eq!(err.field, "Topics");
        assert!(err.reason.contains("exceeds"), "{err}");
    }

    #[test]
    fn count_larger_than_remaining_is_rejected() {
        let err = check_request_body(ApiKey::Metadata, 1, &[0, 0, 0, 3, 0, 0]).unwrap_err();
        assert!(err.reason.contains("array of 3 in 2 bytes"), "{err}");
    }

    #[test]
    fn compact_array_count_checked() {
        // Metadata v9: compact topics array, varint 0xff 0xff 0xff 0x0f = huge.
        let err = check_request_body(ApiKey::Metadata, 9, &[0xff, 0xff, 0xff, 0x0f]).unwrap_err();
        assert_eq!(err.field, "Topics");
    }

    #[test]
    fn string_longer_than_frame_rejected_and_null_accepted() {
        // Metadata v1 with one topic whose name claims 300 bytes.
        let err = check_request_body(ApiKey::Metadata, 1, &[0, 0, 0, 1, 1, 44]).unwrap_err();
        assert_eq!(err.field, "Name");
        assert!(check_request_body(ApiKey::Metadata, 1, &[0xff, 0xff, 0xff, 0xff]).is_ok());
    }

    /// Issue 26: a 70 KB transactional id (InitProducerId v4), a 64 KiB group id (OffsetCommit
    /// v8) and an over-32 KiB group instance id (JoinGroup v6) got past the codec, which reads
    /// compact strings of any length, and panicked the record writers. Kafka's readers refuse
    /// any string over 32767 bytes; so does the guard, and exactly 32767 passes.
    #[test]
    fn strings_over_kafkas_32767_bytes_are_refused_behind_compact_lengths() {
        use crate::kafka_protocol::messages::*;
        use crate::kafka_protocol::protocol::StrBytes;
        type Make = fn(StrBytes) -> RequestKind;
        let cases: [(ApiKey, i16, &str, Make); 4] = [
            (ApiKey::InitProducerId, 4, "TransactionalId", |s| {
                let r = InitProducerIdRequest::default();
                RequestKind::InitProducerId(r.with_transactional_id(Some(TransactionalId(s))))
            }),
            (ApiKey::OffsetCommit, 8, "GroupId", |s| {
                RequestKind::OffsetCommit(OffsetCommitRequest::default().with_group_id(GroupId(s)))
            }),
            (ApiKey::JoinGroup, 6, "GroupInstanceId", |s| {
                RequestKind::JoinGroup(JoinGroupRequest::default().with_group_instance_id(Some(s)))
            }),
            (ApiKey::JoinGroup, 7, "ProtocolType", |s| {
                RequestKind::JoinGroup(JoinGroupRequest::default().with_protocol_type(s))
            }),
        ];
        for (api_key, version, field, make) in cases {
            for (n, ok) in [
                (WIRE_STRING_BYTES_MAX, true),
                (WIRE_STRING_BYTES_MAX + 1, false),
                (70_000, false),
            ] {
                let mut out = BytesMut::new();
                make(StrBytes::from_string("x".repeat(n)))
                    .encode(&mut out, version)
                    .unwrap();
                let checked = check_request_body(api_key, version, &out);
                assert_eq!(checked.is_ok(), ok, "{api_key:?} v{version} {field} of {n}");
                if let Err(e) = checked {
                    assert_eq!(e.field, field);
                    assert!(e.reason.contains("exceeds 32767"), "{e}");
                }
            }
        }
    }

    #[test]
    fn overlong_varint_and_tag_section_rejected() {
        let err = check_request_body(
            ApiKey::ApiVersions,
            3,
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
        );
        assert!(err.is_err());
        // v3: empty name, empty version, then 1 tag of 9 bytes with nothing behind it.
        let err = check_request_body(ApiKey::ApiVersions, 3, &[1, 1, 1, 0, 9]).unwrap_err();
        assert_eq!(err.field, "tagged fields");
    }
}
