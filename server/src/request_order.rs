//! The order of one connection's requests, for the steps that must keep it although the
//! requests run as concurrent tasks: a transactional Produce re-sends its verified appends
//! (KIP-890, `handler/produce_txn.rs`) only once every earlier one of the connection is done.
//!
//! Kafka serves a connection one request at a time (the channel is muted until the response
//! is sent), so a producer's appends reach a partition in request order. Here each request
//! takes a [`Turn`] when it arrives, and [`Turn::earlier_done`] resolves once every turn
//! taken before it has ended:
//!
//! | turns taken | ended    | `earlier_done` of |
//! |-------------|----------|-------------------|
//! | 1, 2, 3     | none     | 1 only            |
//! | 1, 2, 3     | 1        | 1, 2              |
//! | 1, 2, 3     | 2        | 1 only (1 is open) |
//! | 1, 2, 3     | 1, 2     | 1, 2, 3           |
//!
//! A turn ends when it is dropped, so a request that fails, panics or is cancelled never holds
//! later ones back. Same thread only: `Rc` and `RefCell`s borrowed within one call, never
//! across an `.await`; no channels (a waiter's waker is kept and woken when its turn comes).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One connection's turns (see the module doc).
#[derive(Debug, Default)]
pub struct RequestOrder {
    shared: Rc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    /// The next turn's number.
    next: Cell<u64>,
    /// Turns taken and not yet ended (at most the connection's requests in flight).
    open: RefCell<BTreeSet<u64>>,
    /// Turns waiting in [`Turn::earlier_done`], with who to wake (one each).
    waiting: RefCell<BTreeMap<u64, Waker>>,
}

impl Shared {
    /// Whether no turn before `id` is open.
    fn first(&self, id: u64) -> bool {
        self.open.borrow().first().is_none_or(|&first| first >= id)
    }

    /// Wakes the first open turn if it waits (only it can have become ready).
    fn wake_first(&self) {
        let Some(first) = self.open.borrow().first().copied() else {
            return;
        };
        let waker = self.waiting.borrow_mut().remove(&first);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl RequestOrder {
    /// The next request's turn, after every turn taken so far.
    pub fn take(&self) -> Turn {
        let id = self.shared.next.get();
        self.shared.next.set(id + 1);
        self.shared.open.borrow_mut().insert(id);
        Turn {
            shared: self.shared.clone(),
            id,
        }
    }
}

/// A request's place in its connection's order; ends when dropped.
#[derive(Debug)]
pub struct Turn {
    shared: Rc<Shared>,
    id: u64,
}

impl Turn {
    /// Resolves once every turn taken before this one has ended.
    pub fn earlier_done(&self) -> EarlierDone<'_> {
        EarlierDone { turn: self }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.shared.waiting.borrow_mut().remove(&self.id);
        let removed = self.shared.open.borrow_mut().remove(&self.id);
        assert!(removed, "a turn ends once");
        self.shared.wake_first();
    }
}

/// [`Turn::earlier_done`].
#[derive(Debug)]
pub struct EarlierDone<'a> {
    turn: &'a Turn,
}

impl Future for EarlierDone<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let (shared, id) = (&self.turn.shared, self.turn.id);
        if shared.first(id) {
            shared.waiting.borrow_mut().remove(&id);
            return Poll::Ready(());
        }
        // One waker per turn, replaced on each poll: the map stays as small as the open turns.
        shared.waiting.borrow_mut().insert(id, cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn ready(turn: &Turn) -> bool {
        turn.earlier_done().now_or_never().is_some()
    }

    #[test]
    fn a_lone_turn_goes_at_once() {
        let order = RequestOrder::default();
        let one = order.take();
        assert!(ready(&one));
        drop(one);
        assert!(ready(&order.take()), "an ended turn holds nothing back");
    }

    #[test]
    fn a_turn_waits_for_every_earlier_one() {
        let order = RequestOrder::default();
        let (one, two, three) = (order.take(), order.take(), order.take());
        assert!(ready(&one));
        assert!(!ready(&two));
        assert!(!ready(&three));
        drop(two); // ended first (it failed, say): three still waits for one
        assert!(!ready(&three));
        drop(one);
        assert!(ready(&three));
    }

    /// The earlier request failed its verification, or was cancelled: its turn ended when it
    /// was dropped, and the waiting one is woken.
    #[test]
    fn an_earlier_turn_dropped_wakes_the_next() {
        let order = RequestOrder::default();
        let (one, two) = (order.take(), order.take());
        let woken = Arc::new(AtomicBool::new(false));
        let waker = waker_setting(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut wait = Box::pin(two.earlier_done());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        assert!(wait.as_mut().poll(&mut cx).is_pending(), "polled again");
        assert_eq!(order.shared.waiting.borrow().len(), 1, "one waker per turn");
        drop(one);
        assert!(woken.load(Ordering::Relaxed));
        assert!(wait.as_mut().poll(&mut cx).is_ready());
        drop(wait);
        drop(two);
        assert!(order.shared.open.borrow().is_empty());
        assert!(order.shared.waiting.borrow().is_empty());
    }

    /// A waiting turn that is itself dropped (its request cancelled) leaves no waker behind
    /// and does not hold back the turns after it.
    #[test]
    fn a_waiting_turn_cancelled_leaves_nothing() {
        let order = RequestOrder::default();
        let (one, two, three) = (order.take(), order.take(), order.take());
        let waker = waker_setting(Arc::new(AtomicBool::new(false)));
        let mut cx = Context::from_waker(&waker);
        {
            let mut wait = Box::pin(two.earlier_done());
            assert!(wait.as_mut().poll(&mut cx).is_pending());
        }
        drop(two);
        assert!(order.shared.waiting.borrow().is_empty());
        drop(one);
        assert!(ready(&three));
    }

    /// A waker that sets `flag` when woken.
    fn waker_setting(flag: Arc<AtomicBool>) -> Waker {
        struct Flag(Arc<AtomicBool>);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        Waker::from(Arc::new(Flag(flag)))
    }
}
