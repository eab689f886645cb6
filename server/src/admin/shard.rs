//! The shard side of the admin listener: what a shard records, and the task that publishes it.
//!
//! [`install`] puts a [`ShardLocal`] into the shard's thread (one glommio executor per thread)
//! and spawns its observer task. The data path then records through the free functions of
//! [`hooks`], which find the shard through the thread-local: no handler, actor or connection
//! carries a metrics handle, and on a thread without a shard (unit tests, the fake broker, the
//! offline tools) every hook does nothing.
//!
//! The observer works every [`FLUSH_INTERVAL`], and within [`REQUEST_POLL`] of the admin thread
//! asking for a snapshot: heartbeat, flush of the local metrics, executor busy time, read cache
//! counters, readiness latch, and the answers to snapshot requests (the groups this shard
//! coordinates). It polls for requests: the admin thread never wakes a shard's task, which
//! glommio 0.9 can turn into a double free (see `crate::shard::router`).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rill_types::{PartitionIndex, TopicPartitionRef};

use super::metrics::{ShardMetrics, FLUSH_INTERVAL};
use super::state::{AdminState, GroupSnapshot, ShardSnapshot, ShardStats, SnapshotRequest};

/// Source of a shard's group snapshots (its group coordinator, once started).
type GroupSource = Box<dyn Fn() -> Vec<GroupSnapshot>>;
/// Source of a shard's transactional ids counted by state (its transaction coordinator).
type TxnSource = Box<dyn Fn() -> BTreeMap<&'static str, u64>>;
/// Source of a shard's read cache counters: (lookups served, lookups missed) since start, and
/// the bytes it holds now.
type ReadCacheSource = Box<dyn Fn() -> (u64, u64, u64)>;
/// Source of a shard's byte budgets' figures, by [`super::state::Budget`].
type BudgetSource = Box<dyn Fn() -> [crate::memory_budget::BudgetStats; 2]>;

/// Bytes and records this shard sent to consumers since its last flush, by topic and
/// partition. Counted here, not in the partition's [`PartitionStats`]: the partition may be
/// another core's, and its counters share a cache line with the ones its owner writes on every
/// append.
#[derive(Default)]
struct SentSinceFlush(HashMap<String, HashMap<PartitionIndex, (u64, u64)>>);

impl SentSinceFlush {
    fn add(&mut self, tp: TopicPartitionRef<'_>, bytes: u64, records: u64) {
        let by_partition = match self.0.get_mut(tp.topic) {
            Some(by_partition) => by_partition,
            None => self.0.entry(tp.topic.to_string()).or_default(),
        };
        let sent = by_partition.entry(tp.partition).or_default();
        sent.0 += bytes;
        sent.1 += records;
    }

    /// Adds everything into the partitions' shared counters and starts over (counts of a
    /// partition deleted meanwhile are dropped with it).
    fn flush(&mut self, state: &AdminState) {
        for (topic, by_partition) in self.0.drain() {
            for (partition, (bytes, records)) in by_partition {
                if let Some(stats) =
                    state.known_partition(TopicPartitionRef::new(&topic, partition))
                {
                    stats.fetched(bytes, records);
                }
            }
        }
    }
}

/// What a shard keeps for the admin listener, in its own thread.
pub struct ShardLocal {
    /// This shard's index.
    pub id: usize,
    /// The process-wide state.
    pub state: Arc<AdminState>,
    /// Local copies of the data-path metrics.
    pub metrics: ShardMetrics,
    groups: RefCell<Option<GroupSource>>,
    transactions: RefCell<Option<TxnSource>>,
    read_cache: RefCell<Option<ReadCacheSource>>,
    budgets: RefCell<Option<BudgetSource>>,
    sent: RefCell<SentSinceFlush>,
}

impl ShardLocal {
    /// This shard's counters.
    pub fn stats(&self) -> &ShardStats {
        &self.state.shards[self.id]
    }

    /// Where group snapshots come from once the coordinator runs.
    pub fn set_group_source(&self, source: impl Fn() -> Vec<GroupSnapshot> + 'static) {
        *self.groups.borrow_mut() = Some(Box::new(source));
    }

    /// Where the transaction counts come from once the coordinator runs.
    pub fn set_txn_source(&self, source: impl Fn() -> BTreeMap<&'static str, u64> + 'static) {
        *self.transactions.borrow_mut() = Some(Box::new(source));
    }

    /// Where the read cache counters come from once the shard's cache exists.
    pub fn set_read_cache_source(&self, source: impl Fn() -> (u64, u64, u64) + 'static) {
        *self.read_cache.borrow_mut() = Some(Box::new(source));
    }

    /// Where the byte budgets' figures come from once the shard exists.
    pub fn set_budget_source(
        &self,
        source: impl Fn() -> [crate::memory_budget::BudgetStats; 2] + 'static,
    ) {
        *self.budgets.borrow_mut() = Some(Box::new(source));
    }

    /// Copies the byte budgets' figures into the shared stats.
    fn publish_budgets(&self) {
        let Some(source) = self.budgets.borrow().as_ref().map(|f| f()) else {
            return;
        };
        for (gauges, stats) in self.stats().budgets.iter().zip(source) {
            gauges.capacity.store(stats.capacity, Ordering::Relaxed);
            gauges.held.store(stats.held, Ordering::Relaxed);
            gauges.waiting.store(stats.waiting, Ordering::Relaxed);
            gauges.held_max.store(stats.held_max, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> ShardSnapshot {
        let groups = self
            .groups
            .borrow()
            .as_ref()
            .map(|f| f())
            .unwrap_or_default();
        let transactions = self
            .transactions
            .borrow()
            .as_ref()
            .map(|f| f())
            .unwrap_or_default();
        ShardSnapshot {
            groups,
            transactions,
        }
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Rc<ShardLocal>>> = const { RefCell::new(None) };
}

/// The current thread's shard, if one is installed.
pub fn local() -> Option<Rc<ShardLocal>> {
    LOCAL.with(|l| l.borrow().clone())
}

/// Makes this thread shard `id` of `state` and spawns its observer (inside the shard's
/// executor, at the start of the shard).
pub fn install(id: usize, state: Arc<AdminState>) -> Rc<ShardLocal> {
    let local = Rc::new(ShardLocal {
        id,
        metrics: state.metrics.local(),
        state,
        groups: RefCell::new(None),
        transactions: RefCell::new(None),
        read_cache: RefCell::new(None),
        budgets: RefCell::new(None),
        sent: RefCell::new(SentSinceFlush::default()),
    });
    local
        .stats()
        .heartbeat_ms
        .store(local.state.now_ms(), Ordering::Relaxed);
    LOCAL.with(|l| *l.borrow_mut() = Some(local.clone()));
    let (tx, requests) = mpsc::channel();
    local.state.set_snapshot_requests(id, tx);
    glommio::spawn_local(observe(local.clone(), requests)).detach();
    local
}

/// How often the observer looks for snapshot requests.
const REQUEST_POLL: Duration = Duration::from_millis(10);

/// The observer loop (see the module doc). Ends with the executor.
async fn observe(local: Rc<ShardLocal>, requests: mpsc::Receiver<SnapshotRequest>) {
    let mut worked = Instant::now();
    loop {
        glommio::timer::sleep(REQUEST_POLL).await;
        let mut asked = Vec::new();
        // `try_recv` registers no waker, so the admin thread's send wakes nothing.
        loop {
            match requests.try_recv() {
                Ok(reply) => asked.push(reply),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return, // the admin state is gone
            }
        }
        if asked.is_empty() && worked.elapsed() < FLUSH_INTERVAL {
            continue;
        }
        worked = Instant::now();
        let stats = local.stats();
        stats
            .heartbeat_ms
            .store(local.state.now_ms(), Ordering::Relaxed);
        // Traffic first: a scrape that sees a Fetch counted then also sees what it sent.
        local.sent.borrow_mut().flush(&local.state);
        local.metrics.flush();
        // Taking the stats resets them: each call returns the time since the previous one.
        let busy = glommio::executor().executor_stats().executor_runtime();
        stats
            .busy_us
            .fetch_add(busy.as_micros() as u64, Ordering::Relaxed);
        if let Some(source) = local.read_cache.borrow().as_ref() {
            let (hits, misses, bytes) = source();
            stats.read_cache_hits.store(hits, Ordering::Relaxed);
            stats.read_cache_misses.store(misses, Ordering::Relaxed);
            stats.read_cache_bytes.store(bytes, Ordering::Relaxed);
        }
        local.publish_budgets();
        let _ = local.state.ready(); // latches start-up recovery as soon as it is done
        for reply in asked {
            let _ = reply.send(local.snapshot());
        }
    }
}

/// What the data path calls; each is a no-op on a thread without a shard.
pub mod hooks {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use rill_engine::cleaner::CleanStats;
    use rill_types::batch::RecordBatchHeader;
    use rill_types::TopicPartitionRef;

    use super::local;
    use crate::admin::state::PartitionStats;

    /// A request being served: in the shard's request queue until dropped; [`Self::done`]
    /// records its latency under its API.
    pub struct RequestTimer {
        api_key: Option<i16>,
        started: Instant,
    }

    /// A request frame (its body, after the size prefix) was read and will be served.
    pub fn request_started(frame_body: &[u8]) -> RequestTimer {
        requests_in_flight(1);
        let api_key = frame_body
            .get(..2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]));
        RequestTimer {
            api_key,
            started: Instant::now(),
        }
    }

    impl RequestTimer {
        /// The response is ready.
        pub fn done(self) {
            if let (Some(l), Some(api_key)) = (local(), self.api_key) {
                l.metrics.request(api_key, self.started.elapsed());
            }
        }
    }

    impl Drop for RequestTimer {
        fn drop(&mut self) {
            requests_in_flight(-1);
        }
    }

    /// A partition log flush took `elapsed`.
    pub fn log_flushed(elapsed: Duration) {
        if let Some(l) = local() {
            l.metrics.log_flushed(elapsed);
        }
    }

    /// Where time goes on a shard (`rill_shard_stage_seconds`): the steps of a Produce from
    /// its frame being read to its response being written (those at its partition for
    /// acks=all only, the ones that wait for a flush), and the Fetch
    /// response sends that run on the same thread. Tells queueing on the shard, waiting for
    /// the partition actor (whose flush is `rill_log_flush_duration_seconds`) and writing
    /// apart, e.g. beside a catch-up reader.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Stage {
        /// From a Produce frame being read to its task first running (the shard's run queue).
        Queued,
        /// From an acks=all append being sent to its partition actor to the actor taking it.
        Mailbox,
        /// From the actor taking an acks=all append's group to that group's flush starting.
        Appending,
        /// From the Produce handler starting to its acks=all appends being sent (checks, plan).
        Planned,
        /// A group's reads served by the actor after its flush (the actor busy with reads).
        ActorReads,
        /// From a Produce response being ready to it being written to the socket.
        Written,
        /// One vectored send of a Fetch response (the shard runs nothing else meanwhile).
        FetchSendCall,
    }

    impl Stage {
        /// Every stage, in declaration order.
        pub const ALL: [Stage; 7] = [
            Stage::Queued,
            Stage::Mailbox,
            Stage::Appending,
            Stage::Planned,
            Stage::ActorReads,
            Stage::Written,
            Stage::FetchSendCall,
        ];

        /// Its metric label.
        pub fn name(self) -> &'static str {
            match self {
                Stage::Queued => "queued",
                Stage::Mailbox => "mailbox",
                Stage::Appending => "appending",
                Stage::Planned => "planned",
                Stage::ActorReads => "actor_reads",
                Stage::Written => "written",
                Stage::FetchSendCall => "fetch_send_call",
            }
        }
    }

    /// `elapsed` was spent in `stage`.
    pub fn shard_stage(stage: Stage, elapsed: Duration) {
        if let Some(l) = local() {
            l.metrics.shard_stage(stage, elapsed);
        }
    }

    /// An acks=all produce to one partition became durable `elapsed` after it arrived.
    pub fn produce_durable(elapsed: Duration) {
        if let Some(l) = local() {
            l.metrics.produce_durable(elapsed);
        }
    }

    /// A Fetch was answered after waiting `waited` for data (zero when it had data at once);
    /// when it came from a consumer (not a follower), `sent` are the record chunks of each
    /// (topic, partition) in the response, counted as bytes and messages out.
    pub fn fetch_answered<'a>(
        waited: Duration,
        sent: Option<impl Iterator<Item = (TopicPartitionRef<'a>, &'a [Bytes])>>,
    ) {
        let Some(l) = local() else {
            return;
        };
        l.metrics.fetch_waited(waited);
        let mut counts = l.sent.borrow_mut();
        for (tp, chunks) in sent.into_iter().flatten() {
            let bytes: usize = chunks.iter().map(Bytes::len).sum();
            if bytes > 0 {
                let records = chunks.iter().map(|c| records_in(c)).sum();
                counts.add(tp, bytes as u64, records);
            }
        }
    }

    /// Records in the whole batches of `chunk`, control batches (transaction markers) left
    /// out as they are on the way in; stops at anything that is not a whole batch.
    pub(crate) fn records_in(mut chunk: &[u8]) -> u64 {
        let mut records = 0;
        while let Some(header) = RecordBatchHeader::view(chunk) {
            let Some(size) = header.total_bytes().filter(|&n| n <= chunk.len()) else {
                break;
            };
            if !header.attrs().is_control() {
                records += u64::try_from(header.records_count.get()).unwrap_or(0);
            }
            chunk = &chunk[size..];
        }
        records
    }

    /// A clean of one log finished after `elapsed` having done `stats`, or (`None`) stopped.
    pub fn clean_finished(elapsed: Duration, stats: Option<&CleanStats>) {
        if let Some(l) = local() {
            l.metrics.clean_finished(elapsed, stats);
        }
    }

    /// A transaction was completed (markers written, end recorded): committed or aborted.
    pub fn txn_ended(committed: bool) {
        if let Some(l) = local() {
            l.metrics.txn_ended(committed);
        }
    }

    /// A transaction ran past its timeout and is being aborted.
    pub fn txn_timed_out() {
        if let Some(l) = local() {
            l.metrics.txn_timed_out();
        }
    }

    /// A request of api `api_key` panicked while it was served (caught and answered).
    pub fn request_panicked(api_key: i16) {
        if let Some(l) = local() {
            l.state.metrics.request_panicked(api_key);
        }
    }

    /// A resource bound bit (see [`crate::admin::bound_hits`]).
    pub fn bound_hit(bound: crate::admin::bound_hits::Bound) {
        bound_hits(bound, 1);
    }

    /// A resource bound bit `n` times (none when 0).
    pub fn bound_hits(bound: crate::admin::bound_hits::Bound, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(l) = local() {
            l.stats().bound_hits.add(bound, n);
        }
    }

    /// A connection was accepted.
    pub fn connection_accepted() {
        if let Some(l) = local() {
            l.stats()
                .connections_accepted
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A connection was closed.
    pub fn connection_closed() {
        if let Some(l) = local() {
            l.stats().connections_closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request was read and queued (`+1`) or answered (`-1`).
    fn requests_in_flight(delta: i64) {
        if let Some(l) = local() {
            l.stats()
                .requests_in_flight
                .fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// The shard's listener is bound.
    pub fn listening() {
        if let Some(l) = local() {
            l.stats().listening.store(true, Ordering::Relaxed);
        }
    }

    /// The broker began to stop: no longer ready.
    pub fn stopping() {
        if let Some(l) = local() {
            l.state.health.stopping.store(true, Ordering::Relaxed);
        }
    }

    /// A partition log starts opening (recovery); pair with [`log_opened`].
    pub fn log_opening() {
        if let Some(l) = local() {
            l.state.health.opening.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A partition log finished opening (or failed to).
    pub fn log_opened() {
        if let Some(l) = local() {
            l.state.health.opening.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The stats of partition `tp`, owned by this shard (the actor's handle).
    pub fn partition(tp: TopicPartitionRef<'_>) -> Option<Arc<PartitionStats>> {
        local().map(|l| l.state.partition(tp, l.id))
    }

    /// The stats of a partition already known (another shard may own it), for counting
    /// reads; `None` if it never opened.
    pub fn known_partition(tp: TopicPartitionRef<'_>) -> Option<Arc<PartitionStats>> {
        local().and_then(|l| l.state.known_partition(tp))
    }

    /// Forgets a deleted partition.
    pub fn partition_deleted(tp: TopicPartitionRef<'_>) {
        if let Some(l) = local() {
            l.state.remove_partition(tp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::hooks::records_in;
    use crate::test_batches::batch;
    use rill_types::batch::attributes::CONTROL_BIT;
    use rill_types::batch::{write_crc, RecordBatchHeader};

    #[test]
    fn records_in_counts_whole_batches_and_leaves_out_control_ones() {
        let mut chunk = [batch(3), batch(1), batch(5)].concat();
        assert_eq!(records_in(&chunk), 9);
        assert_eq!(records_in(&[]), 0);
        // A torn tail (not a whole batch) is not counted, nor anything after it.
        assert_eq!(records_in(&chunk[..chunk.len() - 1]), 4);
        assert_eq!(records_in(&chunk[..10]), 0);
        // A transaction marker is a control batch: not a message.
        let first = RecordBatchHeader::view_mut(&mut chunk).unwrap();
        first.attributes.set(first.attributes.get() | CONTROL_BIT);
        let size = first.total_bytes().unwrap();
        write_crc(&mut chunk[..size]);
        assert_eq!(records_in(&chunk), 6);
    }
}
