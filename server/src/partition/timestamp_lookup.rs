//! ListOffsets by timestamp resolves to the exact record, as Kafka does: the engine's time index
//! finds the first *batch* whose max timestamp reaches the target; this looks inside that batch
//! (decompressing a copy if needed — a read-path lookup, never the append path) for the first
//! *record* whose timestamp does.

use rill_protocol::record::{RecordBatchView, RecordIter, TimestampType};
use rill_types::{Offset, TimestampMs};

/// Cap on a batch decompressed for a timestamp lookup (bounded memory on hostile batches).
pub const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

/// The first record in `batch` with timestamp >= `target`: `(offset, timestamp)`.
/// `None` when the batch cannot be parsed or no record qualifies (callers fall back to the
/// batch-level answer).
pub fn first_record_at_or_after(
    batch: &[u8],
    target: TimestampMs,
) -> Option<(Offset, TimestampMs)> {
    let view = RecordBatchView::new(batch).ok()?;
    if view.attributes().timestamp_type() == TimestampType::LogAppendTime {
        // Every record of a LogAppendTime batch carries the batch's max timestamp.
        let ts = view.max_timestamp();
        return (ts >= target).then_some((view.base_offset(), ts));
    }
    let decompressed;
    let records = match view.records() {
        Ok(_) => view.records_bytes(),
        Err(_) => {
            decompressed = view.decompressed_records(DECOMPRESSED_BYTES_MAX).ok()?;
            &decompressed[..]
        }
    };
    for record in RecordIter::new(records, view.record_count()) {
        let record = record.ok()?;
        // Record deltas are the producer's, never checked: plain arithmetic, no assertion.
        let ts = TimestampMs(
            view.base_timestamp()
                .0
                .saturating_add(record.timestamp_delta),
        );
        if ts >= target {
            let offset = view.base_offset().0 + i64::from(record.offset_delta);
            return Some((Offset(offset), ts));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_batches::batch;

    #[test]
    fn finds_the_record_inside_the_batch() {
        // fake::batch timestamps are 1000, 1001, ...; base offset 0.
        let b = batch(10);
        assert_eq!(
            first_record_at_or_after(&b, TimestampMs(0)),
            Some((Offset(0), TimestampMs(1000)))
        );
        assert_eq!(
            first_record_at_or_after(&b, TimestampMs(1004)),
            Some((Offset(4), TimestampMs(1004)))
        );
        assert_eq!(
            first_record_at_or_after(&b, TimestampMs(1009)),
            Some((Offset(9), TimestampMs(1009)))
        );
        assert_eq!(first_record_at_or_after(&b, TimestampMs(1010)), None);
    }

    #[test]
    fn garbage_is_none_not_a_panic() {
        assert_eq!(first_record_at_or_after(b"nope", TimestampMs(0)), None);
        let mut b = batch(3).to_vec();
        b.truncate(70);
        assert_eq!(first_record_at_or_after(&b, TimestampMs(0)), None);
    }
}
