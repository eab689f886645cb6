//! Compaction tests on the simulated disk with real Kafka v2 batches (one behaviour per test).

use super::*;
use crate::batch::ValidatedBatch;
use crate::config::LogConfig;
use crate::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use crate::io::Storage;
use crate::log_manager::LogManager;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::types::{PartitionIndex, TopicPartitionRef};
use bytes::{Bytes, BytesMut};
use rill_protocol::kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as KpTimestampType,
};
use rill_protocol::record::{retain_records, RecordBatchView};
use rill_types::LeaderEpoch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The Kafka v2 record format, as the server injects it.
pub(crate) struct KafkaCodec;

impl RecordCodec for KafkaCodec {
    fn batch_kind(&self, batch: &[u8]) -> BatchKind {
        let Ok(view) = RecordBatchView::new(batch) else {
            return BatchKind::default();
        };
        let a = view.attributes();
        BatchKind {
            control: a.is_control(),
            transactional: a.is_transactional(),
            delete_horizon: a.has_delete_horizon().then(|| view.base_timestamp()),
        }
    }

    fn for_each_record(
        &self,
        batch: &[u8],
        each: &mut dyn FnMut(RecordInfo<'_>),
    ) -> Result<(), String> {
        rill_protocol::record::for_each_record(batch, DECOMPRESSED_BYTES_MAX, |r| {
            each(RecordInfo {
                offset: r.offset,
                key: r.key,
                tombstone: r.tombstone,
            })
        })
        .map_err(|e| e.to_string())
    }

    fn retain(
        &self,
        batch: &[u8],
        keep: &dyn Fn(Offset) -> bool,
        delete_horizon: Option<TimestampMs>,
    ) -> Result<Vec<u8>, String> {
        retain_records(batch, keep, delete_horizon, DECOMPRESSED_BYTES_MAX)
            .map_err(|e| e.to_string())
    }
}

pub(crate) const CODECS: [KpCompression; 5] = [
    KpCompression::None,
    KpCompression::Gzip,
    KpCompression::Snappy,
    KpCompression::Lz4,
    KpCompression::Zstd,
];

/// One batch of `(key, value)` records (`None` value: tombstone), timestamps `ts`.
pub(crate) fn keyed_batch(
    records: &[(Option<&str>, Option<&str>)],
    ts: i64,
    compression: KpCompression,
    producer: Option<(i64, i16, i32)>,
) -> ValidatedBatch {
    encode_keyed(records, ts, compression, producer, false)
}

/// [`keyed_batch`] of a transactional producer.
fn txn_batch(records: &[(Option<&str>, Option<&str>)], pid: i64, seq: i32) -> ValidatedBatch {
    encode_keyed(
        records,
        1_000,
        KpCompression::None,
        Some((pid, 0, seq)),
        true,
    )
}

fn encode_keyed(
    records: &[(Option<&str>, Option<&str>)],
    ts: i64,
    compression: KpCompression,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
) -> ValidatedBatch {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<KpRecord> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| KpRecord {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: KpTimestampType::Creation,
            offset: i as i64,
            sequence: if pid < 0 { i as i32 } else { seq + i as i32 },
            timestamp: ts,
            key: k.map(|k| Bytes::from(k.to_string())),
            value: v.map(|v| Bytes::from(v.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    ValidatedBatch::new(buf, usize::MAX).expect("a valid batch")
}

/// Every visible record from the log start: (offset, key, value).
pub(crate) type Visible = Vec<(i64, Option<String>, Option<String>)>;

pub(crate) fn visible<S: Storage>(log: &mut PartitionLog<S>) -> Visible {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.high_watermark() {
        let read = block_on(log.read(next, 1 << 16)).unwrap();
        assert!(
            !read.chunks.is_empty(),
            "nothing read at {next} below the high watermark"
        );
        for view in read.chunks.iter().flat_map(batches_of) {
            let last = view.last_offset();
            if view.attributes().is_control() {
                next = last.plus(1); // a transaction marker, not data
                continue;
            }
            let mut bytes = view.clone().into_inner();
            let set =
                rill_protocol::kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes)
                    .expect("a batch the log serves decodes");
            let text =
                |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
            for r in set.records.iter().filter(|r| r.offset >= next.0) {
                out.push((r.offset, text(&r.key), text(&r.value)));
            }
            next = last.plus(1);
        }
    }
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "offsets increase");
    out
}

/// The whole batches of a chunk the log served.
pub(crate) fn batches_of(chunk: &Bytes) -> Vec<RecordBatchView<Bytes>> {
    rill_protocol::record::batches(chunk.clone())
        .map(Result::unwrap)
        .collect()
}

/// The first batch of a read.
fn first_batch(read: &crate::partition_log::ReadBatches) -> RecordBatchView<Bytes> {
    batches_of(&read.chunks[0]).remove(0)
}

pub(crate) fn config() -> LogConfig {
    LogConfig {
        segment_bytes_max: 4096,
        index_interval_bytes: 256,
        batch_cache_bytes_max: 0,
        retention_ms: None,
        ..LogConfig::default()
    }
}

pub(crate) fn open_log(
    s: &SimStorage,
    config: LogConfig,
    clock: &Rc<ManualClock>,
) -> PartitionLog<SimStorage> {
    let manager = LogManager::new(s.clone(), PathBuf::from("/data"));
    block_on(manager.open_partition(
        TopicPartitionRef::new("t", PartitionIndex(0)),
        config,
        clock.clone(),
    ))
    .unwrap()
}

fn dir() -> &'static Path {
    Path::new("/data/t-0")
}

fn append(log: &mut PartitionLog<SimStorage>, records: &[(Option<&str>, Option<&str>)], ts: i64) {
    block_on(log.append(
        keyed_batch(records, ts, KpCompression::None, None),
        TimestampMs(ts),
    ))
    .unwrap();
    block_on(log.flush()).unwrap();
}

fn put(key: &str, value: &str) -> (Option<&'static str>, Option<&'static str>) {
    let leak = |s: &str| &*Box::leak(s.to_string().into_boxed_str());
    (Some(leak(key)), Some(leak(value)))
}

fn delete(key: &str) -> (Option<&'static str>, Option<&'static str>) {
    (Some(&*Box::leak(key.to_string().into_boxed_str())), None)
}

/// Seals the active segment: what was appended becomes cleanable.
fn roll(log: &mut PartitionLog<SimStorage>) {
    block_on(log.roll()).unwrap();
}

/// Runs a whole clean with no pacing and 1 MiB of offset map.
fn clean(
    log: &mut PartitionLog<SimStorage>,
    cfg: &CompactionConfig,
    now: i64,
) -> Option<CleanStats> {
    block_on(clean_now(
        log,
        cfg,
        &KafkaCodec,
        &Unpaced,
        1 << 20,
        TimestampMs(now),
    ))
    .unwrap()
}

/// The latest (offset, value) per key, as a model.
fn latest(records: &Visible) -> BTreeMap<String, (i64, Option<String>)> {
    let mut out = BTreeMap::new();
    for (offset, key, value) in records {
        out.insert(key.clone().unwrap(), (*offset, value.clone()));
    }
    out
}

/// 40 keys updated 10 times each, one record per batch: 400 offsets over many segments.
fn fill_updates(log: &mut PartitionLog<SimStorage>) {
    for round in 0..10 {
        for k in 0..40 {
            append(
                log,
                &[put(&format!("k{k}"), &format!("v{round}"))],
                1_000 + round,
            );
        }
    }
}

#[test]
fn keeps_the_latest_value_of_each_key_at_its_offset() {
    let s = SimStorage::new(1, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log);
    roll(&mut log);
    let before = visible(&mut log);
    let segments_before = log.segment_count();
    let stats = clean(&mut log, &CompactionConfig::default(), 10_000).expect("a clean was due");
    let after = visible(&mut log);
    assert_eq!(latest(&after), latest(&before), "latest values unchanged");
    for (offset, key, value) in &after {
        let (latest_offset, _) = latest(&before)[key.as_ref().unwrap()];
        assert_eq!(*offset, latest_offset, "superseded record {offset} kept");
        assert!(
            before.contains(&(*offset, key.clone(), value.clone())),
            "record changed"
        );
    }
    assert_eq!(after.len(), 40);
    assert_eq!((stats.records_read, stats.records_kept), (400, 40));
    assert_eq!(
        log.segment_count(),
        segments_before,
        "grouped by their sizes before cleaning"
    );
    assert_eq!(log.log_end_offset(), Offset(400), "the log end never moves");
}

#[test]
fn small_cleaned_segments_merge_on_the_next_clean() {
    let s = SimStorage::new(16, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log);
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    let after_first = log.segment_count();
    append(&mut log, &[put("k0", "again")], 2_000);
    roll(&mut log);
    let any_ratio = CompactionConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionConfig::default()
    };
    clean(&mut log, &any_ratio, 10_000).unwrap();
    assert_eq!(
        log.segment_count(),
        2,
        "one cleaned segment and the active one (was {after_first})"
    );
    assert_eq!(visible(&mut log).len(), 40);
}

#[test]
fn records_superseded_only_by_the_active_segment_stay() {
    let s = SimStorage::new(15, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    append(&mut log, &[put("a", "old")], 1_000);
    append(&mut log, &[put("b", "old")], 1_000);
    roll(&mut log);
    append(&mut log, &[put("a", "new")], 1_000);
    clean(&mut log, &CompactionConfig::default(), 10_000);
    let all = visible(&mut log);
    assert_eq!(
        all.len(),
        3,
        "the active segment is not cleanable, nor what it supersedes"
    );
}

#[test]
fn a_reopened_log_reads_its_cleaned_segments() {
    let s = SimStorage::new(2, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log);
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    let after = visible(&mut log);
    assert_eq!(after.len(), 40);
    block_on(log.close()).unwrap();
    let mut log = open_log(&s, config(), &clock);
    assert_eq!(visible(&mut log), after);
    // And with every index file gone: rebuilt from the cleaned logs, gaps and all.
    block_on(log.close()).unwrap();
    for name in block_on(s.list_dir(dir())).unwrap() {
        if name.ends_with(".index") || name.ends_with(".timeindex") {
            block_on(s.remove_file(&dir().join(name))).unwrap();
        }
    }
    let mut log = open_log(&s, config(), &clock);
    assert_eq!(visible(&mut log), after);
}

#[test]
fn every_codec_is_cleaned_and_keeps_its_codec() {
    for codec in CODECS {
        let s = SimStorage::new(3, FaultConfig::default());
        let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
        let mut log = open_log(&s, config(), &clock);
        for round in 0..30 {
            let batch = keyed_batch(
                &[
                    put("a", &format!("a{round}")),
                    put(&format!("b{round}"), "b"),
                ],
                1_000,
                codec,
                None,
            );
            block_on(log.append(batch, TimestampMs(1_000))).unwrap();
            block_on(log.flush()).unwrap();
        }
        roll(&mut log);
        let before = visible(&mut log);
        clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
        let after = visible(&mut log);
        assert_eq!(latest(&after), latest(&before), "{codec:?}");
        assert_eq!(after.len(), 31, "{codec:?}: a once, every b");
        let read = block_on(log.read(Offset(0), 1)).unwrap();
        let view = first_batch(&read);
        assert_eq!(view.attributes().compression().unwrap() as u8, codec as u8);
    }
}

#[test]
fn tombstones_stay_for_delete_retention_then_go_with_their_key() {
    let s = SimStorage::new(4, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log);
    for k in 0..10 {
        append(&mut log, &[delete(&format!("k{k}"))], 2_000);
    }
    roll(&mut log);
    let cfg = CompactionConfig {
        delete_retention_ms: 5_000,
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionConfig::default()
    };
    clean(&mut log, &cfg, 10_000).unwrap();
    let after_first = visible(&mut log);
    for k in 0..10 {
        let key = Some(format!("k{k}"));
        let of_key: Vec<_> = after_first.iter().filter(|r| r.1 == key).collect();
        assert_eq!(of_key.len(), 1, "only the tombstone of k{k} stays");
        assert_eq!(of_key[0].2, None);
    }
    append(&mut log, &[put("fresh", "x")], 2_000);
    roll(&mut log);
    clean(&mut log, &cfg, 14_999).unwrap();
    let still = visible(&mut log);
    assert!(
        still.iter().any(|r| r.1.as_deref() == Some("k0")),
        "horizon not passed yet"
    );
    append(&mut log, &[put("fresh2", "x")], 2_000);
    roll(&mut log);
    clean(&mut log, &cfg, 15_000).unwrap();
    let gone = visible(&mut log);
    for k in 0..10 {
        assert!(
            !gone.iter().any(|r| r.1 == Some(format!("k{k}"))),
            "k{k} resurrected or kept"
        );
    }
    assert_eq!(gone.len(), 30 + 2, "k10..k39, fresh, fresh2");
}

/// Appends 500-byte values under the key `pad` until the active segment rolls.
fn fill_padding(log: &mut PartitionLog<SimStorage>, ts: i64) {
    let base = log.segments.last().unwrap().base;
    while log.segments.last().unwrap().base == base {
        append(log, &[put("pad", &"p".repeat(500))], ts);
    }
}

#[test]
fn tombstones_leave_a_quiet_log_once_their_horizon_passes() {
    let s = SimStorage::new(17, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    append(&mut log, &[put("a", "1"), put("b", "1")], 1_000);
    append(&mut log, &[delete("a")], 1_000);
    roll(&mut log);
    let cfg = CompactionConfig {
        delete_retention_ms: 100,
        ..CompactionConfig::default()
    };
    clean(&mut log, &cfg, 10_000).unwrap();
    assert_eq!(visible(&mut log).len(), 2, "b and the tombstone of a");
    assert!(
        clean(&mut log, &cfg, 10_099).is_none(),
        "nothing dirty, horizon not passed"
    );
    let stats = clean(&mut log, &cfg, 10_100).expect("the horizon makes a clean due");
    assert_eq!(stats.tombstones_kept, 0);
    assert_eq!(
        visible(&mut log),
        vec![(1, Some("b".into()), Some("1".into()))]
    );
    assert!(
        clean(&mut log, &cfg, 99_999).is_none(),
        "no tombstone left to wait for"
    );
}

#[test]
fn below_the_dirty_ratio_nothing_is_cleaned() {
    let s = SimStorage::new(5, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    for k in 0..400 {
        append(&mut log, &[put(&format!("unique{k}"), "v")], 1_000);
    }
    roll(&mut log);
    let cfg = CompactionConfig::default();
    assert!(clean(&mut log, &cfg, 10_000).is_some());
    assert!(clean(&mut log, &cfg, 10_000).is_none(), "all clean now");
    append(&mut log, &[put("unique1", "new")], 3_000);
    roll(&mut log);
    let ratio = CompactionConfig {
        min_cleanable_dirty_ratio: 0.5,
        ..cfg.clone()
    };
    assert!(
        clean(&mut log, &ratio, 10_000).is_none(),
        "one small dirty segment of several"
    );
    let lag = CompactionConfig {
        max_compaction_lag_ms: Some(5_000),
        ..ratio
    };
    assert!(clean(&mut log, &lag, 8_000).is_none(), "not yet overdue");
    assert!(
        clean(&mut log, &lag, 8_001).is_some(),
        "max.compaction.lag.ms forces it"
    );
}

#[test]
fn min_compaction_lag_keeps_young_segments_dirty() {
    let s = SimStorage::new(6, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log); // timestamps 1000..1009
    roll(&mut log);
    let cfg = CompactionConfig {
        min_compaction_lag_ms: 100_000,
        ..CompactionConfig::default()
    };
    assert!(
        clean(&mut log, &cfg, 50_000).is_none(),
        "every segment younger than the lag"
    );
    let before = visible(&mut log);
    assert!(
        clean(&mut log, &cfg, 101_005).is_some(),
        "the older segments are cleanable"
    );
    let after = visible(&mut log);
    assert!(after.len() < before.len());
    assert!(after.len() > 40, "records of the young segments stay");
}

#[test]
fn a_fully_removed_tail_leaves_an_empty_batch_consumers_step_over() {
    let s = SimStorage::new(7, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    append(&mut log, &[put("a", "1")], 1_000);
    append(&mut log, &[(None, Some("no key"))], 1_000); // invalid in a compacted log: removed
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    let read = block_on(log.read(Offset(1), 1 << 16)).unwrap();
    let view = first_batch(&read);
    assert_eq!(
        view.base_offset(),
        Offset(1),
        "the range's last batch stays"
    );
    assert_eq!(view.record_count(), 0, "as a bare header");
    assert_eq!(
        visible(&mut log),
        vec![(0, Some("a".into()), Some("1".into()))]
    );
    // With a record after it, a read at the empty batch also returns that record's batch.
    append(&mut log, &[put("b", "2")], 1_000);
    let read = block_on(log.read(Offset(1), 1)).unwrap();
    assert_eq!(
        read.chunks.len(),
        2,
        "an answer never holds only empty batches"
    );
}

#[test]
fn a_read_inside_a_gap_returns_the_next_batches() {
    let s = SimStorage::new(8, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    for i in 0..20 {
        append(
            &mut log,
            &[put("hot", &format!("{i}")), put(&format!("cold{i}"), "c")],
            1_000,
        );
        if i % 7 == 6 {
            roll(&mut log);
        }
    }
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    let all = visible(&mut log);
    assert_eq!(all.len(), 21);
    for offset in 0..40 {
        let read = block_on(log.read(Offset(offset), 1)).unwrap();
        let view = first_batch(&read);
        assert!(view.last_offset() >= Offset(offset), "read at {offset}");
        let next = all.iter().find(|r| r.0 >= offset).unwrap().0;
        assert!(
            view.base_offset() <= Offset(next),
            "read at {offset} skipped {next}"
        );
    }
}

#[test]
fn a_small_offset_map_cleans_in_several_passes() {
    let s = SimStorage::new(9, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    for round in 0..3 {
        for k in 0..200 {
            append(
                &mut log,
                &[put(&format!("k{k}"), &format!("v{round}"))],
                1_000,
            );
        }
    }
    roll(&mut log);
    let before = visible(&mut log);
    let cfg = CompactionConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionConfig::default()
    };
    let mut job = block_on(log.plan_clean(&cfg, TimestampMs(10_000)))
        .unwrap()
        .unwrap();
    // 100 slots: 90 keys, far fewer than the 200 keys (600 records) of the dirty section.
    block_on(job.build_offset_map(&KafkaCodec, &Unpaced, 100 * offset_map::SLOT_BYTES)).unwrap();
    assert!(
        job.checkpoint().first_dirty < job.cleanable().first_uncleanable,
        "map filled early"
    );
    for g in 0..job.group_count() {
        let group = block_on(job.clean_group(g, &KafkaCodec, &Unpaced)).unwrap();
        assert!(block_on(log.install_cleaned(&group)).unwrap());
    }
    block_on(log.finish_clean(job.checkpoint())).unwrap();
    for _ in 0..10 {
        clean(&mut log, &cfg, 10_000);
    }
    let after = visible(&mut log);
    assert_eq!(latest(&after), latest(&before));
    assert_eq!(after.len(), 200);
}

#[test]
fn a_group_gone_by_install_time_is_discarded() {
    let s = SimStorage::new(10, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log);
    roll(&mut log);
    let cfg = CompactionConfig::default();
    let mut job = block_on(log.plan_clean(&cfg, TimestampMs(10_000)))
        .unwrap()
        .unwrap();
    block_on(job.build_offset_map(&KafkaCodec, &Unpaced, 1 << 20)).unwrap();
    let group = block_on(job.clean_group(0, &KafkaCodec, &Unpaced)).unwrap();
    let second = log.segments[1].base;
    block_on(log.delete_records_before(second)).unwrap();
    let before = visible(&mut log);
    assert!(!block_on(log.install_cleaned(&group)).unwrap());
    assert_eq!(visible(&mut log), before);
    let names = block_on(s.list_dir(dir())).unwrap();
    assert!(!names.iter().any(|n| n.ends_with(".cleaned")), "{names:?}");
}

#[test]
fn the_last_batch_of_a_tracked_producer_keeps_its_header() {
    let s = SimStorage::new(11, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    let producer = Some((42, 0, 0));
    let b = keyed_batch(&[put("p", "1")], 1_000, KpCompression::None, producer);
    block_on(log.append(b, TimestampMs(1_000))).unwrap();
    block_on(log.flush()).unwrap();
    append(&mut log, &[put("p", "2")], 1_000); // supersedes the producer's record
    append(&mut log, &[put("q", "1")], 1_000);
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    let read = block_on(log.read(Offset(0), 1)).unwrap();
    let view = first_batch(&read);
    assert_eq!(
        (
            view.base_offset(),
            view.record_count(),
            view.producer_id().0
        ),
        (Offset(0), 0, 42)
    );
    // A retry of that batch is still recognised as a duplicate.
    let retry = keyed_batch(&[put("p", "1")], 1_000, KpCompression::None, producer);
    let err = block_on(log.append(retry, TimestampMs(1_000))).unwrap_err();
    assert!(
        matches!(err, EngineError::DuplicateSequence { .. }),
        "{err}"
    );
}

#[test]
fn timestamp_lookups_work_on_cleaned_segments() {
    let s = SimStorage::new(12, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log); // round r has timestamp 1000 + r
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    let found = block_on(log.offset_for_timestamp(TimestampMs(1_009))).unwrap();
    let (offset, ts) = found.expect("the last round survives");
    assert_eq!(ts, TimestampMs(1_009));
    assert!(offset.0 >= 360);
}

#[test]
fn a_segment_whose_records_all_go_keeps_one_header_and_reopens() {
    let s = SimStorage::new(13, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_padding(&mut log, 1_000);
    fill_padding(&mut log, 1_000); // two full segments: too big to merge into one group
    append(&mut log, &[put("pad", "last")], 9_000); // younger: outlives retention
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    let header = crate::batch::HEADER_BYTES as u64;
    assert_eq!(
        log.segments[0].size_bytes, header,
        "only its last batch's header"
    );
    block_on(log.close()).unwrap();
    let mut with_retention = config();
    with_retention.retention_ms = Some(5_000);
    let mut log = open_log(&s, with_retention, &clock);
    let all = visible(&mut log);
    assert_eq!(
        all,
        vec![(all[0].0, Some("pad".into()), Some("last".into()))]
    );
    block_on(log.apply_retention(TimestampMs(10_000))).unwrap();
    let start = log.log_start_offset();
    assert!(
        start > Offset(0) && start <= Offset(all[0].0),
        "old headers expire like data"
    );
    assert_eq!(visible(&mut log), all);
}

#[test]
fn leftovers_of_an_uncommitted_swap_are_undone_on_open() {
    let s = SimStorage::new(14, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log);
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap(); // small cleaned segments
    fill_updates(&mut log);
    roll(&mut log);
    let before = visible(&mut log);
    let mut job = block_on(log.plan_clean(&CompactionConfig::default(), TimestampMs(10_000)))
        .unwrap()
        .unwrap();
    block_on(job.build_offset_map(&KafkaCodec, &Unpaced, 1 << 20)).unwrap();
    let group = block_on(job.clean_group(0, &KafkaCodec, &Unpaced)).unwrap();
    assert!(group.members.len() > 1);
    drop(log);
    // Step 1 done for one member, then a crash.
    let member = group.members[1].0;
    let log_name = dir().join(segment_file_name(member, FileKind::Log));
    let moved = dir().join(format!(
        "{}.deleted",
        segment_file_name(member, FileKind::Log)
    ));
    block_on(s.rename(&log_name, &moved)).unwrap();
    s.crash();
    let mut log = open_log(&s, config(), &clock);
    assert_eq!(visible(&mut log), before);
    let names = block_on(s.list_dir(dir())).unwrap();
    assert!(
        !names
            .iter()
            .any(|n| n.contains(".cleaned") || n.contains(".deleted")),
        "{names:?}"
    );
}

#[test]
fn aborted_transactions_go_and_markers_and_their_index_stay() {
    use crate::control::TxnMarker;
    use rill_types::{ProducerEpoch, ProducerId};
    let s = SimStorage::new(18, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    let end_txn = |log: &mut PartitionLog<SimStorage>, pid, commit| {
        let marker = TxnMarker {
            producer_id: ProducerId(pid),
            producer_epoch: ProducerEpoch(0),
            commit,
            coordinator_epoch: 0,
        };
        block_on(log.append_marker(&marker, TimestampMs(1_000))).unwrap();
        block_on(log.flush()).unwrap();
    };
    let txn = |log: &mut PartitionLog<SimStorage>, b| {
        block_on(log.append(b, TimestampMs(1_000))).unwrap();
        block_on(log.flush()).unwrap();
    };
    txn(
        &mut log,
        txn_batch(&[put("a", "aborted"), put("b", "aborted")], 7, 0),
    ); // 0-1
    txn(&mut log, txn_batch(&[put("c", "committed")], 8, 0)); // 2
    end_txn(&mut log, 7, false); // 3
    end_txn(&mut log, 8, true); // 4
    append(&mut log, &[put("d", "plain")], 1_000); // 5
    roll(&mut log);
    let aborted_before = block_on(log.aborted_transactions(Offset(0), Offset(6))).unwrap();
    assert_eq!(aborted_before.len(), 1);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    assert_eq!(
        visible(&mut log),
        vec![
            (2, Some("c".into()), Some("committed".into())),
            (5, Some("d".into()), Some("plain".into()))
        ]
    );
    let markers = block_on(log.read(Offset(3), 1 << 16)).unwrap();
    let first = first_batch(&markers);
    assert!(first.attributes().is_control(), "the markers stay");
    assert_eq!(
        block_on(log.aborted_transactions(Offset(0), Offset(6))).unwrap(),
        aborted_before,
        "the merged .txnindex keeps the abort"
    );
    block_on(log.close()).unwrap();
    let mut log = open_log(&s, config(), &clock);
    assert_eq!(
        block_on(log.aborted_transactions(Offset(0), Offset(6))).unwrap(),
        aborted_before
    );
    assert_eq!(visible(&mut log).len(), 2);
}

#[test]
fn a_clean_stops_at_an_open_transaction() {
    let s = SimStorage::new(19, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    append(&mut log, &[put("a", "1")], 1_000); // 0
    roll(&mut log);
    block_on(log.append(txn_batch(&[put("a", "open")], 7, 0), TimestampMs(1_000))).unwrap(); // 1
    block_on(log.flush()).unwrap();
    append(&mut log, &[put("a", "2")], 1_000); // 2
    roll(&mut log);
    assert_eq!(log.last_stable_offset(), Offset(1));
    clean(&mut log, &CompactionConfig::default(), 10_000);
    let all = visible(&mut log);
    assert_eq!(
        all.len(),
        3,
        "nothing at or past the open transaction is cleaned: {all:?}"
    );
}

#[test]
fn rill_check_finds_nothing_wrong_in_a_compacted_partition() {
    let s = SimStorage::new(20, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut log = open_log(&s, config(), &clock);
    fill_updates(&mut log);
    append(&mut log, &[(None, Some("no key"))], 1_000);
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    fill_updates(&mut log);
    roll(&mut log);
    clean(&mut log, &CompactionConfig::default(), 10_000).unwrap();
    block_on(log.close()).unwrap();
    let report = block_on(crate::verify::verify_partition(&s, dir())).unwrap();
    assert!(!report.is_damaged(), "{:?}", report.findings);
}

/// A follower copies a compacted leader's log, gaps and all (issue 32): compaction removes
/// whole batches in the middle of a segment, and a lagging or new replica fetching from its log
/// end gets the next batch the leader kept. Kafka's followers accept those gaps; refusing them
/// stalled the replica for good. The copy reads the same, also after a crash of the follower.
#[test]
fn a_follower_copies_a_compacted_log_with_its_offset_gaps() {
    let s = SimStorage::new(3, FaultConfig::default());
    let clock = Rc::new(ManualClock::new(TimestampMs(10_000)));
    let mut leader = open_log(&s, config(), &clock);
    leader.lead(LeaderEpoch(1), Offset(0));
    // Odd keys written once, even keys nine times more: what is kept is scattered, with gaps
    // between single batches and a long one before the even keys' last round.
    for round in 0..10 {
        for k in (0..40).filter(|k| round == 0 || k % 2 == 0) {
            append(
                &mut leader,
                &[put(&format!("k{k}"), &format!("v{round}"))],
                1_000 + round,
            );
        }
    }
    roll(&mut leader);
    leader.set_high_watermark(leader.log_end_offset());
    clean(&mut leader, &CompactionConfig::default(), 10_000).expect("a clean was due");
    let kept = visible(&mut leader);
    assert_eq!(kept.len(), 40);
    assert!(
        kept.windows(2).any(|w| w[1].0 > w[0].0 + 1),
        "the clean left gaps"
    );

    let f = SimStorage::new(4, FaultConfig::default());
    let mut follower = open_log(&f, config(), &clock);
    follower.follow(Offset(0));
    while follower.log_end_offset() < leader.log_end_offset() {
        let from = follower.log_end_offset();
        let read = block_on(leader.read_for_replica(from, 1 << 12)).unwrap();
        assert!(
            !read.chunks.is_empty(),
            "the leader has nothing at or past {from}"
        );
        for view in read.chunks.iter().flat_map(batches_of) {
            // Cleaned batches hold fewer records than offsets, some none (a header kept).
            let batch = ValidatedBatch::from_leader(BytesMut::from(view.as_bytes())).unwrap();
            block_on(follower.append_replica(batch, TimestampMs(10_000))).unwrap();
        }
        block_on(follower.flush()).unwrap();
    }
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    follower.set_high_watermark(leader.high_watermark());
    assert_eq!(visible(&mut follower), kept);
    // A batch below the log end is still refused: offsets only grow.
    let again = batches_of(
        &block_on(leader.read_for_replica(Offset(0), 1))
            .unwrap()
            .chunks[0],
    );
    let old = ValidatedBatch::from_leader(BytesMut::from(again[0].as_bytes())).unwrap();
    let refused = block_on(follower.append_replica(old, TimestampMs(10_000)));
    assert!(
        matches!(refused, Err(EngineError::InvalidRecord(_))),
        "{refused:?}"
    );

    f.crash();
    let mut follower = open_log(&f, config(), &clock);
    follower.follow(Offset(0));
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    follower.set_high_watermark(leader.high_watermark());
    assert_eq!(
        visible(&mut follower),
        kept,
        "recovery reads the gaps as segment ends"
    );
}
