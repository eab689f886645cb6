//! The router between two real glommio executors: calls and answers, back-pressure, a local
//! call, cancelling an abandoned long poll, and an owner that goes away. The executors only ever
//! wait on their own timers and channels, as the shards do (no cross-thread waker).

use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, select, Either};
use glommio::sync::Semaphore;

use super::*;
use crate::shard::rendezvous::Rendezvous;

/// What the test owner serves.
#[derive(Debug)]
enum Req {
    /// Answers `n * 10 + the serving shard`.
    Tag(u64),
    /// Never answers; may be abandoned (a long poll).
    Park,
    /// Never answers; may not be abandoned.
    Hang,
}

/// Answered when the owner is gone.
const UNAVAILABLE: u64 = u64::MAX;

/// Counts, shared by both shards' threads (read by polling: nothing here wakes a task).
#[derive(Default)]
struct Counts {
    /// Park/Hang requests that started on their owner.
    parked: AtomicUsize,
    /// Park/Hang requests whose task was dropped on their owner.
    dropped: AtomicUsize,
    /// The asking shard is done: the owner may stop.
    done: AtomicBool,
}

struct Owner {
    shard: usize,
    counts: Arc<Counts>,
}

/// Counts its drop (a request's task dropped before it answered).
struct OnDrop(Arc<Counts>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl Service<Req> for Owner {
    type Reply = u64;

    async fn serve(&self, request: Req) -> u64 {
        match request {
            Req::Tag(n) => {
                glommio::yield_if_needed().await;
                n * 10 + self.shard as u64
            }
            Req::Park | Req::Hang => {
                self.counts.parked.fetch_add(1, Ordering::SeqCst);
                let _dropped = OnDrop(self.counts.clone());
                // Wakeable (glommio drops a task nothing can wake), never woken.
                glommio::timer::sleep(Duration::from_secs(3600)).await;
                unreachable!("woken after an hour")
            }
        }
    }

    fn abandon_unheard(request: &Req) -> bool {
        matches!(request, Req::Park)
    }
}

/// Waits (polling on this executor's timer) until `cond` holds; panics after 10 s.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

/// Runs `body` on each of two shards joined by a router mesh of `capacity` and serving with
/// `permits`; each shard stops serving and leaves when its body returns.
fn two_shards<F, Fut>(capacity: usize, permits: u64, body: F)
where
    F: Fn(usize, Router<Req, u64>, Rc<Owner>, Arc<Counts>) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let mut mesh = RouterMesh::<Req, u64>::new(2, capacity);
    let rendezvous = Arc::new(Rendezvous::new(2));
    let counts = Arc::new(Counts::default());
    let executors: Vec<_> = (0..2)
        .map(|shard| {
            let ends = mesh.take(shard);
            let (rendezvous, counts, body) = (rendezvous.clone(), counts.clone(), body.clone());
            glommio::LocalExecutorBuilder::default()
                .io_memory(256 << 10)
                .spawn(move || async move {
                    let links = ends.connect(&rendezvous).expect("both shards connect");
                    let (router, inbox) = Router::over(links);
                    let owner = Rc::new(Owner {
                        shard,
                        counts: counts.clone(),
                    });
                    let serving = serve(inbox, owner.clone(), Rc::new(Semaphore::new(permits)));
                    body(shard, router, owner, counts).await;
                    serving.stop().await; // as a leaving shard does
                })
                .unwrap()
        })
        .collect();
    for executor in executors {
        executor.join().unwrap();
    }
}

/// Shard 1 serves until shard 0 is done.
async fn serve_until_done(counts: &Counts) {
    eventually("the asking shard to finish", || {
        counts.done.load(Ordering::SeqCst)
    })
    .await;
}

#[test]
fn calls_reach_their_owner_and_each_answer_its_own_caller_under_back_pressure() {
    // Two messages per channel and two requests served at once, for 500 concurrent calls.
    two_shards(2, 2, |shard, router, owner, counts| async move {
        if shard == 1 {
            return serve_until_done(&counts).await;
        }
        let calls = (0..500u64).map(|n| {
            let (router, owner) = (&router, &*owner);
            async move { (n, router.call(1, owner, Req::Tag(n), || UNAVAILABLE).await) }
        });
        for (n, answer) in join_all(calls).await {
            assert_eq!(
                answer,
                n * 10 + 1,
                "served on shard 1, answered to its own caller"
            );
        }
        let local = router.call(0, &*owner, Req::Tag(7), || UNAVAILABLE).await;
        assert_eq!(local, 70, "a call to this shard is served here");
        assert_eq!(router.peers().collect::<Vec<_>>(), vec![1]);
        counts.done.store(true, Ordering::SeqCst);
    });
}

#[test]
fn an_abandoned_long_poll_is_dropped_on_its_owner_and_a_hang_is_not() {
    two_shards(4, 16, |shard, router, owner, counts| async move {
        if shard == 1 {
            return serve_until_done(&counts).await;
        }
        for (request, abandonable) in [(Req::Hang, false), (Req::Park, true)] {
            let before = counts.dropped.load(Ordering::SeqCst);
            let started = counts.parked.load(Ordering::SeqCst);
            let call = Box::pin(router.call(1, &*owner, request, || UNAVAILABLE));
            let timer = Box::pin(async {
                eventually("the request to start", || {
                    counts.parked.load(Ordering::SeqCst) > started
                })
                .await;
            });
            match select(call, timer).await {
                Either::Left((answer, _)) => panic!("answered {answer}"),
                Either::Right(((), call)) => drop(call), // the caller stops waiting
            }
            if abandonable {
                eventually("the owner to drop the abandoned call", || {
                    counts.dropped.load(Ordering::SeqCst) > before
                })
                .await;
            } else {
                glommio::timer::sleep(Duration::from_millis(50)).await;
                assert_eq!(counts.dropped.load(Ordering::SeqCst), before, "runs on");
            }
        }
        // The stream still works, and a stale cancel or answer harms nobody.
        let answer = router.call(1, &*owner, Req::Tag(3), || UNAVAILABLE).await;
        assert_eq!(answer, 31);
        counts.done.store(true, Ordering::SeqCst);
    });
}

#[test]
fn calls_waiting_on_an_owner_that_is_gone_answer_unavailable() {
    two_shards(4, 16, |shard, router, owner, counts| async move {
        if shard == 1 {
            // Leave (the executor ends) as soon as shard 0's call is being served.
            eventually("the call to arrive", || {
                counts.parked.load(Ordering::SeqCst) == 1
            })
            .await;
            return;
        }
        let started = Instant::now();
        let answer = router.call(1, &*owner, Req::Hang, || UNAVAILABLE).await;
        assert_eq!(answer, UNAVAILABLE, "a call in flight");
        let answer = router.call(1, &*owner, Req::Tag(1), || UNAVAILABLE).await;
        assert_eq!(answer, UNAVAILABLE, "a later call");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            counts.dropped.load(Ordering::SeqCst),
            1,
            "the owner dropped it"
        );
    });
}
