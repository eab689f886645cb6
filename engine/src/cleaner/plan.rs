//! What to clean and when: pure decisions over segment summaries (no I/O), as Kafka's
//! `LogCleanerManager` makes them.
//!
//! ```text
//!  log start                first dirty            first uncleanable       log end
//!  |---- clean section -------|---- dirty section ----|---- not yet ---------|
//!   cleaned before              appended since the      active segment, or too
//!                               last clean              young (min.compaction.lag.ms)
//! ```
//! - dirty ratio = dirty bytes / (clean + dirty bytes), counted in whole segments: the segment
//!   holding the first dirty offset counts as dirty;
//! - a log is cleaned when its dirty ratio reaches `min.cleanable.dirty.ratio`, or when its
//!   oldest dirty batch is older than `max.compaction.lag.ms`;
//! - the first uncleanable offset is the base of the active segment, or of the first dirty
//!   segment holding a record younger than `min.compaction.lag.ms`, or of the segment holding
//!   the caller's bound (high watermark, and later the last stable offset), whichever is first;
//! - segments from the log start up to the offset map's end are cleaned in groups whose sizes
//!   add up to at most `segment.bytes` (and span fewer than 2^31 offsets), so segments that
//!   cleaning shrank merge into one.

use super::CompactionConfig;
use crate::types::{Offset, TimestampMs};
use std::ops::Range;

/// A sealed segment as the planner sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    /// First offset of the segment's range (its name).
    pub base: Offset,
    /// One past the segment's range: the next segment's base.
    pub next_offset: Offset,
    /// Bytes of the `.log`.
    pub size_bytes: u64,
    /// Largest batch max timestamp (`NONE` if empty).
    pub max_timestamp: TimestampMs,
}

/// The sections of a log, in whole sealed segments.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Cleanable {
    /// Where the dirty section starts (the cleaner checkpoint, at least the log start).
    pub first_dirty: Offset,
    /// Where cleaning must stop (a segment base).
    pub first_uncleanable: Offset,
    /// Bytes of the segments wholly before the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments from the one holding the first dirty offset to the uncleanable one.
    pub dirty_bytes: u64,
    /// Index (in the summaries) of the segment holding the first dirty offset.
    pub first_dirty_segment: usize,
    /// Index of the first segment not to clean (== the number of cleanable segments).
    pub uncleanable_segment: usize,
}

impl Cleanable {
    /// Dirty bytes over all cleanable bytes (0 when there are none).
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            return 0.0;
        }
        self.dirty_bytes as f64 / total as f64
    }
}

/// The sections of a log whose sealed segments are `sealed` (in order, contiguous),
/// `checkpoint` the end of the last clean, `bound` the first offset that must not be cleaned
/// (the active segment's base or less).
pub fn cleanable(
    sealed: &[SegmentSummary],
    checkpoint: Option<Offset>,
    bound: Offset,
    config: &CompactionConfig,
    now: TimestampMs,
) -> Cleanable {
    debug_assert!(sealed.windows(2).all(|w| w[0].next_offset == w[1].base));
    let log_first = sealed.first().map_or(bound, |s| s.base);
    let first_dirty = checkpoint
        .filter(|&cp| cp <= bound)
        .unwrap_or(log_first)
        .max(log_first);
    let holding = |offset: Offset| sealed.partition_point(|s| s.next_offset <= offset);
    let first_dirty_segment = holding(first_dirty);
    let mut uncleanable_segment = holding(bound).min(sealed.len());
    if config.min_compaction_lag_ms > 0 {
        let young = |s: &SegmentSummary| {
            s.max_timestamp != TimestampMs::NONE
                && now.0.saturating_sub(s.max_timestamp.0) < config.min_compaction_lag_ms as i64
        };
        if let Some(i) = sealed[first_dirty_segment.min(uncleanable_segment)..uncleanable_segment]
            .iter()
            .position(young)
        {
            uncleanable_segment = first_dirty_segment + i;
        }
    }
    let first_uncleanable = sealed.get(uncleanable_segment).map_or(bound, |s| s.base);
    let bytes = |r: Range<usize>| sealed[r].iter().map(|s| s.size_bytes).sum::<u64>();
    let split = first_dirty_segment.min(uncleanable_segment);
    let cleanable = Cleanable {
        first_dirty: first_dirty.min(first_uncleanable),
        first_uncleanable,
        clean_bytes: bytes(0..split),
        dirty_bytes: bytes(split..uncleanable_segment),
        first_dirty_segment: split,
        uncleanable_segment,
    };
    assert!(cleanable.first_dirty <= cleanable.first_uncleanable);
    assert!(cleanable.first_dirty_segment <= cleanable.uncleanable_segment);
    cleanable
}

/// Whether to clean now: dirty bytes exist and either the dirty ratio reached
/// `min_cleanable_dirty_ratio` or the oldest dirty batch (max timestamp `first_dirty_batch_ts`)
/// is older than `max_compaction_lag_ms`.
pub fn should_clean(
    c: &Cleanable,
    config: &CompactionConfig,
    first_dirty_batch_ts: Option<TimestampMs>,
    now: TimestampMs,
) -> bool {
    if c.dirty_bytes == 0 {
        return false;
    }
    let overdue = config.max_compaction_lag_ms.is_some_and(|lag| {
        first_dirty_batch_ts
            .filter(|&ts| ts != TimestampMs::NONE)
            .is_some_and(|ts| now.0.saturating_sub(ts.0) > lag as i64)
    });
    overdue || c.dirty_ratio() >= config.min_cleanable_dirty_ratio
}

/// Splits `segments[..count]` into runs cleaned into one segment each: a run's sizes add up to
/// at most `segment_bytes_max` (a single larger segment is a run of its own) and it spans at
/// most `i32::MAX` offsets, so relative offsets fit the indexes.
pub fn group_segments(
    segments: &[SegmentSummary],
    count: usize,
    segment_bytes_max: u64,
) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < count {
        let mut end = start + 1;
        let mut size = segments[start].size_bytes;
        while end < count {
            let next = &segments[end];
            let span = next.next_offset.0 - segments[start].base.0;
            if size + next.size_bytes > segment_bytes_max || span > i64::from(i32::MAX) {
                break;
            }
            size += next.size_bytes;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments of `sizes` bytes, 100 offsets each, max timestamp = 1000 * (i + 1).
    fn segs(sizes: &[u64]) -> Vec<SegmentSummary> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size_bytes)| SegmentSummary {
                base: Offset(100 * i as i64),
                next_offset: Offset(100 * (i as i64 + 1)),
                size_bytes,
                max_timestamp: TimestampMs(1000 * (i as i64 + 1)),
            })
            .collect()
    }

    fn config() -> CompactionConfig {
        CompactionConfig::default()
    }

    #[test]
    fn never_cleaned_log_is_all_dirty() {
        let s = segs(&[10, 20, 30]);
        let c = cleanable(&s, None, Offset(300), &config(), TimestampMs(0));
        assert_eq!(
            (c.first_dirty, c.first_uncleanable),
            (Offset(0), Offset(300))
        );
        assert_eq!((c.clean_bytes, c.dirty_bytes), (0, 60));
        assert_eq!(c.dirty_ratio(), 1.0);
        assert!(should_clean(&c, &config(), None, TimestampMs(0)));
    }

    #[test]
    fn checkpoint_splits_clean_from_dirty_by_whole_segments() {
        let s = segs(&[10, 20, 30, 40]);
        // Checkpoint inside segment 1: segment 1 counts as dirty.
        let c = cleanable(
            &s,
            Some(Offset(150)),
            Offset(400),
            &config(),
            TimestampMs(0),
        );
        assert_eq!(c.first_dirty, Offset(150));
        assert_eq!((c.clean_bytes, c.dirty_bytes), (10, 90));
        assert_eq!((c.first_dirty_segment, c.uncleanable_segment), (1, 4));
        // At a boundary.
        let c = cleanable(
            &s,
            Some(Offset(300)),
            Offset(400),
            &config(),
            TimestampMs(0),
        );
        assert_eq!((c.clean_bytes, c.dirty_bytes), (60, 40));
        let below_ratio = CompactionConfig {
            min_cleanable_dirty_ratio: 0.5,
            ..config()
        };
        assert!(!should_clean(&c, &below_ratio, None, TimestampMs(0)));
    }

    #[test]
    fn a_checkpoint_past_the_bound_or_below_the_start_is_reset() {
        let s = segs(&[10, 20]);
        let c = cleanable(
            &s,
            Some(Offset(900)),
            Offset(200),
            &config(),
            TimestampMs(0),
        );
        assert_eq!(
            c.first_dirty,
            Offset(0),
            "stale checkpoint: everything dirty"
        );
        let mut later = s.clone();
        later.remove(0);
        let c = cleanable(
            &later,
            Some(Offset(5)),
            Offset(200),
            &config(),
            TimestampMs(0),
        );
        assert_eq!(c.first_dirty, Offset(100), "log start moved past it");
    }

    #[test]
    fn bound_inside_a_segment_keeps_that_segment() {
        let s = segs(&[10, 20, 30]);
        let c = cleanable(&s, None, Offset(250), &config(), TimestampMs(0));
        assert_eq!(c.first_uncleanable, Offset(200));
        assert_eq!(c.dirty_bytes, 30);
    }

    #[test]
    fn min_lag_stops_at_the_first_young_segment() {
        let s = segs(&[10, 20, 30]); // max timestamps 1000, 2000, 3000
        let lag = CompactionConfig {
            min_compaction_lag_ms: 1500,
            ..config()
        };
        let c = cleanable(&s, None, Offset(300), &lag, TimestampMs(3200));
        assert_eq!(c.first_uncleanable, Offset(100), "segment 1 is 1200 ms old");
        assert_eq!(c.dirty_bytes, 10);
        let c = cleanable(&s, None, Offset(300), &lag, TimestampMs(900));
        assert_eq!(c.dirty_bytes, 0, "a timestamp in the future is young");
    }

    #[test]
    fn max_lag_forces_a_clean_below_the_ratio() {
        let s = segs(&[100, 1]);
        let c = cleanable(
            &s,
            Some(Offset(100)),
            Offset(200),
            &config(),
            TimestampMs(0),
        );
        let cfg = CompactionConfig {
            min_cleanable_dirty_ratio: 0.9,
            max_compaction_lag_ms: Some(1000),
            ..config()
        };
        assert!(!should_clean(
            &c,
            &cfg,
            Some(TimestampMs(500)),
            TimestampMs(1000)
        ));
        assert!(should_clean(
            &c,
            &cfg,
            Some(TimestampMs(500)),
            TimestampMs(1501)
        ));
        assert!(!should_clean(
            &c,
            &cfg,
            Some(TimestampMs::NONE),
            TimestampMs(9999)
        ));
    }

    #[test]
    fn nothing_dirty_is_never_cleaned() {
        let s = segs(&[10]);
        let c = cleanable(
            &s,
            Some(Offset(100)),
            Offset(100),
            &config(),
            TimestampMs(0),
        );
        assert_eq!(c.dirty_bytes, 0);
        assert!(!should_clean(&c, &config(), None, TimestampMs(0)));
        let none = cleanable(&[], None, Offset(0), &config(), TimestampMs(0));
        assert_eq!((none.clean_bytes, none.dirty_bytes), (0, 0));
    }

    #[test]
    fn groups_merge_small_segments_up_to_the_segment_size() {
        let s = segs(&[10, 20, 30, 100, 5, 5, 200]);
        assert_eq!(
            group_segments(&s, s.len(), 60),
            vec![0..3, 3..4, 4..6, 6..7],
            "oversized segments stand alone"
        );
        assert_eq!(group_segments(&s, 2, 1000), vec![0..2]);
        assert!(group_segments(&s, 0, 1000).is_empty());
    }

    #[test]
    fn groups_span_fewer_than_2_pow_31_offsets() {
        let s = vec![
            SegmentSummary {
                base: Offset(0),
                next_offset: Offset(i64::from(i32::MAX) - 10),
                size_bytes: 1,
                max_timestamp: TimestampMs::NONE,
            },
            SegmentSummary {
                base: Offset(i64::from(i32::MAX) - 10),
                next_offset: Offset(i64::from(i32::MAX) + 10),
                size_bytes: 1,
                max_timestamp: TimestampMs::NONE,
            },
        ];
        assert_eq!(group_segments(&s, 2, 1 << 30), vec![0..1, 1..2]);
    }
}
