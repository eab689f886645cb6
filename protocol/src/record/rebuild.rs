//! Rebuilding a v2 batch with only some of its records: what log compaction writes.
//!
//! The rebuilt batch keeps what consumers and producers rely on, as Kafka's cleaner does
//! (`MemoryRecords.filterTo`):
//!
//! | field                  | rebuilt batch                                                  |
//! |------------------------|----------------------------------------------------------------|
//! | baseOffset             | unchanged, so every kept record keeps its offset               |
//! | lastOffsetDelta        | unchanged, so the producer's last sequence stays known         |
//! | producer id/epoch/seq  | unchanged                                                      |
//! | leader epoch           | unchanged                                                      |
//! | attributes             | unchanged, plus bit 6 when a delete horizon is set (KIP-534)   |
//! | compression            | unchanged; none for a batch left without records               |
//! | baseTimestamp          | the delete horizon if set, else the first kept record's time   |
//! | maxTimestamp           | LogAppendTime: unchanged; CreateTime: largest kept timestamp   |
//! | records                | the kept ones, offset deltas unchanged, timestamps unchanged   |
//!
//! A record's timestamp is `baseTimestamp + timestampDelta`, so moving the base to the delete
//! horizon rewrites every delta and no record's timestamp changes. A batch that keeps no record
//! becomes a bare 61-byte header (record count 0): Kafka keeps such empty batches to remember
//! a producer's last sequence and the last offset of a cleaned range, and clients skip them.

use super::attributes::{Attributes, Compression, TimestampType};
use super::batch::{BatchError, RecordBatchView};
use super::compression::compress_with_level;
use super::header::{RecordBatchHeader, BATCH_HEADER_BYTES, BATCH_LENGTH_OVERHEAD_BYTES, MAGIC_V2};
use super::records::{Record, RecordIter};
use rill_types::batch::write_crc;
use rill_types::{Offset, TimestampMs};

const COMPRESSION_MASK: i16 = 0b111;
const DELETE_HORIZON_BIT: i16 = 1 << 6;

/// One record of a batch, as compaction sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyedRecord<'a> {
    /// Absolute offset (baseOffset + offsetDelta).
    pub offset: Offset,
    /// Its index in the batch (Produce's record errors name records by it).
    pub index: i32,
    /// Its timestamp (baseTimestamp + timestampDelta; the batch's for LogAppendTime).
    pub timestamp: TimestampMs,
    /// The key; `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// True for a tombstone (null value).
    pub tombstone: bool,
}

/// Calls `each` for every record of `batch` in order, decompressing a copy if needed (at most
/// `decompressed_bytes_max` bytes). Control batches are records too; callers decide.
pub fn for_each_record(
    batch: &[u8],
    decompressed_bytes_max: usize,
    mut each: impl FnMut(KeyedRecord<'_>),
) -> Result<(), BatchError> {
    let view = RecordBatchView::new(batch)?;
    let log_append_time = view.attributes().timestamp_type() == TimestampType::LogAppendTime;
    let mut index = 0;
    with_records(&view, decompressed_bytes_max, |record| {
        let timestamp = if log_append_time {
            view.max_timestamp()
        } else {
            TimestampMs(
                view.base_timestamp()
                    .0
                    .saturating_add(record.timestamp_delta),
            )
        };
        index += 1;
        each(KeyedRecord {
            offset: view.base_offset().plus(i64::from(record.offset_delta)),
            index: index - 1,
            timestamp,
            key: record.key,
            tombstone: record.value.is_none(),
        });
    })
}

/// Runs `each` on every record of the view, in place or in a decompressed copy.
fn with_records(
    view: &RecordBatchView<&[u8]>,
    decompressed_bytes_max: usize,
    mut each: impl FnMut(&Record<'_>),
) -> Result<(), BatchError> {
    let decompressed;
    let bytes = match view.attributes().compression() {
        Ok(Compression::None) => view.records_bytes(),
        _ => {
            decompressed = view.decompressed_records(decompressed_bytes_max)?;
            &decompressed[..]
        }
    };
    for record in RecordIter::new(bytes, view.record_count()) {
        each(&record?);
    }
    Ok(())
}

/// `batch` rebuilt with only the records whose absolute offsets `keep` accepts (see the
/// module doc for what is kept). `delete_horizon_ms` sets the KIP-534 delete horizon; a batch
/// that already carries one keeps it when `None` is passed.
pub fn retain_records(
    batch: &[u8],
    keep: impl Fn(Offset) -> bool,
    delete_horizon: Option<TimestampMs>,
    decompressed_bytes_max: usize,
) -> Result<Vec<u8>, BatchError> {
    rebuild(batch, keep, delete_horizon, None, decompressed_bytes_max)
}

/// `batch` with the same records compressed with `codec` at `level` (a topic's
/// `compression.type` other than `producer`); everything else as [`retain_records`] keeps it.
pub fn recompress(
    batch: &[u8],
    codec: Compression,
    level: Option<i32>,
    decompressed_bytes_max: usize,
) -> Result<Vec<u8>, BatchError> {
    rebuild(
        batch,
        |_| true,
        None,
        Some((codec, level)),
        decompressed_bytes_max,
    )
}

fn rebuild(
    batch: &[u8],
    keep: impl Fn(Offset) -> bool,
    delete_horizon: Option<TimestampMs>,
    target: Option<(Compression, Option<i32>)>,
    decompressed_bytes_max: usize,
) -> Result<Vec<u8>, BatchError> {
    let view = RecordBatchView::new(batch)?;
    let attributes = view.attributes();
    let codec = attributes
        .compression()
        .map_err(|code| BatchError::UnknownCompression { code })?;
    let (codec, level) = target.unwrap_or((codec, None));
    let horizon = delete_horizon
        .or(attributes
            .has_delete_horizon()
            .then(|| view.base_timestamp()))
        .map(|t| t.0);
    let base_ts = view.base_timestamp().0;
    let mut kept: Vec<(RecordParts, i64)> = Vec::new(); // with absolute timestamps
    with_records(&view, decompressed_bytes_max, |r| {
        if keep(view.base_offset().plus(i64::from(r.offset_delta))) {
            let timestamp = base_ts.saturating_add(r.timestamp_delta);
            kept.push((owned_parts(r), timestamp));
        }
    })?;
    let log_append_time = attributes.timestamp_type() == TimestampType::LogAppendTime;
    let (new_base_ts, max_ts) = match (kept.first(), kept.iter().map(|(_, t)| *t).max()) {
        (Some(&(_, first)), Some(max)) if !log_append_time => (horizon.unwrap_or(first), max),
        (Some(&(_, first)), Some(_)) => (horizon.unwrap_or(first), view.max_timestamp().0),
        _ => (view.max_timestamp().0, view.max_timestamp().0),
    };
    let mut body = Vec::new();
    for (parts, timestamp) in &kept {
        encode_record(&mut body, parts, timestamp.saturating_sub(new_base_ts));
    }
    let (codec, horizon) = if kept.is_empty() {
        (Compression::None, None)
    } else {
        (codec, horizon)
    };
    let body = compress_with_level(codec, &body, level)
        .map_err(|reason| BatchError::Decompression { reason })?;
    let mut attrs = attributes.0 & !(COMPRESSION_MASK | DELETE_HORIZON_BIT);
    attrs |= codec_bits(codec);
    if horizon.is_some() {
        attrs |= DELETE_HORIZON_BIT;
    }
    let record_count = i32::try_from(kept.len()).expect("fewer records than the original");
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + body.len());
    // The original header, then the fields that change; the CRC last.
    out.extend_from_slice(&batch[..BATCH_HEADER_BYTES]);
    out.extend_from_slice(&body);
    let header = RecordBatchHeader::view_mut(&mut out).expect("a header was copied");
    let batch_length =
        out_len(BATCH_HEADER_BYTES + body.len()) - BATCH_LENGTH_OVERHEAD_BYTES as i32;
    header.batch_length.set(batch_length);
    assert_eq!(header.magic, MAGIC_V2);
    header.attributes.set(Attributes(attrs).0);
    header.base_timestamp.set(new_base_ts);
    header.max_timestamp.set(max_ts);
    header.records_count.set(record_count);
    write_crc(&mut out);
    Ok(out)
}

/// A batch's length as its i32 field (batches are < 2 GiB).
fn out_len(bytes: usize) -> i32 {
    i32::try_from(bytes).expect("a batch is < 2 GiB")
}

/// A record's parts, owned, for re-encoding.
struct RecordParts {
    offset_delta: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn owned_parts(r: &Record<'_>) -> RecordParts {
    RecordParts {
        offset_delta: r.offset_delta,
        key: r.key.map(<[u8]>::to_vec),
        value: r.value.map(<[u8]>::to_vec),
        headers: r
            .headers
            .iter()
            .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
            .collect(),
    }
}

fn codec_bits(codec: Compression) -> i16 {
    match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// Appends one record in the v2 layout (see `records.rs`).
fn encode_record(out: &mut Vec<u8>, r: &RecordParts, timestamp_delta: i64) {
    let mut body = Vec::with_capacity(16 + r.key.as_ref().map_or(0, Vec::len));
    body.push(0); // attributes
    put_varlong(&mut body, timestamp_delta);
    put_varlong(&mut body, i64::from(r.offset_delta));
    put_nullable(&mut body, r.key.as_deref());
    put_nullable(&mut body, r.value.as_deref());
    put_varlong(&mut body, r.headers.len() as i64);
    for (key, value) in &r.headers {
        put_nullable(&mut body, Some(key));
        put_nullable(&mut body, value.as_deref());
    }
    put_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// Zigzag LEB128 (a varint is a varlong of a smaller value: same bytes).
fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_protocol::records::Compression as Kp;
    use crate::record::tests::encoded_batch;
    use crate::record::RecordBatchView;

    const CAP: usize = 1 << 20;

    fn offsets_and_keys(batch: &[u8]) -> Vec<(i64, Option<Vec<u8>>, bool)> {
        let mut out = Vec::new();
        for_each_record(batch, CAP, |r| {
            out.push((r.offset.0, r.key.map(<[u8]>::to_vec), r.tombstone))
        })
        .unwrap();
        out
    }

    #[test]
    fn keeping_everything_keeps_the_records() {
        for codec in [Kp::None, Kp::Gzip, Kp::Snappy, Kp::Lz4, Kp::Zstd] {
            let mut b = encoded_batch(5, codec);
            RecordBatchView::new(&mut b[..])
                .unwrap()
                .set_base_offset(Offset(100));
            let rebuilt = retain_records(&b, |_| true, None, CAP).unwrap();
            let view = RecordBatchView::validate(&rebuilt[..]).unwrap();
            view.validate_records(CAP).unwrap();
            assert_eq!(
                offsets_and_keys(&rebuilt),
                offsets_and_keys(&b),
                "{codec:?}"
            );
            assert_eq!(view.attributes().compression().unwrap() as u8, codec as u8);
        }
    }

    #[test]
    fn a_subset_keeps_offsets_timestamps_and_the_last_offset() {
        let mut b = encoded_batch(6, Kp::Lz4);
        RecordBatchView::new(&mut b[..])
            .unwrap()
            .set_base_offset(Offset(40));
        let orig = RecordBatchView::validate(&b[..]).unwrap();
        let rebuilt = retain_records(
            &b,
            |o| o == Offset(41) || o == Offset(43),
            Some(TimestampMs(9_999)),
            CAP,
        )
        .unwrap();
        let view = RecordBatchView::validate(&rebuilt[..]).unwrap();
        view.validate_records(CAP).unwrap();
        assert_eq!(view.base_offset(), Offset(40));
        assert_eq!(view.last_offset(), Offset(45), "lastOffsetDelta kept");
        assert_eq!(view.record_count(), 2);
        assert_eq!(view.producer_id(), orig.producer_id());
        assert_eq!(view.base_sequence(), orig.base_sequence());
        assert!(view.attributes().has_delete_horizon());
        assert_eq!(view.base_timestamp(), TimestampMs(9_999));
        let kept: Vec<i64> = offsets_and_keys(&rebuilt).iter().map(|r| r.0).collect();
        assert_eq!(kept, vec![41, 43]);
        // Timestamps survive the move of the base to the horizon.
        let decompressed = view.decompressed_records(CAP).unwrap();
        let ts: Vec<i64> = RecordIter::new(&decompressed, 2)
            .map(|r| view.base_timestamp().0 + r.unwrap().timestamp_delta)
            .collect();
        assert_eq!(ts, vec![1_700_000_000_001, 1_700_000_000_003]);
        assert_eq!(view.max_timestamp(), TimestampMs(1_700_000_000_003));
    }

    #[test]
    fn an_existing_horizon_is_kept_and_nothing_kept_is_a_bare_header() {
        let b = encoded_batch(3, Kp::Gzip);
        let with = retain_records(&b, |o| o != Offset(1), Some(TimestampMs(5)), CAP).unwrap();
        let again = retain_records(&with, |o| o == Offset(2), None, CAP).unwrap();
        let view = RecordBatchView::validate(&again[..]).unwrap();
        assert!(view.attributes().has_delete_horizon());
        assert_eq!(view.base_timestamp(), TimestampMs(5));
        let empty = retain_records(&b, |_| false, Some(TimestampMs(5)), CAP).unwrap();
        let view = RecordBatchView::validate(&empty[..]).unwrap();
        assert_eq!(empty.len(), BATCH_HEADER_BYTES);
        assert_eq!(view.record_count(), 0);
        assert_eq!(view.last_offset_delta(), 2);
        assert_eq!(view.attributes().compression(), Ok(Compression::None));
        assert!(!view.attributes().has_delete_horizon());
        assert!(offsets_and_keys(&empty).is_empty());
    }

    #[test]
    fn an_independent_decoder_reads_the_rebuilt_batch() {
        use crate::kafka_protocol::records::RecordBatchDecoder;
        for codec in [Kp::None, Kp::Gzip, Kp::Snappy, Kp::Lz4, Kp::Zstd] {
            let b = encoded_batch(4, codec);
            let rebuilt = retain_records(&b, |o| o.0 % 2 == 1, Some(TimestampMs(77)), CAP).unwrap();
            let mut bytes = bytes::Bytes::from(rebuilt);
            let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
            let got: Vec<(i64, i64)> = set
                .records
                .iter()
                .map(|r| (r.offset, r.timestamp))
                .collect();
            let base = 1_700_000_000_000;
            assert_eq!(got, vec![(1, base + 1), (3, base + 3)], "{codec:?}");
            assert_eq!(set.records[0].value.as_deref(), Some(&b"value-1"[..]));
            assert_eq!(set.records[0].headers.len(), 1);
        }
    }

    #[test]
    fn recompression_keeps_every_record_and_field() {
        let b = encoded_batch(5, Kp::Gzip);
        for (codec, level) in [
            (Compression::Zstd, Some(9)),
            (Compression::None, None),
            (Compression::Lz4, Some(12)),
            (Compression::Gzip, Some(1)),
            (Compression::Snappy, None),
        ] {
            let out = recompress(&b, codec, level, CAP).unwrap();
            let view = RecordBatchView::validate(&out[..]).unwrap();
            view.validate_records(CAP).unwrap();
            assert_eq!(view.attributes().compression(), Ok(codec));
            assert_eq!(offsets_and_keys(&out), offsets_and_keys(&b));
            let orig = RecordBatchView::new(&b[..]).unwrap();
            assert_eq!(view.max_timestamp(), orig.max_timestamp());
            assert_eq!(view.producer_id(), orig.producer_id());
        }
        let mut indexes = Vec::new();
        for_each_record(&b, CAP, |r| indexes.push((r.index, r.timestamp.0))).unwrap();
        let base = 1_700_000_000_000;
        assert_eq!(
            indexes,
            (0..5).map(|i| (i as i32, base + i)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn varints_match_the_decoder() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(crate::record::records::varlong(&out), Ok((&[][..], v)));
        }
    }
}
