//! A request's thread time for `request_percentage` quotas (KIP-124): Kafka measures the time a
//! request spends on its request handler thread and records it as a percentage of one thread
//! for one second (`ClientRequestQuotaManager.nanosToPercentage`). Rill's analogue is the
//! time the request's own task spends being polled on its shard's thread, plus its decoding:
//! work it hands to another shard (a partition's append) runs in that shard's task, as work
//! Kafka hands to its purgatory is not counted either.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::time::{Duration, Instant};

/// `spent` as a percentage of one thread-second, the unit a `request_percentage` bound is in
/// (100 is one whole thread).
pub fn percent(spent: Duration) -> f64 {
    spent.as_secs_f64() * 100.0
}

/// Runs `work` and returns its output with the time spent polling it (on this thread; the
/// time it waited between polls is not counted).
pub async fn polled<F: Future>(work: F) -> (F::Output, Duration) {
    let mut work = pin!(work);
    let spent = Cell::new(Duration::ZERO);
    let output = std::future::poll_fn(|cx| {
        let started = Instant::now();
        let poll = work.as_mut().poll(cx);
        spent.set(spent.get() + started.elapsed());
        poll
    })
    .await;
    (output, spent.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_second_is_a_hundred_percent() {
        assert_eq!(percent(Duration::from_secs(1)), 100.0);
        assert_eq!(percent(Duration::ZERO), 0.0);
        assert!((percent(Duration::from_millis(5)) - 0.5).abs() < 1e-9);
    }

    /// Pending on its first poll (a thread wakes it 200 ms later), ready on the next.
    struct WokenLater(bool);

    impl Future for WokenLater {
        type Output = u8;
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<u8> {
            if self.0 {
                return std::task::Poll::Ready(7);
            }
            self.0 = true;
            let waker = cx.waker().clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                waker.wake();
            });
            std::task::Poll::Pending
        }
    }

    #[test]
    fn waiting_between_polls_is_not_counted() {
        let (output, spent) = futures::executor::block_on(polled(async {
            // Busy for ~20 ms on the thread, then a wait off it.
            let busy_until = Instant::now() + Duration::from_millis(20);
            while Instant::now() < busy_until {}
            WokenLater(false).await
        }));
        assert_eq!(output, 7);
        assert!(spent >= Duration::from_millis(20), "{spent:?}");
        assert!(spent < Duration::from_millis(150), "{spent:?}");
    }
}
