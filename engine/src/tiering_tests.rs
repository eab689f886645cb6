//! The tiered-storage gate on local retention, copyable segments and side files.

use crate::config::LogConfig;
use crate::io::sim::{block_on, FaultConfig, SimStorage};
use crate::log_tests::{append, open, small_config};
use crate::types::{Offset, TimestampMs};

#[test]
fn local_retention_deletes_only_what_the_remote_tier_holds() {
    let s = SimStorage::new(7, FaultConfig::default());
    let config = LogConfig {
        retention_ms: Some(1000),
        ..small_config()
    };
    let mut log = open(&s, config);
    for i in 0..40 {
        append(&mut log, 1, 500, 10_000 + i);
    }
    block_on(log.flush()).unwrap();
    let copyable = log.copyable_segments();
    assert!(copyable.len() >= 3, "small segments rolled: {copyable:?}");
    assert_eq!(copyable[0].base, Offset(0));
    for pair in copyable.windows(2) {
        assert_eq!(pair[0].next_offset, pair[1].base, "contiguous");
    }
    // Nothing copied yet: nothing is deleted, however old.
    log.set_remote_copied_until(Some(Offset(0)));
    block_on(log.apply_retention(TimestampMs(1_000_000))).unwrap();
    assert_eq!(log.log_start_offset(), Offset(0));
    // The first two copied: exactly those go.
    let copied = copyable[1].next_offset;
    log.set_remote_copied_until(Some(copied));
    block_on(log.apply_retention(TimestampMs(1_000_000))).unwrap();
    assert_eq!(log.log_start_offset(), copied);
    assert_eq!(log.copyable_segments()[0].base, copied);
    // Without the gate, retention takes every expired sealed segment.
    log.set_remote_copied_until(None);
    block_on(log.apply_retention(TimestampMs(1_000_000))).unwrap();
    assert_eq!(log.segment_count(), 1);
}

#[test]
fn side_files_are_replaced_whole_and_survive_a_reopen() {
    let s = SimStorage::new(8, FaultConfig::default());
    let log = open(&s, small_config());
    assert_eq!(
        block_on(log.read_side_file("remote-log-metadata")).unwrap(),
        None
    );
    block_on(log.write_side_file("remote-log-metadata", b"first")).unwrap();
    block_on(log.write_side_file("remote-log-metadata", b"second")).unwrap();
    block_on(log.close()).unwrap();
    let log = open(&s, small_config());
    let read = block_on(log.read_side_file("remote-log-metadata")).unwrap();
    assert_eq!(read.as_deref(), Some(&b"second"[..]));
}
