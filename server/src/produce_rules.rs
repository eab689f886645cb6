//! The rules a topic's configs put on produced batches, applied by the Produce handler before the
//! append (Kafka's `LogValidator`), and what a refusal says (KIP-467: which records, and why).
//!
//! | rule                                         | config                          | refusal |
//! |----------------------------------------------|---------------------------------|---------|
//! | acks=all needs `min.insync.replicas` replicas (one here) | `min.insync.replicas` | NOT_ENOUGH_REPLICAS (19) |
//! | every record has a key                       | `cleanup.policy` with `compact` | INVALID_RECORD (87), record errors |
//! | record timestamps within the bounds (CreateTime) | `message.timestamp.before.max.ms` / `after.max.ms` (KIP-937) | INVALID_TIMESTAMP (32), record errors |
//! | the stored codec                             | `compression.type` other than `producer` | the batch is recompressed |
//!
//! Records are decoded only when a rule needs them (a compacted topic, finite timestamp bounds,
//! or a codec to change), a copy decompressed up to [`DECOMPRESSED_BYTES_MAX`].

use bytes::BytesMut;
use rill_protocol::record::{for_each_record, recompress, RecordBatchView, TimestampType};
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;
use rill_types::TimestampMs;

use crate::partition::ops::Acks;
use crate::topic_config::{TargetCompression, TopicSettings};

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

/// The record-level rules: keys on compacted topics, timestamp bounds.
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
    if !(check_time || need_key) || view.attributes().is_control() {
        return Ok(());
    }
    let (mut keyless, mut out_of_range, mut errors) = (0usize, 0usize, Vec::new());
    let note = |errors: &mut Vec<RecordError>, batch_index: i32, message: String| {
        if errors.len() < RECORD_ERRORS_MAX {
            errors.push(RecordError {
                batch_index,
                message,
            });
        }
    };
    let scanned = for_each_record(batch, DECOMPRESSED_BYTES_MAX, |r| {
        if need_key && r.key.is_none() {
            keyless += 1;
            let message = "Compacted topic cannot accept message without key".to_string();
            note(&mut errors, r.index, message);
        }
        if check_time {
            if let Some(why) = timestamp_out_of_range(r.timestamp, now, bounds) {
                out_of_range += 1;
                note(&mut errors, r.index, why);
            }
        }
    });
    if let Err(e) = scanned {
        return Err(Refusal {
            code: ErrorCode::InvalidRecord,
            message: Some(e.to_string()),
            record_errors: Vec::new(),
        });
    }
    let (code, count) = match (keyless, out_of_range) {
        (0, 0) => return Ok(()),
        (k, _) if k > 0 => (ErrorCode::InvalidRecord, keyless + out_of_range),
        _ => (ErrorCode::InvalidTimestamp, out_of_range),
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
    use crate::topic_config::{ConfigLayers, TopicSettings};
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
