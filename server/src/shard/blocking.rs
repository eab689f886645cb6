//! [`BlockingJobs`]: a shard's calls on its executor's blocking thread, each run to its end and
//! counted until its answer is back, so that the shard's executor outlives every one of them.
//!
//! glommio's blocking thread panics ("failed to send response") when it finishes a job for an
//! executor that is gone. A caller that stops waiting (its client hung up, the request was
//! dropped) does not stop its job, so a shard stopping right then used to end with that panic
//! in its log. A job here belongs to a detached task of the shard, not to its caller, and the
//! shard waits for the count to reach zero before it stops.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How often a stopping shard looks whether its blocking jobs are done.
const DRAIN_POLL: Duration = Duration::from_millis(5);

/// The blocking jobs of one shard (see the module doc).
#[derive(Debug, Default)]
pub struct BlockingJobs {
    running: Cell<usize>,
}

impl BlockingJobs {
    /// Runs `call` on the executor's blocking thread and answers its result; the job is the
    /// shard's, so it runs to its end and is counted until then even if this future is dropped.
    pub async fn run<T: Send + 'static>(
        self: &Rc<Self>,
        call: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        self.running.set(self.running.get() + 1);
        let jobs = Rc::clone(self);
        let job = glommio::spawn_local(async move {
            let answer = glommio::executor().spawn_blocking(call).await;
            jobs.running.set(jobs.running.get() - 1);
            answer
        })
        .detach();
        job.await
            .expect("a blocking job's detached task is never cancelled")
    }

    /// Jobs started and not answered yet.
    pub fn running(&self) -> usize {
        self.running.get()
    }

    /// Waits until no job runs, or `within` passes; whether none runs.
    pub async fn drained(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while self.running.get() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            glommio::timer::sleep(DRAIN_POLL).await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_job_whose_caller_stopped_waiting_still_runs_to_its_end_and_is_drained() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let jobs = Rc::new(BlockingJobs::default());
                let started = Arc::new(AtomicBool::new(false));
                let release = Arc::new(AtomicBool::new(false));
                let (s, r) = (started.clone(), release.clone());
                let call = glommio::spawn_local({
                    let jobs = jobs.clone();
                    async move {
                        jobs.run(move || {
                            s.store(true, Ordering::SeqCst);
                            while !r.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            7
                        })
                        .await
                    }
                });
                while !started.load(Ordering::SeqCst) {
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                }
                // The caller goes away; the job does not.
                drop(call);
                assert_eq!(jobs.running(), 1);
                assert!(!jobs.drained(Duration::from_millis(20)).await);
                release.store(true, Ordering::SeqCst);
                assert!(jobs.drained(Duration::from_secs(5)).await);
                assert_eq!(jobs.running(), 0);
                // A caller that waits gets the answer.
                assert_eq!(jobs.run(|| 41 + 1).await, 42);
                assert_eq!(jobs.running(), 0);
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
