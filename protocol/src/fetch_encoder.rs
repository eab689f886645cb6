//! Zero-copy Fetch response encoding: record bytes go to the socket as the `Bytes` chunks the
//! engine handed over, interleaved with small encoded metadata buffers, ready for a vectored
//! write. Record bytes are never copied in user space.
//!
//! How, without hand-writing the Fetch codec: the generated encoder runs once with each
//! partition's `records` set to an empty *marker* slice with a unique address. A recording
//! buffer notes the output offset at which the encoder writes each marker; after it, the
//! skeleton is rebuilt with the real length prefixes (INT32 L, or varint L+1 when flexible)
//! and split at those offsets, and each partition's chunks are spliced in between.
//!
//! ```text
//! [size|header|...|p0 fields|len(p0)] [p0 chunk..] [p0 tags|p1 fields|len(p1)] [p1 chunk..] [tail]
//! ```

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::SIZE_PREFIX_BYTES;
use crate::kafka_protocol::messages::{ApiKey, FetchResponse};
use crate::kafka_protocol::protocol::buf::ByteBufMut;
use crate::kafka_protocol::protocol::Encodable;
use crate::response::{put_response_header, EncodeError};

/// The marker's backing byte: only its address is used, never its contents.
static MARKER: [u8; 1] = [0];

fn marker() -> Bytes {
    Bytes::from_static(&MARKER[..0])
}

/// Encodes a whole Fetch response frame (size prefix + header + body) as a list of buffers.
///
/// `records[i]` are the record chunks of the i-th partition in response order (topics in
/// order, partitions in order within each); the `records` fields inside `response` are
/// ignored. Concatenating the output gives exactly what [`crate::response::encode_response`]
/// produces with each partition's records set to the concatenation of its chunks.
pub fn encode_fetch_response_vectored(
    correlation_id: i32,
    api_version: i16,
    mut response: FetchResponse,
    records: &[Vec<Bytes>],
) -> Result<Vec<Bytes>, EncodeError> {
    let partitions = response
        .responses
        .iter()
        .map(|t| t.partitions.len())
        .sum::<usize>();
    assert_eq!(
        partitions,
        records.len(),
        "one chunk list per partition, in response order"
    );
    for partition in response
        .responses
        .iter_mut()
        .flat_map(|t| t.partitions.iter_mut())
    {
        partition.records = Some(marker());
    }
    let skeleton = encode_skeleton(correlation_id, api_version, &response)?;
    assert_eq!(
        skeleton.marks.len(),
        records.len(),
        "encoder wrote every marker once"
    );
    let flexible = ApiKey::Fetch.response_header_version(api_version) >= 1;
    splice(skeleton, records, flexible)
}

/// The encoded response with marker positions.
struct Skeleton {
    bytes: BytesMut,
    /// Output offsets right after each (empty) records length prefix.
    marks: Vec<usize>,
}

fn encode_skeleton(
    correlation_id: i32,
    api_version: i16,
    body: &FetchResponse,
) -> Result<Skeleton, EncodeError> {
    let mut out = MarkRecorder {
        bytes: BytesMut::with_capacity(256),
        marks: Vec::new(),
    };
    out.bytes.put_i32(0); // size prefix, patched in splice
    put_response_header(
        &mut out.bytes,
        correlation_id,
        ApiKey::Fetch.response_header_version(api_version),
    );
    body.encode(&mut out, api_version)
        .map_err(|e| EncodeError::Codec {
            api_key: ApiKey::Fetch,
            api_version,
            reason: format!("{e:#}"),
        })?;
    Ok(Skeleton {
        bytes: out.bytes,
        marks: out.marks,
    })
}

/// Rebuilds the skeleton with real length prefixes and interleaves the record chunks.
fn splice(
    skeleton: Skeleton,
    records: &[Vec<Bytes>],
    flexible: bool,
) -> Result<Vec<Bytes>, EncodeError> {
    let empty_prefix: &[u8] = if flexible { &[1] } else { &[0, 0, 0, 0] };
    let mut meta = BytesMut::with_capacity(skeleton.bytes.len() + records.len() * 5);
    let mut cuts = Vec::with_capacity(records.len());
    let mut from = 0;
    for (&mark, chunks) in skeleton.marks.iter().zip(records) {
        let prefix_start = mark - empty_prefix.len();
        assert_eq!(
            &skeleton.bytes[prefix_start..mark],
            empty_prefix,
            "marker prefix"
        );
        meta.extend_from_slice(&skeleton.bytes[from..prefix_start]);
        put_records_len(&mut meta, chunks.iter().map(Bytes::len).sum(), flexible)?;
        cuts.push(meta.len());
        from = mark;
    }
    meta.extend_from_slice(&skeleton.bytes[from..]);
    let total = meta.len() + records.iter().flatten().map(Bytes::len).sum::<usize>();
    let size = i32::try_from(total - SIZE_PREFIX_BYTES)
        .map_err(|_| EncodeError::TooLarge { bytes: total })?;
    meta[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Ok(interleave(meta.freeze(), &cuts, records))
}

fn put_records_len(out: &mut BytesMut, len: usize, flexible: bool) -> Result<(), EncodeError> {
    let too_large = || EncodeError::TooLarge { bytes: len };
    let len = i32::try_from(len).map_err(|_| too_large())?;
    if flexible {
        let mut v = u32::try_from(len).map_err(|_| too_large())? + 1;
        while v >= 0x80 {
            out.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        out.put_u8(v as u8);
    } else {
        out.put_i32(len);
    }
    Ok(())
}

fn interleave(meta: Bytes, cuts: &[usize], records: &[Vec<Bytes>]) -> Vec<Bytes> {
    let mut out =
        Vec::with_capacity(cuts.len() * 2 + records.iter().map(Vec::len).sum::<usize>() + 1);
    let mut from = 0;
    for (&cut, chunks) in cuts.iter().zip(records) {
        if cut > from {
            out.push(meta.slice(from..cut));
        }
        out.extend(chunks.iter().filter(|c| !c.is_empty()).cloned());
        from = cut;
    }
    out.push(meta.slice(from..));
    out
}

/// A `BytesMut` that notes where the encoder writes a marker slice.
struct MarkRecorder {
    bytes: BytesMut,
    marks: Vec<usize>,
}

// SAFETY: every method delegates to the inner `BytesMut`, whose `BufMut` impl upholds the
// contract (`chunk_mut` returns writable memory, `advance_mut` only past initialized bytes).
unsafe impl BufMut for MarkRecorder {
    fn remaining_mut(&self) -> usize {
        self.bytes.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller guarantees `cnt` bytes of the last `chunk_mut` were initialized,
        // and that chunk came from `self.bytes`.
        unsafe { self.bytes.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.bytes.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.as_ptr() == MARKER.as_ptr() {
            assert!(src.is_empty(), "marker slices are empty");
            self.marks.push(self.bytes.len());
            return;
        }
        self.bytes.put_slice(src);
    }
}

impl ByteBufMut for MarkRecorder {
    fn offset(&self) -> usize {
        self.bytes.offset()
    }

    fn seek(&mut self, offset: usize) {
        self.bytes.seek(offset);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        self.bytes.range(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use crate::kafka_protocol::messages::{ProducerId, ResponseKind, TopicName};
    use crate::kafka_protocol::protocol::StrBytes;
    use crate::response::encode_response;
    use uuid::Uuid;

    fn chunks(partition: usize) -> Vec<Bytes> {
        match partition % 3 {
            0 => vec![],
            1 => vec![Bytes::from(vec![partition as u8; 70])],
            _ => vec![
                Bytes::from(vec![1u8; 200]),
                Bytes::new(),
                Bytes::from(vec![2u8; 33]),
            ],
        }
    }

    fn response(version: i16, topics: usize, partitions: usize) -> FetchResponse {
        let topic = |t: usize| {
            let parts = (0..partitions)
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p as i32)
                        .with_high_watermark(100 + p as i64)
                        .with_last_stable_offset(90)
                        .with_aborted_transactions(Some(vec![AbortedTransaction::default()
                            .with_producer_id(ProducerId(7))
                            .with_first_offset(3)]))
                })
                .collect();
            let topic = FetchableTopicResponse::default().with_partitions(parts);
            if version >= 13 {
                topic.with_topic_id(Uuid::from_u128(t as u128 + 1))
            } else {
                topic.with_topic(TopicName(StrBytes::from_string(format!("topic-{t}"))))
            }
        };
        let session_id = if version >= 7 { 5 } else { 0 };
        FetchResponse::default()
            .with_session_id(session_id)
            .with_responses((0..topics).map(topic).collect())
    }

    fn with_concatenated_records(mut r: FetchResponse, records: &[Vec<Bytes>]) -> FetchResponse {
        let parts = r.responses.iter_mut().flat_map(|t| t.partitions.iter_mut());
        for (p, chunks) in parts.zip(records) {
            p.records = Some(Bytes::from(chunks.concat()));
        }
        r
    }

    #[test]
    fn byte_identical_to_ordinary_encoder_at_every_version() {
        for version in ApiKey::Fetch.valid_versions().min..=ApiKey::Fetch.valid_versions().max {
            for (topics, partitions) in [(0, 0), (1, 1), (2, 3), (3, 70)] {
                let records: Vec<_> = (0..topics * partitions).map(chunks).collect();
                let plain =
                    with_concatenated_records(response(version, topics, partitions), &records);
                let mut expected = BytesMut::new();
                encode_response(
                    &mut expected,
                    77,
                    ApiKey::Fetch,
                    version,
                    &ResponseKind::Fetch(plain),
                )
                .unwrap();
                let parts = encode_fetch_response_vectored(
                    77,
                    version,
                    response(version, topics, partitions),
                    &records,
                )
                .unwrap();
                assert_eq!(
                    parts.concat(),
                    &expected[..],
                    "v{version} {topics}x{partitions}"
                );
            }
        }
    }

    #[test]
    fn record_chunks_are_not_copied() {
        let records = vec![vec![Bytes::from(vec![9u8; 4096])]];
        let parts = encode_fetch_response_vectored(1, 12, response(12, 1, 1), &records).unwrap();
        assert!(
            parts.iter().any(|p| p.as_ptr() == records[0][0].as_ptr()),
            "same allocation"
        );
        assert_eq!(parts.len(), 3, "metadata, records, tail");
    }

    #[test]
    fn large_partition_gets_multi_byte_varint_prefix() {
        let records = vec![vec![Bytes::from(vec![0u8; 300_000])]];
        let plain = with_concatenated_records(response(12, 1, 1), &records);
        let mut expected = BytesMut::new();
        encode_response(
            &mut expected,
            1,
            ApiKey::Fetch,
            12,
            &ResponseKind::Fetch(plain),
        )
        .unwrap();
        let parts = encode_fetch_response_vectored(1, 12, response(12, 1, 1), &records).unwrap();
        assert_eq!(parts.concat(), &expected[..]);
    }

    #[test]
    #[should_panic(expected = "one chunk list per partition")]
    fn mismatched_partition_count_is_a_caller_bug() {
        let _ = encode_fetch_response_vectored(1, 12, response(12, 1, 2), &[vec![]]);
    }
}
