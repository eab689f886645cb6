//! [`ShardCleaner`]: one shard's log cleaner.
//!
//! A partition actor whose topic is compacted asks its log for a clean every
//! `log.cleaner.backoff.ms`; when one is due it hands the job here. Each job runs as a task in the
//! shard's cleaner task queue (latency not important, so request handling goes first), holds the
//! shard's one cleaning permit while it works (one offset map per shard: memory stays bounded by
//! `log.cleaner.dedupe.buffer.size / shards`), paces its reads and writes to
//! `log.cleaner.io.max.bytes.per.second / shards`, and sends each cleaned group back to the actor,
//! which alone swaps it into the log:
//!
//! ```text
//!  actor: plan_clean ──job──> cleaner task: offset map, clean group 0 ──Group──> actor: install
//!                                           clean group 1 ──Group──> actor: install
//!                                           ...           ──Done───> actor: finish_clean
//! ```
//! Dropping the task (the actor closes, reopens its log or a group no longer fits) cancels it;
//! `.cleaned` files it leaves are removed by the next plan or recovery.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::channel::local::mpsc;
use futures::SinkExt;
use glommio::sync::Semaphore;
use glommio::{Latency, Shares, TaskQueueHandle};
use rill_engine::cleaner::{CleanJob, CleanStats, CleanedGroup, CleanerCheckpoint, Pacer};
use rill_engine::io::Storage;

use super::{CleanerSettings, KafkaRecords};
use crate::admin::shard::hooks;
use crate::partition::file_budget::{FileBudget, FileShare};

/// What a clean sends back to the partition actor.
#[derive(Debug)]
pub enum CleanEvent {
    /// A cleaned group on disk, to swap in with `PartitionLog::install_cleaned`.
    Group(CleanedGroup),
    /// Every group was sent: record the checkpoint with `PartitionLog::finish_clean`.
    Done {
        /// What the clean leaves for the next one.
        checkpoint: CleanerCheckpoint,
        /// What the clean did.
        stats: CleanStats,
    },
    /// The clean stopped (a segment deleted under it, an I/O error, a map too small).
    Failed(String),
}

/// Grants of the cleaning permit a shard has: one clean at a time.
const CLEANS_AT_ONCE: u64 = 1;
/// Files a clean holds open at once, counted in the shard's open-file budget while it runs: the
/// segment it reads and the `.cleaned` segment it writes (a transaction index is read whole
/// once the read segments are closed).
pub const CLEAN_FILES: usize = 2;
/// Share of the cleaner task queue against the request path's default share (1000).
const CLEANER_SHARES: usize = 100;

/// One shard's cleaner (see the module doc).
pub struct ShardCleaner {
    settings: CleanerSettings,
    /// This shard's share of the offset-map memory.
    map_bytes_max: usize,
    permit: Semaphore,
    pacer: Rc<RatePacer>,
    /// Created on the first clean (needs the running executor).
    queue: Cell<Option<TaskQueueHandle>>,
    /// The shard's open-file budget, which a running clean's files count in.
    files: Rc<FileBudget>,
}

impl ShardCleaner {
    /// A shard's cleaner: `settings` are broker-wide and split over `shards`; its files count in
    /// `files`, the shard's partition-file budget.
    pub fn new(settings: &CleanerSettings, shards: usize, files: Rc<FileBudget>) -> Rc<Self> {
        let shards = shards.max(1);
        Rc::new(ShardCleaner {
            settings: settings.clone(),
            map_bytes_max: settings.dedupe_buffer_bytes / shards,
            permit: Semaphore::new(CLEANS_AT_ONCE),
            pacer: Rc::new(RatePacer::new(
                settings
                    .io_bytes_per_second_max
                    .map(|r| (r / shards as u64).max(1)),
            )),
            queue: Cell::new(None),
            files,
        })
    }

    /// Whether compacted topics are cleaned.
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// How often a compacted partition asks whether a clean is due.
    pub fn backoff_ms(&self) -> u64 {
        self.settings.backoff_ms
    }

    /// Runs `job` in the cleaner task queue; its groups and outcome arrive on the receiver.
    /// Dropping the task cancels the clean.
    pub fn spawn<S: Storage + 'static>(
        self: &Rc<Self>,
        job: CleanJob<S>,
        name: String,
    ) -> (glommio::Task<()>, mpsc::Receiver<CleanEvent>) {
        let (events, receiver) = mpsc::channel(1);
        let cleaner = self.clone();
        let body = async move { cleaner.run(job, events, name).await };
        let task = match glommio::spawn_local_into(body, self.queue()) {
            Ok(task) => task,
            Err(e) => unreachable!("the cleaner queue belongs to this executor: {e}"),
        };
        (task, receiver)
    }

    /// A running clean's files in the shard's budget; dropping the share (the clean ends or is
    /// cancelled) gives them back. Over the budget, the keeper closes idle partitions' files.
    fn hold_files(&self) -> FileShare {
        let share = FileShare::new(self.files.clone(), Rc::new(Cell::new(0)));
        share.publish(CLEAN_FILES);
        share
    }

    fn queue(&self) -> TaskQueueHandle {
        if let Some(queue) = self.queue.get() {
            return queue;
        }
        let queue = glommio::executor().create_task_queue(
            Shares::Static(CLEANER_SHARES),
            Latency::NotImportant,
            "rill-cleaner",
        );
        self.queue.set(Some(queue));
        queue
    }

    async fn run<S: Storage>(
        &self,
        mut job: CleanJob<S>,
        mut events: mpsc::Sender<CleanEvent>,
        name: String,
    ) {
        let Ok(_permit) = self.permit.acquire_permit(1).await else {
            return; // the semaphore is never closed
        };
        let _files = self.hold_files();
        let started = Instant::now();
        let outcome = self.clean(&mut job, &mut events).await;
        let stats = job.stats();
        hooks::clean_finished(started.elapsed(), outcome.is_ok().then_some(&stats));
        let event = match outcome {
            Ok(()) => {
                tracing::info!(
                    partition = name,
                    ?stats,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "cleaned"
                );
                CleanEvent::Done {
                    checkpoint: job.checkpoint(),
                    stats,
                }
            }
            Err(why) => {
                tracing::warn!(partition = name, %why, "clean stopped");
                CleanEvent::Failed(why)
            }
        };
        let _ = events.send(event).await;
    }

    async fn clean<S: Storage>(
        &self,
        job: &mut CleanJob<S>,
        events: &mut mpsc::Sender<CleanEvent>,
    ) -> Result<(), String> {
        let pacer = &*self.pacer;
        job.build_offset_map(&KafkaRecords, pacer, self.map_bytes_max)
            .await
            .map_err(|e| e.to_string())?;
        for g in 0..job.group_count() {
            let group = job
                .clean_group(g, &KafkaRecords, pacer)
                .await
                .map_err(|e| e.to_string())?;
            events
                .send(CleanEvent::Group(group))
                .await
                .map_err(|_| "the partition stopped listening".to_string())?;
        }
        Ok(())
    }
}

/// Paces a clean's I/O to a byte rate (Kafka's `Throttler`), and yields to other tasks when
/// the executor asks.
pub struct RatePacer {
    bytes_per_second: Option<u64>,
    /// Start of the current accounting window and the bytes paced in it.
    window: Cell<(Instant, u64)>,
}

/// Length of a pacing window: the rate is held over windows this long.
const PACING_WINDOW: Duration = Duration::from_millis(300);

impl RatePacer {
    /// A pacer holding I/O to `bytes_per_second` (`None`: unlimited).
    pub fn new(bytes_per_second: Option<u64>) -> Self {
        RatePacer {
            bytes_per_second,
            window: Cell::new((Instant::now(), 0)),
        }
    }

    /// How long to wait after `bytes` more in a window that started `elapsed` ago and had
    /// `sent` bytes before: the time the rate allows for them minus the time already passed.
    pub fn delay(bytes_per_second: u64, sent: u64, elapsed: Duration) -> Duration {
        let allowed = Duration::from_secs_f64(sent as f64 / bytes_per_second as f64);
        allowed.saturating_sub(elapsed)
    }
}

impl Pacer for RatePacer {
    async fn pace(&self, bytes: u64) {
        if let Some(rate) = self.bytes_per_second {
            let (start, sent) = self.window.get();
            let sent = sent + bytes;
            let wait = Self::delay(rate, sent, start.elapsed());
            if !wait.is_zero() {
                glommio::timer::sleep(wait).await;
            }
            if start.elapsed() >= PACING_WINDOW {
                self.window.set((Instant::now(), 0));
            } else {
                self.window.set((start, sent));
            }
        }
        glommio::yield_if_needed().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_waits_for_what_the_rate_has_not_allowed_yet() {
        let mb = 1_000_000;
        assert_eq!(
            RatePacer::delay(mb, mb / 2, Duration::ZERO),
            Duration::from_millis(500)
        );
        assert_eq!(
            RatePacer::delay(mb, mb / 2, Duration::from_millis(200)),
            Duration::from_millis(300)
        );
        assert_eq!(
            RatePacer::delay(mb, mb / 2, Duration::from_secs(1)),
            Duration::ZERO
        );
    }

    #[test]
    fn settings_split_over_shards() {
        let settings = CleanerSettings {
            io_bytes_per_second_max: Some(10),
            ..CleanerSettings::default()
        };
        let cleaner = ShardCleaner::new(&settings, 4, FileBudget::new(8).0);
        assert_eq!(cleaner.map_bytes_max, (128 << 20) / 4);
        assert_eq!(cleaner.pacer.bytes_per_second, Some(2));
        assert_eq!(
            ShardCleaner::new(&settings, 0, FileBudget::new(8).0).map_bytes_max,
            128 << 20
        );
    }

    #[test]
    fn a_running_clean_counts_its_files_in_the_shard_budget() {
        let (files, mut keeper) = FileBudget::new(CLEAN_FILES + 1);
        let cleaner = ShardCleaner::new(&CleanerSettings::default(), 1, files.clone());
        let held = cleaner.hold_files();
        assert_eq!(files.open(), CLEAN_FILES);
        let partition = FileShare::new(files.clone(), Rc::new(Cell::new(0)));
        partition.publish(2);
        assert!(files.over());
        assert!(keeper.try_recv().is_ok(), "the keeper is woken");
        drop(held);
        assert_eq!(files.open(), 2, "given back when the clean ends");
    }
}
