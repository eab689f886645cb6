//! Topic configs the engine applies: changed while a log is open, LogAppendTime, the roll rules
//! of `segment.index.bytes` and `segment.jitter.ms` (simulated disk).

use crate::config::{FlushPolicy, LogConfig};
use crate::io::sim::{block_on, FaultConfig, SimStorage};
use crate::log_tests::{append, batch, open, read_all, small_config};
use crate::types::{Offset, TimestampMs};
use rill_types::batch::{RecordBatchHeader, TimestampType, ValidatedBatch};

#[test]
fn switching_to_every_append_flushes_first_and_the_hw_never_goes_back() {
    let s = SimStorage::new(1, FaultConfig::default());
    let interval = LogConfig {
        flush: FlushPolicy::Interval {
            messages: Some(1000),
            ms: None,
        },
        ..small_config()
    };
    let mut log = open(&s, interval);
    append(&mut log, 3, 10, 5);
    assert_eq!(
        log.high_watermark(),
        Offset(3),
        "interval: HW at the log end"
    );
    assert_eq!(log.durable_offset(), Offset(0));
    block_on(log.reconfigure(small_config())).unwrap();
    assert_eq!(log.durable_offset(), Offset(3), "flushed before the switch");
    assert_eq!(log.high_watermark(), Offset(3));
    append(&mut log, 1, 10, 5);
    assert_eq!(
        log.high_watermark(),
        Offset(3),
        "now the HW waits for the flush"
    );
    block_on(log.flush()).unwrap();
    assert_eq!(log.high_watermark(), Offset(4));
    let back = LogConfig {
        flush: FlushPolicy::Interval {
            messages: None,
            ms: Some(1),
        },
        ..small_config()
    };
    block_on(log.reconfigure(back)).unwrap();
    append(&mut log, 1, 10, 5);
    assert_eq!(log.high_watermark(), Offset(5));
}

#[test]
fn a_smaller_segment_size_takes_effect_at_the_next_append() {
    let s = SimStorage::new(2, FaultConfig::default());
    let big = LogConfig {
        segment_bytes_max: 1 << 20,
        ..small_config()
    };
    let mut log = open(&s, big);
    for _ in 0..20 {
        append(&mut log, 1, 500, 5);
    }
    assert_eq!(log.segment_count(), 1);
    block_on(log.reconfigure(small_config())).unwrap(); // 4096-byte segments
    for _ in 0..20 {
        append(&mut log, 1, 500, 5);
    }
    block_on(log.flush()).unwrap();
    assert!(log.segment_count() > 3);
    assert_eq!(read_all(&mut log, Offset(0)).len(), 40);
    let mut bad = small_config();
    bad.segment_bytes_max = 10;
    assert!(
        block_on(log.reconfigure(bad)).is_err(),
        "out of the engine's bounds"
    );
    assert!(!log.is_failed());
}

#[test]
fn log_append_time_stamps_batches_and_the_time_index() {
    let s = SimStorage::new(3, FaultConfig::default());
    let config = LogConfig {
        log_append_time: true,
        ..small_config()
    };
    let mut log = open(&s, config);
    let b = ValidatedBatch::new(batch(2, 10, 42), 1 << 20).unwrap();
    let info = block_on(log.append(b, TimestampMs(77_000))).unwrap();
    assert_eq!(info.log_append_time, TimestampMs(77_000));
    block_on(log.flush()).unwrap();
    let read = block_on(log.read(Offset(0), 1 << 16)).unwrap();
    let header = RecordBatchHeader::view(&read.chunks[0]).unwrap();
    assert_eq!(header.max_ts(), TimestampMs(77_000));
    assert_eq!(
        header.attrs().timestamp_type(),
        TimestampType::LogAppendTime
    );
    let found = block_on(log.offset_for_timestamp(TimestampMs(50_000))).unwrap();
    assert_eq!(
        found,
        Some((Offset(0), TimestampMs(77_000))),
        "indexed by append time"
    );
}

#[test]
fn a_full_offset_index_rolls_the_segment() {
    let s = SimStorage::new(4, FaultConfig::default());
    let config = LogConfig {
        segment_bytes_max: 1 << 20,
        index_interval_bytes: 1,
        index_bytes_max: 8 * 4,
        ..small_config()
    };
    let mut log = open(&s, config);
    for _ in 0..10 {
        append(&mut log, 1, 10, 5);
    }
    block_on(log.flush()).unwrap();
    assert!(log.segment_count() >= 3, "{} segments", log.segment_count());
    assert_eq!(read_all(&mut log, Offset(0)).len(), 10);
}

#[test]
fn segment_jitter_rolls_early_by_a_stable_amount_below_the_jitter() {
    for base in [0i64, 1, 77, 1_000_000] {
        let j = crate::partition_log::segment_jitter_ms(Offset(base), 1_000);
        assert!(j < 1_000);
        assert_eq!(
            j,
            crate::partition_log::segment_jitter_ms(Offset(base), 1_000)
        );
    }
    assert_eq!(crate::partition_log::segment_jitter_ms(Offset(5), 0), 0);
    let spread: std::collections::BTreeSet<u64> = (0..50)
        .map(|b| crate::partition_log::segment_jitter_ms(Offset(b), 1_000))
        .collect();
    assert!(spread.len() > 30, "bases spread over the jitter");
}
