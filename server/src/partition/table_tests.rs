//! The partition table and actors against the engine on its simulated disk, inside a real
//! glommio executor (timers, local tasks): group commit, reads, long-poll wake-up, deletes,
//! shutdown, and acks=all surviving a crash.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::future::{join_all, select, Either};
use rill_engine::io::sim::{FaultConfig, SimStorage};
use rill_engine::io::{Clock, SystemClock};
use rill_engine::LogManager;
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;
use rill_types::{Offset, PartitionIndex, TopicPartitionRef};

use super::ops::{Acks, Isolation, PartitionOp, PartitionReply};
use super::table::PartitionTable;
use crate::config::settings::BrokerConfig;
use crate::test_batches::batch;
use crate::topics::TopicRegistry;

struct Fixture {
    _dir: tempfile::TempDir,
    registry: Arc<TopicRegistry>,
    storage: SimStorage,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(TopicRegistry::open(dir.path()).unwrap());
        registry.create("t", 2, Default::default()).unwrap();
        let storage = SimStorage::new(7, FaultConfig::default());
        Fixture {
            _dir: dir,
            registry,
            storage,
        }
    }

    fn table(&self) -> Rc<PartitionTable<SimStorage>> {
        self.table_with(BrokerConfig::defaults())
    }

    fn table_with(&self, config: BrokerConfig) -> Rc<PartitionTable<SimStorage>> {
        let manager = LogManager::new(self.storage.clone(), "/sim/data".into());
        let clock: Rc<dyn Clock> = Rc::new(SystemClock);
        Rc::new(PartitionTable::new(
            Rc::new(manager),
            self.registry.clone(),
            Arc::new(config),
            clock,
        ))
    }
}

pub(super) fn run<F: std::future::Future<Output = ()> + 'static>(
    make: impl FnOnce() -> F + Send + 'static,
) {
    glommio::LocalExecutorBuilder::default()
        .io_memory(256 << 10)
        .spawn(move || async move { make().await })
        .unwrap()
        .join()
        .unwrap();
}

pub(super) fn append(records: usize, acks: Acks) -> PartitionOp {
    PartitionOp::Append {
        batch: ValidatedBatch::new(BytesMut::from(&batch(records)[..]), usize::MAX).unwrap(),
        acks,
        ack_timeout: crate::partition::ops::INTERNAL_ACK_TIMEOUT,
        txn_guard: None,
    }
}

fn base_offset(reply: PartitionReply) -> i64 {
    match reply {
        PartitionReply::Appended { base_offset, .. } => base_offset.0,
        other => panic!("append failed: {other:?}"),
    }
}

async fn high_watermark(table: &PartitionTable<SimStorage>, partition: i32) -> i64 {
    match table
        .call(
            TopicPartitionRef::new("t", PartitionIndex(partition)),
            PartitionOp::Offsets,
        )
        .await
    {
        PartitionReply::Offsets(p) => p.high_watermark().0,
        other => panic!("offsets failed: {other:?}"),
    }
}

#[test]
fn concurrent_appends_get_contiguous_offsets_and_are_readable() {
    run(|| async {
        let fixture = Fixture::new();
        let table = fixture.table();
        let appends = (0..50).map(|_| {
            table.call(
                TopicPartitionRef::new("t", PartitionIndex(0)),
                append(2, Acks::All),
            )
        });
        let mut bases: Vec<i64> = join_all(appends)
            .await
            .into_iter()
            .map(base_offset)
            .collect();
        bases.sort_unstable();
        assert_eq!(bases, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(high_watermark(&table, 0).await, 100);
        match table
            .call(
                TopicPartitionRef::new("t", PartitionIndex(0)),
                PartitionOp::Read {
                    from: Offset(0),
                    max_bytes: 1 << 20,
                    isolation: Isolation::ReadUncommitted,
                },
            )
            .await
        {
            PartitionReply::Read {
                positions, chunks, ..
            } => {
                assert_eq!(positions.high_watermark().0, 100);
                let bytes: usize = chunks.iter().map(|c| c.len()).sum();
                assert_eq!(bytes, 50 * batch(2).len());
            }
            other => panic!("read failed: {other:?}"),
        }
        table.close_all().await;
    });
}

#[test]
fn a_parked_fetch_wakes_on_append() {
    run(|| async {
        let fixture = Fixture::new();
        let table = fixture.table();
        assert_eq!(high_watermark(&table, 1).await, 0);
        let waiting = {
            let table = table.clone();
            glommio::spawn_local(async move {
                let op = PartitionOp::WaitForData {
                    from: Offset(0),
                    wait_ms: 600_000,
                    isolation: Isolation::ReadUncommitted,
                };
                table
                    .call(TopicPartitionRef::new("t", PartitionIndex(1)), op)
                    .await
            })
        };
        glommio::timer::sleep(Duration::from_millis(10)).await;
        base_offset(
            table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(1)),
                    append(1, Acks::Leader),
                )
                .await,
        );
        let guard = glommio::timer::sleep(Duration::from_secs(60));
        match select(waiting, Box::pin(guard)).await {
            Either::Left((reply, _)) => assert!(matches!(reply, PartitionReply::Waited)),
            Either::Right(_) => panic!("the append did not wake the parked fetch"),
        }
        table.close_all().await;
    });
}

#[test]
fn unknown_partitions_deletes_and_shutdown() {
    run(|| async {
        let fixture = Fixture::new();
        let table = fixture.table();
        assert_eq!(
            table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(2)),
                    PartitionOp::Offsets
                )
                .await
                .error_code(),
            ErrorCode::UnknownTopicOrPartition
        );
        assert_eq!(
            table
                .call(
                    TopicPartitionRef::new("nope", PartitionIndex(0)),
                    PartitionOp::Offsets
                )
                .await
                .error_code(),
            ErrorCode::UnknownTopicOrPartition
        );
        base_offset(
            table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(0)),
                    append(3, Acks::All),
                )
                .await,
        );
        assert!(matches!(
            table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(0)),
                    PartitionOp::Delete
                )
                .await,
            PartitionReply::Deleted
        ));
        // Still in the registry, so it reopens empty.
        assert_eq!(high_watermark(&table, 0).await, 0);
        table.close_all().await;
        assert_eq!(
            table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(0)),
                    PartitionOp::Offsets
                )
                .await
                .error_code(),
            ErrorCode::KafkaStorageError
        );
    });
}

#[test]
fn acks_all_survives_a_crash() {
    run(|| async {
        let fixture = Fixture::new();
        let table = fixture.table();
        for _ in 0..5 {
            base_offset(
                table
                    .call(
                        TopicPartitionRef::new("t", PartitionIndex(0)),
                        append(4, Acks::All),
                    )
                    .await,
            );
        }
        // Crash without closing: only what was fdatasync'ed survives; acks=all waited for it.
        fixture.storage.crash();
        let reopened = fixture.table();
        assert_eq!(high_watermark(&reopened, 0).await, 20);
        reopened.close_all().await;
        drop(table);
    });
}

#[test]
fn open_files_stay_within_the_shard_budget() {
    run(|| async {
        let fixture = Fixture::new();
        fixture
            .registry
            .create("many", 24, Default::default())
            .unwrap();
        let config = BrokerConfig {
            shard_open_files_max: Some(6),
            ..BrokerConfig::defaults()
        };
        let table = fixture.table_with(config);
        for p in 0..24 {
            base_offset(
                table
                    .call(
                        TopicPartitionRef::new("many", PartitionIndex(p)),
                        append(1, Acks::All),
                    )
                    .await,
            );
        }
        // The keeper releases the least recently used partitions in the background.
        let mut waited = Duration::ZERO;
        while table.files().over() && waited < Duration::from_secs(30) {
            glommio::timer::sleep(Duration::from_millis(10)).await;
            waited += Duration::from_millis(10);
        }
        let open = table.files().open();
        assert!(open <= 6, "{open} partition files open, budget 6");
        // Released partitions reopen on demand: every record is there, appends go on.
        for p in 0..24 {
            assert_eq!(
                base_offset(
                    table
                        .call(
                            TopicPartitionRef::new("many", PartitionIndex(p)),
                            append(1, Acks::All)
                        )
                        .await
                ),
                1
            );
            match table
                .call(
                    TopicPartitionRef::new("many", PartitionIndex(p)),
                    PartitionOp::Read {
                        from: Offset(0),
                        max_bytes: 1 << 20,
                        isolation: Isolation::ReadUncommitted,
                    },
                )
                .await
            {
                PartitionReply::Read { chunks, .. } => assert_eq!(chunks.len(), 2),
                other => panic!("read failed: {other:?}"),
            }
        }
        table.close_all().await;
        assert_eq!(table.files().open(), 0, "closed actors hold no files");
    });
}

#[test]
fn idle_partitions_release_their_files() {
    run(|| async {
        let fixture = Fixture::new();
        let config = BrokerConfig {
            partition_idle_ms: 50,
            ..BrokerConfig::defaults()
        };
        let table = fixture.table_with(config);
        base_offset(
            table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(0)),
                    append(2, Acks::All),
                )
                .await,
        );
        base_offset(
            table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(1)),
                    append(2, Acks::All),
                )
                .await,
        );
        assert_eq!(table.files().open(), 2);
        // Wait for the release itself, not for a fixed time: under load the actors' ticks and
        // the release's storage steps can all run after any fixed sleep of this task ends. The
        // bound only keeps a lost release from hanging the suite.
        let waited = std::time::Instant::now();
        while table.files().open() != 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(60),
                "idle partitions closed their active segments ({} files still open)",
                table.files().open()
            );
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            base_offset(
                table
                    .call(
                        TopicPartitionRef::new("t", PartitionIndex(0)),
                        append(1, Acks::All)
                    )
                    .await
            ),
            2
        );
        assert_eq!(table.files().open(), 1);
        table.close_all().await;
    });
}

/// Found by the live fuzzer (issue 26, a 3-node cluster: CreateTopics, DeleteTopics and
/// auto-creation interleaved): a request for a partition whose actor is being deleted opened a
/// second actor on the same directory while the first was still closing it and removing it. On
/// glommio the new actor's open then panicked (`statfs(path).unwrap()` on a path just removed:
/// the shard died); here, an append acknowledged by the second actor would be deleted by the
/// first. The append must either fail with a retriable error or stay readable.
#[test]
fn a_request_racing_a_delete_never_shares_the_directory() {
    run(|| async {
        let fixture = Fixture::new();
        fixture.storage.set_latency_polls_max(4); // storage steps take polls, as io_uring's do
        let table = fixture.table();
        // Every interleaving the executor offers: the append arrives 0, 1, 2... yields after
        // the delete was sent.
        for yields in 0..12 {
            base_offset(
                table
                    .call(
                        TopicPartitionRef::new("t", PartitionIndex(0)),
                        append(3, Acks::All),
                    )
                    .await,
            );
            let deleting = {
                let table = table.clone();
                glommio::spawn_local(async move {
                    table
                        .call(
                            TopicPartitionRef::new("t", PartitionIndex(0)),
                            PartitionOp::Delete,
                        )
                        .await
                })
            };
            for _ in 0..=yields {
                glommio::executor().yield_task_queue_now().await;
            }
            let appended = table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(0)),
                    append(2, Acks::All),
                )
                .await;
            assert!(matches!(deleting.await, PartitionReply::Deleted));
            match appended {
                PartitionReply::Appended { base_offset, .. } => {
                    let end = base_offset.0 + 2;
                    let survived = high_watermark(&table, 0).await;
                    assert_eq!(
                        survived, end,
                        "the acknowledged append survives ({yields} yields)"
                    );
                }
                other => assert!(
                    matches!(
                        other.error_code(),
                        ErrorCode::UnknownTopicOrPartition | ErrorCode::NotLeaderOrFollower
                    ),
                    "a retriable error, not {other:?} ({yields} yields)"
                ),
            }
            assert!(matches!(
                table
                    .call(
                        TopicPartitionRef::new("t", PartitionIndex(0)),
                        PartitionOp::Delete
                    )
                    .await,
                PartitionReply::Deleted
            ));
        }
        table.close_all().await;
    });
}

/// Pins the live fuzzer's crash (seeds 0x5d7111083bd040bd, 0x5bad302b5cf0b267): a second delete
/// that found no actor removed the directory while the actor the first delete asked to delete
/// was still opening it, and glommio's open panicked on the vanished path. The second delete now
/// waits for that actor, so every open ends before its directory goes.
#[test]
fn a_second_delete_waits_for_the_actor_the_first_is_deleting() {
    run(|| async {
        let fixture = Fixture::new();
        fixture.storage.set_latency_polls_max(4); // storage steps take polls, as io_uring's do
        let table = fixture.table();
        for yields in 0..12 {
            let opening = {
                let table = table.clone();
                glommio::spawn_local(async move {
                    table
                        .call(
                            TopicPartitionRef::new("t", PartitionIndex(0)),
                            append(1, Acks::All),
                        )
                        .await
                })
            };
            for _ in 0..yields {
                glommio::executor().yield_task_queue_now().await;
            }
            let first = {
                let table = table.clone();
                glommio::spawn_local(async move {
                    table
                        .call(
                            TopicPartitionRef::new("t", PartitionIndex(0)),
                            PartitionOp::Delete,
                        )
                        .await
                })
            };
            glommio::executor().yield_task_queue_now().await;
            let second = table
                .call(
                    TopicPartitionRef::new("t", PartitionIndex(0)),
                    PartitionOp::Delete,
                )
                .await;
            assert!(
                matches!(second, PartitionReply::Deleted),
                "{second:?} ({yields} yields)"
            );
            assert!(
                matches!(first.await, PartitionReply::Deleted),
                "({yields} yields)"
            );
            let opened = opening.await;
            assert!(
                !matches!(opened.error_code(), ErrorCode::KafkaStorageError),
                "the open never loses its directory: {opened:?} ({yields} yields)"
            );
        }
        table.close_all().await;
    });
}
