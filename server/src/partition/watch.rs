//! A partition's published high watermark and last stable offset, and the fetches waiting for
//! them to move (long poll): read_uncommitted fetches wait for the high watermark,
//! read_committed ones for the last stable offset.
//!
//! The partition actor publishes after each group of appends (once the data is visible); waiting
//! fetches on the same shard are woken at once. The watch is shard-local (`Rc`, `Cell`): other
//! shards wait through a `WaitForData` message that ends up here.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use crate::channel::local::oneshot;
use futures::future::{select, Either};
use rill_types::Offset;

use super::ops::Isolation;

/// Published positions and waiters of one partition.
#[derive(Debug)]
pub struct PartitionWatch {
    /// `None` until the log has been opened and published once.
    high_watermark: Cell<Option<Offset>>,
    /// Published with the high watermark.
    last_stable: Cell<Option<Offset>>,
    /// Published with the high watermark (followers' fetches wait for it).
    log_end: Cell<Option<Offset>>,
    closed: Cell<bool>,
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
}

/// Upper bound on fetches parked on one partition; beyond it a waiter returns at once (the
/// fetch then answers with what it has, which is always correct, just earlier).
pub const WAITERS_MAX: usize = 4096;

impl Default for PartitionWatch {
    fn default() -> Self {
        Self {
            high_watermark: Cell::new(None),
            last_stable: Cell::new(None),
            log_end: Cell::new(None),
            closed: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
        }
    }
}

impl PartitionWatch {
    /// The last published high watermark (`None` before the log has been opened).
    pub fn high_watermark(&self) -> Option<Offset> {
        self.high_watermark.get()
    }

    /// Publish a new high watermark and last stable offset; wakes every waiter if either moved.
    pub fn publish(&self, high_watermark: Offset, last_stable: Offset) {
        assert!(last_stable <= high_watermark);
        let old = self.high_watermark.replace(Some(high_watermark));
        let old_stable = self.last_stable.replace(Some(last_stable));
        if Some(high_watermark) != old || Some(last_stable) != old_stable {
            self.wake_all();
        }
    }

    /// Publish a new log end (after appends); wakes every waiter if it moved (followers wait
    /// for it).
    pub fn publish_log_end(&self, log_end: Offset) {
        if self.log_end.replace(Some(log_end)) != Some(log_end) {
            self.wake_all();
        }
    }

    /// The partition is gone (closed or deleted): wake everyone, never park again.
    pub fn close(&self) {
        self.closed.set(true);
        self.wake_all();
    }

    fn wake_all(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for waiter in waiters {
            let _ = waiter.send(());
        }
    }

    /// Wait until the visible end (high watermark, or for read_committed the last stable
    /// offset) passes `from`, the partition closes, or `wait` elapses. `sleep` is the runtime's
    /// timer (injected so this is testable without glommio).
    pub async fn wait_for_data<F: std::future::Future<Output = ()>>(
        &self,
        from: Offset,
        isolation: Isolation,
        sleep: impl FnOnce(Duration) -> F,
        wait: Duration,
    ) {
        let end = match isolation {
            Isolation::ReadUncommitted => self.high_watermark.get(),
            Isolation::ReadCommitted => self.last_stable.get(),
            Isolation::Replica => self.log_end.get(),
        };
        if self.closed.get() || end.is_some_and(|end| end > from) {
            return;
        }
        let receiver = {
            let mut waiters = self.waiters.borrow_mut();
            waiters.retain(|w| !w.is_canceled());
            if waiters.len() >= WAITERS_MAX {
                return;
            }
            let (sender, receiver) = oneshot::channel();
            waiters.push(sender);
            receiver
        };
        let timer = sleep(wait);
        futures::pin_mut!(timer);
        match select(receiver, timer).await {
            Either::Left(_) | Either::Right(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use futures::future::{pending, ready};

    #[test]
    fn returns_at_once_when_data_is_already_there() {
        let w = PartitionWatch::default();
        w.publish(Offset(5), Offset(5));
        block_on(w.wait_for_data(
            Offset(4),
            Isolation::ReadUncommitted,
            |_| pending::<()>(),
            Duration::from_secs(60),
        ));
    }

    #[test]
    fn times_out_when_nothing_arrives() {
        let w = PartitionWatch::default();
        w.publish(Offset(5), Offset(5));
        block_on(w.wait_for_data(
            Offset(5),
            Isolation::ReadUncommitted,
            |_| ready(()),
            Duration::from_millis(1),
        ));
    }

    #[test]
    fn publish_wakes_a_parked_waiter() {
        let w = PartitionWatch::default();
        w.publish(Offset(5), Offset(5));
        let mut pool = futures::executor::LocalPool::new();
        let done = std::rc::Rc::new(Cell::new(false));
        let (w, d) = (std::rc::Rc::new(w), done.clone());
        let w2 = w.clone();
        use futures::task::LocalSpawnExt;
        pool.spawner()
            .spawn_local(async move {
                w2.wait_for_data(
                    Offset(5),
                    Isolation::ReadUncommitted,
                    |_| pending::<()>(),
                    Duration::from_secs(60),
                )
                .await;
                d.set(true);
            })
            .unwrap();
        pool.run_until_stalled();
        assert!(!done.get());
        w.publish(Offset(6), Offset(6));
        pool.run_until_stalled();
        assert!(done.get());
    }

    #[test]
    fn read_committed_waits_for_the_last_stable_offset() {
        let w = PartitionWatch::default();
        w.publish(Offset(9), Offset(3));
        block_on(w.wait_for_data(
            Offset(5),
            Isolation::ReadUncommitted,
            |_| pending::<()>(),
            Duration::from_secs(60),
        ));
        block_on(w.wait_for_data(
            Offset(5),
            Isolation::ReadCommitted,
            |_| ready(()),
            Duration::from_millis(1),
        ));
        block_on(w.wait_for_data(
            Offset(2),
            Isolation::ReadCommitted,
            |_| pending::<()>(),
            Duration::from_secs(60),
        ));
    }
}
