//! Real-disk tests: the partition log through glommio (io_uring + O_DIRECT) on a temp dir under
//! the target directory (a real ext4 block device, not tmpfs).

use bytes::BytesMut;
use glommio::{LocalExecutorBuilder, Placement};
use rill_engine::batch::{build_test_batch, validate_prefix, validated};
use rill_engine::io::glommio::GlommioStorage;
use rill_engine::io::SystemClock;
use rill_engine::{LogConfig, LogManager, Offset, PartitionLog, TimestampMs};
use rill_engine::{PartitionIndex, TopicPartitionRef};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Runs `f` on a glommio executor with a small registered io_memory (RLIMIT_MEMLOCK is 8 MiB).
fn run<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let handle = LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(f)
        .unwrap();
    handle.join().unwrap();
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

async fn open(data: &Path, config: LogConfig) -> PartitionLog<GlommioStorage> {
    let manager = LogManager::new(GlommioStorage::new(), data.to_path_buf());
    manager
        .open_partition(
            TopicPartitionRef::new("disk", PartitionIndex(0)),
            config,
            Rc::new(SystemClock),
        )
        .await
        .unwrap()
}

fn batch(i: usize) -> BytesMut {
    let payload = [10, 100, 1000, 5000, 70_000][i % 5];
    BytesMut::from(
        &build_test_batch(
            1 + (i % 3) as i32,
            payload,
            TimestampMs(1_000 + i as i64),
            None,
        )[..],
    )
}

/// Reads every batch from offset 0 and returns their (base, size) pairs.
async fn read_all(log: &mut PartitionLog<GlommioStorage>) -> Vec<(Offset, usize)> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.high_watermark() {
        let read = log.read(next, 200_000).await.unwrap();
        assert!(!read.chunks.is_empty());
        // A chunk holds whole batches back to back (one, or a run of a cached extent).
        for chunk in read.chunks {
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                let meta = validate_prefix(rest).expect("CRC verifies after the disk round trip");
                out.push((meta.base_offset, meta.total_bytes));
                next = meta.last_offset.plus(1);
                rest = &rest[meta.total_bytes..];
            }
        }
    }
    out
}

/// Walks a `.log` file with std::fs, as an outside tool would: whole batches, nothing else.
fn whole_batches_in(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let (mut pos, mut count) = (0, 0);
    while pos < bytes.len() {
        pos += validate_prefix(&bytes[pos..])
            .expect("only whole valid batches")
            .total_bytes;
        count += 1;
    }
    assert_eq!(pos, bytes.len());
    count
}

fn segment_logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

#[test]
fn append_flush_read_close_reopen_on_disk() {
    let dir = temp_dir();
    let data = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            batch_cache_bytes_max: 0,
            segment_bytes_max: 256 << 10,
            ..LogConfig::default()
        };
        let mut log = open(&data, config.clone()).await;
        for i in 0..60 {
            log.append(validated(&batch(i)), TimestampMs(1))
                .await
                .unwrap();
            if i % 7 == 0 {
                log.flush().await.unwrap();
            }
        }
        assert_eq!(log.flush().await.unwrap(), log.log_end_offset());
        let before = read_all(&mut log).await;
        assert_eq!(before.len(), 60);
        assert!(log.segment_count() > 1);
        let found = log.offset_for_timestamp(TimestampMs(1_030)).await.unwrap();
        assert_eq!(found.map(|(_, ts)| ts), Some(TimestampMs(1_030)));
        log.close().await.unwrap();
        let logs = segment_logs(&data.join("disk-0"));
        let batches: usize = logs.iter().map(|p| whole_batches_in(p)).sum();
        assert_eq!(
            batches, 60,
            "closed .log files are exactly their whole batches"
        );
        let mut log = open(&data, config).await;
        assert_eq!(read_all(&mut log).await, before);
        log.close().await.unwrap();
    });
}

#[test]
fn unclean_shutdown_keeps_every_flushed_batch() {
    const BATCHES: usize = 200; // ~3 MB at once: fast enough that the file is preallocated
    let dir = temp_dir();
    let data = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            batch_cache_bytes_max: 0,
            ..LogConfig::default()
        };
        let mut log = open(&data, config.clone()).await;
        let mut data_bytes = 0;
        for i in 0..BATCHES {
            let b = batch(i);
            data_bytes += b.len() as u64;
            log.append(validated(&b), TimestampMs(1)).await.unwrap();
        }
        let durable = log.flush().await.unwrap();
        log.append(validated(&batch(98)), TimestampMs(1))
            .await
            .unwrap();
        drop(log); // no close: preallocated file, no index files, an unflushed batch in memory
        let logs = segment_logs(&data.join("disk-0"));
        let file_bytes = std::fs::metadata(&logs[0]).unwrap().len();
        assert!(
            file_bytes >= data_bytes + (64 << 10),
            "preallocated ahead: {file_bytes} bytes for {data_bytes} of batches"
        );
        let mut log = open(&data, config).await;
        assert_eq!(
            log.log_end_offset(),
            durable,
            "recovered exactly the flushed batches"
        );
        assert_eq!(read_all(&mut log).await.len(), BATCHES);
        log.append(validated(&batch(1)), TimestampMs(1))
            .await
            .unwrap();
        log.close().await.unwrap();
        assert_eq!(whole_batches_in(&logs[0]), BATCHES + 1);
    });
}

#[test]
fn tail_reads_come_from_cache_and_cold_reads_from_disk_agree() {
    let dir = temp_dir();
    let data = dir.path().to_path_buf();
    run(move || async move {
        let mut log = open(&data, LogConfig::default()).await;
        for i in 0..40 {
            log.append(validated(&batch(i)), TimestampMs(1))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        let hot = log.read(Offset(0), usize::MAX).await.unwrap();
        log.close().await.unwrap();
        let mut log = open(&data, LogConfig::default()).await;
        let cold = log.read(Offset(0), usize::MAX).await.unwrap();
        assert_eq!(hot.chunks.concat(), cold.chunks.concat());
        log.close().await.unwrap();
    });
}

#[test]
fn background_writes_are_read_back_before_and_after_reopen() {
    let dir = temp_dir();
    let data = dir.path().to_path_buf();
    run(move || async move {
        // No cache and high watermark = log end: reads of unflushed bytes go to the file while
        // full-block writes of several MiB are in flight in the background.
        let config = LogConfig {
            batch_cache_bytes_max: 0,
            flush: rill_engine::FlushPolicy::Interval {
                messages: None,
                ms: None,
            },
            ..LogConfig::default()
        };
        let mut log = open(&data, config.clone()).await;
        for i in 0..250 {
            log.append(validated(&batch(i)), TimestampMs(1))
                .await
                .unwrap();
            if i % 60 == 59 {
                assert_eq!(read_all(&mut log).await.len(), i + 1);
            }
        }
        let before = read_all(&mut log).await;
        log.close().await.unwrap();
        let logs = segment_logs(&data.join("disk-0"));
        assert!(std::fs::metadata(&logs[0]).unwrap().len() > 3 << 20);
        assert_eq!(whole_batches_in(&logs[0]), 250);
        let mut log = open(&data, config).await;
        assert_eq!(read_all(&mut log).await, before);
        log.close().await.unwrap();
    });
}

#[test]
fn owned_reads_larger_than_a_piece_come_back_whole_and_stop_at_the_end() {
    use rill_engine::io::{BlockFile, OpenMode, Storage};
    let dir = temp_dir();
    let path = dir.path().join("pieces");
    run(move || async move {
        let storage = GlommioStorage::new();
        let file = storage
            .open(&path, OpenMode::CreateReadWrite)
            .await
            .unwrap();
        // 1 MiB + 8 KiB of a pattern that differs at every 4-byte step, then cut unaligned.
        let bytes: Vec<u8> = (0..(1u32 << 20) + 8192)
            .flat_map(|i| (i / 4 * 7 + i % 4).to_le_bytes().into_iter().take(1))
            .collect();
        file.write_at(0, &bytes).await.unwrap();
        let size = (1 << 20) + 5000;
        file.truncate(size as u64).await.unwrap();
        for (pos, len) in [
            (0, size),
            (0, 700_001),
            (4096, 300 << 10),
            (512 << 10, 1 << 20), // past the end: short
            (1 << 20, 4096),
        ] {
            let got = file.read_owned(pos as u64, len).await.unwrap();
            let end = (pos + len).min(size);
            assert_eq!(got.len(), end - pos, "read of {len} at {pos}");
            assert!(got[..] == bytes[pos..end], "bytes of {len} at {pos}");
        }
        file.close().await.unwrap();
    });
}

/// The offset after the last batch a read returned.
fn end_of(read: &rill_engine::ReadBatches) -> Offset {
    let mut rest = &read.chunks.last().expect("a read returned batches")[..];
    let mut end = None;
    while let Ok(meta) = validate_prefix(rest) {
        end = Some(meta.last_offset.plus(1));
        rest = &rest[meta.total_bytes..];
    }
    end.expect("whole batches")
}

#[test]
fn read_ahead_loads_finish_without_a_reader_awaiting_them() {
    let dir = temp_dir();
    let data = dir.path().to_path_buf();
    run(move || async move {
        let config = LogConfig {
            batch_cache_bytes_max: 0,
            ..LogConfig::default()
        };
        let mut log = open(&data, config.clone()).await;
        for i in 0..300 {
            log.append(validated(&batch(i)), TimestampMs(1))
                .await
                .unwrap();
        }
        log.flush().await.unwrap();
        log.close().await.unwrap();
        let manager = LogManager::new(GlommioStorage::new(), data.clone());
        let cache = manager.read_cache().clone();
        let mut log = manager
            .open_partition(
                TopicPartitionRef::new("disk", PartitionIndex(0)),
                config,
                Rc::new(SystemClock),
            )
            .await
            .unwrap();
        // Two sequential reads: the second one tops the read-ahead window up.
        let next = end_of(&log.read(Offset(0), 200_000).await.unwrap());
        log.read(next, 200_000).await.unwrap();
        assert!(cache.stats().loads >= 2, "{:?}", cache.stats());
        // Nobody awaits the loads now; they finish on their own as their reads complete.
        glommio::timer::sleep(std::time::Duration::from_millis(200)).await;
        let before = cache.stats();
        let mut at = next;
        for _ in 0..6 {
            at = end_of(&log.read(at, 200_000).await.unwrap());
        }
        let after = cache.stats();
        assert!(after.hits > before.hits, "{before:?} -> {after:?}");
        assert_eq!(
            after.hits_loading, before.hits_loading,
            "loaded extents were ready, not still loading: {before:?} -> {after:?}"
        );
        log.close().await.unwrap();
    });
}
