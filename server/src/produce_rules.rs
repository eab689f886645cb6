//! The rules a topic's configs put on produced batches, applied by the Produce handler before the
//! append (Kafka's `LogValidator`), and what a refusal says (KIP-467: which records, and why).
//!
//! | rule                                         | config                          | refusal |
//! |----------------------------------------------|---------------------------------|---------|
//! | acks=all needs `min.insync.replicas` replicas (one here) | `min.insync.replicas` | NOT_ENOUGH_REPLICAS (19) |
//! | no control batch from a client               | -                               | INVALID_RECORD (87) |
//! | a producer id comes with a sequence ≥ 0      | -                               | INVALID_RECORD |
//! | every record well formed: lengths, varints, headers (non-null keys), exactly `recordsCount` records, nothing after them | - | INVALID_RECORD, the record's error |
//! | offset deltas 0, 1, 2, … in order            | -                               | INVALID_RECORD, record errors |
//! | every record has a key                       | `cleanup.policy` with `compact` | INVALID_RECORD, record errors |
//! | record timestamps within the bounds (CreateTime) | `message.timestamp.before.max.ms` / `after.max.ms` (KIP-937) | INVALID_TIMESTAMP (32), record errors |
//! | the stored codec                             | `compression.type` other than `producer` | the batch is recompressed |
//!
//! As Kafka's `LogValidator`, every batch's records are decoded (a compressed batch in a copy
//! decompressed up to [`DECOMPRESSED_BYTES_MAX`]): Rill stores batches as they came, so a
//! malformed record let in would fail every consumer that reads it. A record gets one error, the
//! first of offset, key, timestamp; the partition's code is INVALID_TIMESTAMP when a timestamp is
//! among them, INVALID_RECORD otherwise (as Kafka). Kafka rewrites out-of-order offset deltas of
//! compressed batches; Rill, which does not rewrite batches, refuses them.

use bytes::BytesMut;
use rill_protocol::record::{
    for_each_record, recompress, BatchError, NotOneBatch, RecordBatchView, TimestampType,
};
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;
use rill_types::TimestampMs;

use crate::config::topic::{TargetCompression, TopicSettings};
use crate::partition::ops::Acks;

/// Largest decompressed batch the rules look into.
pub const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;
/// Record errors listed per refused batch (the message says how many there were).
const RECORD_ERRORS_MAX: usize = 100;

/// One refused record: its index in its batch and why (Produce's `record_errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// Index of the record in its batch.
    pub batch_index: i32,
    /// Why it was refused.
    pub message: String,
}

/// A refused partition: its code, a message, and the records at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The partition's error code.
    pub code: ErrorCode,
    /// The partition's error message.
    pub message: Option<String>,
    /// The records at fault (KIP-467).
    pub record_errors: Vec<RecordError>,
}

impl From<ErrorCode> for Refusal {
    fn from(code: ErrorCode) -> Self {
        Refusal {
            code,
            message: None,
            record_errors: Vec::new(),
        }
    }
}

/// A batch that failed [`ValidatedBatch::new`]: its code and what was wrong. A batch of magic
/// 0 or 1 is INVALID_RECORD, as Kafka answers Produce v3 and later; any other magic is
/// CORRUPT_MESSAGE, which Kafka's batch reader throws for it.
pub fn batch_refusal(e: &BatchError) -> Refusal {
    let (code, message) = match e {
        BatchError::UnsupportedMagic { magic } if !(0..=2).contains(magic) => (
            ErrorCode::CorruptMessage,
            format!("Invalid magic found in record: {magic}"),
        ),
        BatchError::UnsupportedMagic { magic } => (
            ErrorCode::InvalidRecord,
            format!("Produce requests are only allowed to contain record batches with magic 2, not {magic}"),
        ),
        other => (other.error_code(), format!("Invalid record batch: {other}")),
    };
    Refusal {
        code,
        message: Some(message),
        record_errors: Vec::new(),
    }
}

/// A partition of Produce `version` (v3+) whose records are not exactly one whole batch,
/// worded as Kafka's `ProduceRequest.validateRecords`. Kafka refuses such a partition whole
/// (INVALID_RECORD), so nothing of it is written: a batch cut short is no batch to Kafka, so
/// INVALID_RECORD too (not the retriable CORRUPT_MESSAGE: resending the same bytes cannot
/// help). A batchLength below 14 or a magic outside 0..=2 is its batch error (CORRUPT_MESSAGE).
pub fn not_one_batch(version: i16, why: &NotOneBatch) -> Refusal {
    let at_least_one = format!(
        "Produce requests with version {version} must have at least one record batch per partition"
    );
    let exactly_one = format!(
        "Produce requests with version {version} are only allowed to contain exactly one record batch per partition"
    );
    match why {
        NotOneBatch::Empty => invalid(at_least_one),
        NotOneBatch::Cut { available } => invalid(format!(
            "{at_least_one}: its {available} bytes hold no whole batch (a batch cut short?)"
        )),
        NotOneBatch::MoreThanOne => invalid(exactly_one),
        NotOneBatch::Trailing { extra } => invalid(format!(
            "{exactly_one}: {extra} bytes follow the batch and are not a whole batch"
        )),
        NotOneBatch::Malformed(e) => batch_refusal(e),
    }
}

/// Whether a produce with `acks` may go to this topic at all.
pub fn check_acks(settings: &TopicSettings, acks: Acks) -> Result<(), Refusal> {
    if acks == Acks::All && settings.min_insync_replicas > 1 {
        return Err(Refusal {
            code: ErrorCode::NotEnoughReplicas,
            message: Some(format!(
                "min.insync.replicas is {} but only this broker holds the partition",
                settings.min_insync_replicas
            )),
            record_errors: Vec::new(),
        });
    }
    Ok(())
}

/// Applies the rules to one batch: the batch to append (recompressed if the topic says so),
/// or the refusal.
pub fn apply(
    batch: ValidatedBatch,
    settings: &TopicSettings,
    message_bytes_max: usize,
    now: TimestampMs,
) -> Result<ValidatedBatch, Refusal> {
    check_batch(batch.as_bytes())?;
    check_records(batch.as_bytes(), settings, now)?;
    let TargetCompression::Codec(codec, level) = settings.compression else {
        return Ok(batch);
    };
    let view = RecordBatchView::new(batch.as_bytes()).map_err(|e| Refusal::from(e.error_code()))?;
    if view.attributes().compression() == Ok(codec) || view.attributes().is_control() {
        return Ok(batch);
    }
    let rebuilt = recompress(batch.as_bytes(), codec, level, DECOMPRESSED_BYTES_MAX)
        .map_err(|e| Refusal::from(e.error_code()))?;
    ValidatedBatch::new(BytesMut::from(&rebuilt[..]), message_bytes_max)
        .map_err(|e| Refusal::from(e.error_code()))
}

/// A batch-level refusal: INVALID_RECORD with `message`, no record errors.
fn invalid(message: String) -> Refusal {
    Refusal {
        code: ErrorCode::InvalidRecord,
        message: Some(message),
        record_errors: Vec::new(),
    }
}

/// The batch-level rules of Kafka's `LogValidator.validateBatch` that the batch checks
/// ([`ValidatedBatch::new`]) leave: no control batch, no producer id without a sequence.
fn check_batch(batch: &[u8]) -> Result<(), Refusal> {
    let view = RecordBatchView::new(batch).map_err(|e| Refusal::from(e.error_code()))?;
    if view.attributes().is_control() {
        return Err(invalid(
            "Clients are not allowed to write control records".into(),
        ));
    }
    let (producer_id, sequence) = (view.producer_id(), view.base_sequence());
    if producer_id.is_some() && sequence.0 < 0 {
        return Err(invalid(format!(
            "Invalid sequence number {} in record batch with producerId {}",
            sequence.0, producer_id.0
        )));
    }
    Ok(())
}

/// The record-level rules: every record decodes, offsets in order, keys on compacted topics,
/// timestamp bounds.
fn check_records(batch: &[u8], settings: &TopicSettings, now: TimestampMs) -> Result<(), Refusal> {
    let view = RecordBatchView::new(batch).map_err(|e| Refusal::from(e.error_code()))?;
    let create_time = view.attributes().timestamp_type() == TimestampType::CreateTime
        && !settings.log.log_append_time;
    let bounds = (
        settings.timestamp_before_max_ms,
        settings.timestamp_after_max_ms,
    );
    let check_time = create_time && bounds != (None, None);
    let need_key = settings.policy.compact;
    let base = view.base_offset();
    let (mut count, mut timestamps, mut decoded, mut errors) = (0usize, 0usize, 0i32, Vec::new());
    let scanned = for_each_record(batch, DECOMPRESSED_BYTES_MAX, |r| {
        decoded += 1;
        // recordsCount = lastOffsetDelta + 1 (checked): deltas in order are exactly the indexes.
        let delta = r.offset.0 - base.0;
        let error = if delta != i64::from(r.index) {
            Some(format!(
                "Record {} has offset delta {delta}: the deltas of a batch are 0, 1, 2, ...",
                r.index
            ))
        } else if need_key && r.key.is_none() {
            Some("Compacted topic cannot accept message without key".to_string())
        } else if check_time {
            let why = timestamp_out_of_range(r.timestamp, now, bounds);
            timestamps += usize::from(why.is_some());
            why
        } else {
            None
        };
        if let Some(message) = error {
            count += 1;
            if errors.len() < RECORD_ERRORS_MAX {
                errors.push(RecordError {
                    batch_index: r.index,
                    message,
                });
            }
        }
    });
    if let Err(e) = scanned {
        let message = format!("Found invalid record structure: {e}");
        // A record that does not decode is the one after the last that did.
        let record_errors = match e {
            BatchError::InvalidRecord { .. } => vec![RecordError {
                batch_index: decoded,
                message: message.clone(),
            }],
            _ => Vec::new(),
        };
        return Err(Refusal {
            code: e.error_code(),
            message: Some(message),
            record_errors,
        });
    }
    if count == 0 {
        return Ok(());
    }
    let code = if timestamps > 0 {
        ErrorCode::InvalidTimestamp
    } else {
        ErrorCode::InvalidRecord
    };
    Err(Refusal {
        code,
        message: Some(format!("{count} record(s) refused: {}", errors[0].message)),
        record_errors: errors,
    })
}

/// Why `ts` is out of the KIP-937 bounds around `now`, if it is.
fn timestamp_out_of_range(
    ts: TimestampMs,
    now: TimestampMs,
    (before_max, after_max): (Option<u64>, Option<u64>),
) -> Option<String> {
    let before = before_max.is_some_and(|max| now.0.saturating_sub(ts.0) > max as i64);
    let after = after_max.is_some_and(|max| ts.0.saturating_sub(now.0) > max as i64);
    if !(before || after) {
        return None;
    }
    let low = before_max.map_or(i64::MIN, |m| now.0.saturating_sub(m as i64));
    let high = after_max.map_or(i64::MAX, |m| now.0.saturating_add(m as i64));
    Some(format!(
        "Timestamp {ts} of the record is out of range: it should be within [{low}, {high}]"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::topic::{ConfigLayers, TopicSettings};
    use bytes::Bytes;
    use rill_protocol::record::{encode_plain_batch, Compression, PlainRecord};
    use std::collections::BTreeMap;

    fn settings(pairs: &[(&str, &str)]) -> TopicSettings {
        let topic: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let empty = BTreeMap::new();
        TopicSettings::from_layers(&ConfigLayers {
            topic: &topic,
            dynamic_broker: &empty,
            dynamic_default: &empty,
            static_broker: &empty,
        })
        .unwrap()
    }

    fn batch(records: &[(Option<&str>, i64)]) -> ValidatedBatch {
        let bytes = encode_plain_batch(records.iter().map(|(k, ts)| PlainRecord {
            key: k.map(|k| Bytes::from(k.to_string())),
            value: Some(Bytes::from_static(b"v")),
            timestamp_ms: *ts,
        }));
        ValidatedBatch::new(bytes, 1 << 20).unwrap()
    }

    #[test]
    fn a_compacted_topic_refuses_keyless_records_and_names_them() {
        let compacted = settings(&[("cleanup.policy", "compact")]);
        let b = batch(&[(Some("a"), 5), (None, 5), (Some("b"), 5), (None, 5)]);
        let refusal = apply(b, &compacted, 1 << 20, TimestampMs(5)).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidRecord);
        let indexes: Vec<i32> = refusal
            .record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect();
        assert_eq!(indexes, [1, 3]);
        assert!(refusal.message.unwrap().contains("2 record(s)"));
        let ok = batch(&[(Some("a"), 5)]);
        assert!(apply(ok, &compacted, 1 << 20, TimestampMs(5)).is_ok());
        let plain = settings(&[]);
        assert!(apply(batch(&[(None, 5)]), &plain, 1 << 20, TimestampMs(5)).is_ok());
    }

    #[test]
    fn timestamps_outside_the_bounds_are_invalid_timestamp() {
        let bounded = settings(&[
            ("message.timestamp.before.max.ms", "1000"),
            ("message.timestamp.after.max.ms", "100"),
        ]);
        let now = TimestampMs(10_000);
        let b = batch(&[(None, 9_000), (None, 8_999), (None, 10_100), (None, 10_101)]);
        let refusal = apply(b, &bounded, 1 << 20, now).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidTimestamp);
        let indexes: Vec<i32> = refusal
            .record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect();
        assert_eq!(indexes, [1, 3]);
        assert!(refusal.record_errors[0].message.contains("[9000, 10100]"));
        let log_append = settings(&[
            ("message.timestamp.before.max.ms", "1"),
            ("message.timestamp.type", "LogAppendTime"),
        ]);
        assert!(apply(batch(&[(None, 0)]), &log_append, 1 << 20, now).is_ok());
    }

    /// `b` changed by `edit` (header and record bytes), its CRC made right again.
    fn patched(b: ValidatedBatch, edit: impl FnOnce(&mut BytesMut)) -> ValidatedBatch {
        let mut bytes = BytesMut::from(b.as_bytes());
        edit(&mut bytes);
        rill_types::batch::write_crc(&mut bytes);
        ValidatedBatch::new(bytes, 1 << 20).unwrap()
    }

    const RECORDS: usize = rill_types::batch::BATCH_HEADER_BYTES;

    #[test]
    fn control_batches_and_producer_ids_without_sequence_are_invalid_records() {
        let plain = settings(&[]);
        let control = patched(batch(&[(None, 5)]), |b| {
            let h = rill_types::batch::RecordBatchHeader::view_mut(b).unwrap();
            h.attributes.set(h.attributes.get() | 0x20);
        });
        let refusal = apply(control, &plain, 1 << 20, TimestampMs(5)).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidRecord);
        assert!(refusal.message.unwrap().contains("control records"));
        let no_sequence = patched(batch(&[(None, 5)]), |b| {
            let h = rill_types::batch::RecordBatchHeader::view_mut(b).unwrap();
            h.producer_id.set(7);
            h.base_sequence.set(-1);
        });
        let refusal = apply(no_sequence, &plain, 1 << 20, TimestampMs(5)).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidRecord);
        assert!(refusal
            .message
            .unwrap()
            .contains("Invalid sequence number -1"));
    }

    #[test]
    fn malformed_records_are_refused_on_every_topic() {
        let plain = settings(&[]);
        // The second record's length varint (zigzag) now claims 60 bytes more than it has.
        let first_len = |b: &BytesMut| 1 + usize::from(b[RECORDS] / 2);
        let too_long = patched(batch(&[(Some("a"), 5), (Some("b"), 5)]), |b| {
            let second = RECORDS + first_len(b);
            b[second] += 120;
        });
        let refusal = apply(too_long, &plain, 1 << 20, TimestampMs(5)).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidRecord);
        assert!(refusal
            .message
            .unwrap()
            .contains("invalid record structure"));
        assert_eq!(refusal.record_errors[0].batch_index, 1, "names the record");
        // One record more announced than the batch holds.
        let short = patched(batch(&[(Some("a"), 5), (Some("b"), 5)]), |b| {
            let h = rill_types::batch::RecordBatchHeader::view_mut(b).unwrap();
            h.records_count.set(3);
            h.last_offset_delta.set(2);
        });
        let refusal = apply(short, &plain, 1 << 20, TimestampMs(5)).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidRecord);
        assert_eq!(refusal.record_errors[0].batch_index, 2);
        // The second record's offset delta (after length, attributes, timestamp delta) is 0.
        let repeated = patched(batch(&[(Some("a"), 5), (Some("b"), 5)]), |b| {
            let second = RECORDS + first_len(b);
            b[second + 3] = 0;
        });
        let refusal = apply(repeated, &plain, 1 << 20, TimestampMs(5)).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidRecord);
        assert_eq!(refusal.record_errors.len(), 1);
        assert_eq!(refusal.record_errors[0].batch_index, 1);
        assert!(refusal.record_errors[0].message.contains("offset delta 0"));
    }

    #[test]
    fn a_record_gets_its_first_error_and_a_timestamp_error_decides_the_code() {
        let both = settings(&[
            ("cleanup.policy", "compact"),
            ("message.timestamp.before.max.ms", "1000"),
        ]);
        let now = TimestampMs(10_000);
        // Record 0: keyless and too old (one error, the key's); record 1: too old.
        let b = batch(&[(None, 0), (Some("k"), 0), (Some("k"), 10_000)]);
        let refusal = apply(b, &both, 1 << 20, now).unwrap_err();
        assert_eq!(refusal.code, ErrorCode::InvalidTimestamp);
        let errors: Vec<(i32, bool)> = refusal
            .record_errors
            .iter()
            .map(|e| (e.batch_index, e.message.contains("without key")))
            .collect();
        assert_eq!(errors, [(0, true), (1, false)]);
    }

    #[test]
    fn a_batch_that_is_not_v2_is_an_invalid_record_with_a_message() {
        let refusal = batch_refusal(&BatchError::UnsupportedMagic { magic: 1 });
        assert_eq!(refusal.code, ErrorCode::InvalidRecord);
        assert!(refusal.message.unwrap().contains("magic 2, not 1"));
        // A magic no Kafka version wrote is corrupt, as Kafka's batch reader says.
        for magic in [3, -1] {
            let refusal = batch_refusal(&BatchError::UnsupportedMagic { magic });
            assert_eq!(refusal.code, ErrorCode::CorruptMessage);
            assert!(refusal.message.unwrap().contains("Invalid magic"));
        }
        let refusal = batch_refusal(&BatchError::CrcMismatch {
            stored: 1,
            computed: 2,
        });
        assert_eq!(refusal.code, ErrorCode::CorruptMessage);
        assert!(refusal.message.unwrap().contains("CRC"));
    }

    #[test]
    fn a_topic_codec_recompresses_other_batches() {
        let zstd = settings(&[("compression.type", "zstd")]);
        let out = apply(
            batch(&[(None, 1), (None, 2)]),
            &zstd,
            1 << 20,
            TimestampMs(0),
        )
        .unwrap();
        let view = RecordBatchView::new(out.as_bytes()).unwrap();
        assert_eq!(view.attributes().compression(), Ok(Compression::Zstd));
        assert_eq!(view.record_count(), 2);
    }

    #[test]
    fn min_insync_replicas_above_one_refuses_acks_all_only() {
        let two = settings(&[("min.insync.replicas", "2")]);
        assert_eq!(
            check_acks(&two, Acks::All).unwrap_err().code,
            ErrorCode::NotEnoughReplicas
        );
        assert!(check_acks(&two, Acks::Leader).is_ok());
        assert!(check_acks(&settings(&[]), Acks::All).is_ok());
    }
}
