//! A shard's budget of bytes for one kind of work: request frames being received and served
//! (`queued.max.request.bytes`), record bytes read for Fetch responses (`fetch.read.bytes`).
//!
//! Work reserves before it allocates. When what it wants does not fit, it waits; as room
//! frees, the waiters that fit are granted in arrival order. A waiter that does not fit holds
//! back none that do: a few slow senders of large frames cannot stop small requests while room
//! remains (a large reservation waits until that much is free at once). What a [`Hold`]
//! reserved is given back when it drops (or as it shrinks).
//!
//! | call                   | when it returns                          | `held` afterwards      |
//! |------------------------|------------------------------------------|------------------------|
//! | [`ByteBudget::reserve`] | `n` fits                                 | `+ n` (never > capacity) |
//! | [`ByteBudget::try_reserve`] | at once: `None` if it does not fit    | `+ n` or unchanged     |
//! | [`Hold::overdraw`]     | at once                                  | `+ n` (may pass capacity) |
//! | [`Hold::shrink_to`], drop | at once; wakes waiters that now fit   | `- released`           |
//!
//! Single-threaded (one shard's): `Rc` and `RefCell`, no atomics. A waiter is woken by the
//! task that released the bytes, on the same thread. No `RefCell` borrow is held across an
//! `.await`: every borrow ends inside a `poll` or a `drop`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Bytes of one kind of work a shard may hold at once.
#[derive(Clone)]
pub struct ByteBudget {
    inner: Rc<RefCell<Inner>>,
}

struct Inner {
    capacity: u64,
    held: u64,
    /// Reservations that did not fit, in arrival order (none of them granted yet).
    waiting: VecDeque<Rc<Slot>>,
    /// Reservations that had to wait, since start.
    waits: u64,
    /// The most ever held at once.
    held_max: u64,
}

impl Inner {
    fn take(&mut self, bytes: u64) {
        self.held += bytes;
        self.held_max = self.held_max.max(self.held);
    }
}

/// One waiting reservation.
struct Slot {
    want: u64,
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// A budget's figures, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// The bound.
    pub capacity: u64,
    /// Bytes reserved now (past `capacity` only by [`Hold::overdraw`]).
    pub held: u64,
    /// Reservations waiting now.
    pub waiting: u64,
    /// Reservations that had to wait, since start (the bound biting).
    pub waits: u64,
    /// The most held at once, since start.
    pub held_max: u64,
}

impl ByteBudget {
    /// A budget of `capacity` bytes (at least 1).
    pub fn new(capacity: u64) -> Self {
        assert!(capacity > 0, "a budget holds something");
        ByteBudget {
            inner: Rc::new(RefCell::new(Inner {
                capacity,
                held: 0,
                waiting: VecDeque::new(),
                waits: 0,
                held_max: 0,
            })),
        }
    }

    /// The bound.
    pub fn capacity(&self) -> u64 {
        self.inner.borrow().capacity
    }

    /// Reserves `want` bytes (at most the capacity), waiting until they fit. Dropping the
    /// future before it is ready gives up its place (and its bytes, had they just been
    /// granted).
    pub fn reserve(&self, want: u64) -> Reserve {
        assert!(want <= self.capacity(), "a reservation fits the budget");
        Reserve {
            budget: self.clone(),
            want,
            slot: None,
        }
    }

    /// Reserves `want` bytes now if they fit; `None` otherwise.
    pub fn try_reserve(&self, want: u64) -> Option<Hold> {
        let mut inner = self.inner.borrow_mut();
        if inner.held + want > inner.capacity {
            return None;
        }
        inner.take(want);
        drop(inner);
        Some(self.hold(want))
    }

    /// A hold of nothing (grows by [`Hold::overdraw`] or [`Hold::absorb`]).
    pub fn empty_hold(&self) -> Hold {
        self.hold(0)
    }

    /// Its figures now.
    pub fn stats(&self) -> BudgetStats {
        let inner = self.inner.borrow();
        BudgetStats {
            capacity: inner.capacity,
            held: inner.held,
            waiting: inner.waiting.len() as u64,
            waits: inner.waits,
            held_max: inner.held_max,
        }
    }

    fn hold(&self, bytes: u64) -> Hold {
        Hold {
            budget: Some(self.clone()),
            bytes,
        }
    }

    /// Gives `bytes` back and grants the waiters that now fit, in arrival order.
    fn release(&self, bytes: u64) {
        let mut woken = Vec::new();
        {
            let mut inner = self.inner.borrow_mut();
            assert!(bytes <= inner.held, "released no more than was held");
            inner.held -= bytes;
            let mut i = 0;
            while i < inner.waiting.len() {
                let want = inner.waiting[i].want;
                if inner.held + want > inner.capacity {
                    i += 1;
                    continue;
                }
                inner.take(want);
                let slot = inner.waiting.remove(i).expect("in range");
                slot.granted.set(true);
                woken.extend(slot.waker.borrow_mut().take());
            }
        }
        // Woken after the borrow ends: a waker may poll at once (tests' executors do).
        for waker in woken {
            waker.wake();
        }
    }
}

impl std::fmt::Debug for ByteBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ByteBudget({:?})", self.stats())
    }
}

/// The future of [`ByteBudget::reserve`].
pub struct Reserve {
    budget: ByteBudget,
    want: u64,
    slot: Option<Rc<Slot>>,
}

impl Future for Reserve {
    type Output = Hold;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Hold> {
        let this = &mut *self;
        if let Some(slot) = &this.slot {
            if slot.granted.get() {
                this.slot = None;
                return Poll::Ready(this.budget.hold(this.want));
            }
            *slot.waker.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut inner = this.budget.inner.borrow_mut();
        if inner.held + this.want <= inner.capacity {
            inner.take(this.want);
            drop(inner);
            return Poll::Ready(this.budget.hold(this.want));
        }
        let slot = Rc::new(Slot {
            want: this.want,
            granted: Cell::new(false),
            waker: RefCell::new(Some(cx.waker().clone())),
        });
        inner.waiting.push_back(slot.clone());
        inner.waits += 1;
        drop(inner);
        this.slot = Some(slot);
        Poll::Pending
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        if slot.granted.get() {
            // Granted but never taken: give the bytes back (and wake whoever now fits).
            self.budget.release(slot.want);
            return;
        }
        // Not granted: it only leaves the line (it held nothing, and held back nobody).
        self.budget
            .inner
            .borrow_mut()
            .waiting
            .retain(|s| !Rc::ptr_eq(s, &slot));
    }
}

/// Bytes reserved from a budget, given back when dropped.
#[derive(Default)]
pub struct Hold {
    budget: Option<ByteBudget>,
    bytes: u64,
}

impl Hold {
    /// A hold of no budget at all (nothing to give back): where no budget applies.
    pub fn none() -> Self {
        Hold::default()
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives back all but `keep` bytes (nothing if it holds `keep` or less).
    pub fn shrink_to(&mut self, keep: u64) {
        if keep >= self.bytes {
            return;
        }
        let released = self.bytes - keep;
        self.bytes = keep;
        if let Some(budget) = &self.budget {
            budget.release(released);
        }
    }

    /// Holds `bytes` more without waiting, past the capacity if need be: memory already
    /// allocated that must be counted (a Fetch's first batch, larger than what it reserved).
    pub fn overdraw(&mut self, bytes: u64) {
        if let Some(budget) = &self.budget {
            budget.inner.borrow_mut().take(bytes);
        }
        self.bytes += bytes;
    }

    /// Takes over `other`'s bytes (both of the same budget, or `other` of none).
    pub fn absorb(&mut self, mut other: Hold) {
        let same = match (&self.budget, &other.budget) {
            (Some(a), Some(b)) => Rc::ptr_eq(&a.inner, &b.inner),
            (_, None) => true,
            (None, Some(_)) => false,
        };
        assert!(same, "holds of one budget");
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let (Some(budget), bytes @ 1..) = (&self.budget, self.bytes) {
            budget.release(bytes);
        }
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hold({} bytes)", self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use futures::task::noop_waker;

    fn poll(f: &mut Reserve) -> Option<Hold> {
        let waker = noop_waker();
        match Pin::new(f).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(hold) => Some(hold),
            Poll::Pending => None,
        }
    }

    #[test]
    fn reservations_fit_or_wait_and_small_ones_pass_a_waiting_large_one() {
        let budget = ByteBudget::new(100);
        let a = block_on(budget.reserve(60));
        let mut big = budget.reserve(50);
        assert!(poll(&mut big).is_none(), "60 + 50 > 100");
        // A small one that fits is not held back by the large one waiting.
        let mut small = budget.reserve(10);
        let small = poll(&mut small).expect("fits beside the 60");
        let mut second_big = budget.reserve(45);
        assert!(poll(&mut second_big).is_none());
        assert_eq!(budget.stats().waiting, 2);
        drop(a);
        // Room frees: granted in arrival order, as long as each fits.
        let big = poll(&mut big).expect("granted on release");
        assert!(poll(&mut second_big).is_none(), "10 + 50 + 45 > 100");
        assert_eq!((big.bytes(), small.bytes()), (50, 10));
        let stats = budget.stats();
        assert_eq!((stats.held, stats.waiting, stats.waits), (60, 1, 2));
        assert_eq!(stats.held_max, 70);
        drop((big, small));
        assert!(poll(&mut second_big).is_some());
        drop(second_big);
        assert_eq!(budget.stats().held, 0);
    }

    #[test]
    fn the_boundary_fits_and_one_byte_more_waits() {
        let budget = ByteBudget::new(100);
        let all = budget.try_reserve(100).expect("exactly the capacity fits");
        assert!(budget.try_reserve(1).is_none());
        drop(all);
        let mut one = budget.reserve(1);
        assert!(poll(&mut one).is_some());
        assert_eq!(budget.stats().waits, 0, "it never waited");
        assert_eq!(budget.stats().held_max, 100);
    }

    #[test]
    fn a_dropped_waiter_gives_up_its_place_and_its_grant() {
        let budget = ByteBudget::new(10);
        let first = budget.try_reserve(8).unwrap();
        let mut blocked = budget.reserve(5);
        assert!(poll(&mut blocked).is_none());
        drop(blocked); // leaves the line
        assert_eq!(budget.stats().waiting, 0);
        drop(first);
        // Granted but never polled, then dropped: its bytes come back.
        let held = budget.try_reserve(9).unwrap();
        let mut granted = budget.reserve(3);
        assert!(poll(&mut granted).is_none());
        drop(held);
        drop(granted);
        assert_eq!(budget.stats().held, 0);
    }

    #[test]
    fn holds_shrink_overdraw_and_absorb() {
        let budget = ByteBudget::new(100);
        let mut hold = budget.try_reserve(80).unwrap();
        hold.shrink_to(30);
        assert_eq!((hold.bytes(), budget.stats().held), (30, 30));
        hold.shrink_to(50); // never grows
        hold.overdraw(90);
        assert_eq!(budget.stats().held, 120, "past the capacity");
        assert!(budget.try_reserve(1).is_none());
        hold.absorb(budget.empty_hold());
        hold.absorb(Hold::none());
        let more = ByteBudget::new(5).empty_hold();
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut h = ByteBudget::new(1).empty_hold();
            h.absorb(ByteBudget::new(1).try_reserve(1).unwrap());
        }))
        .is_err());
        drop(more);
        drop(hold);
        assert_eq!(budget.stats().held, 0);
        let mut nothing = Hold::none();
        nothing.overdraw(7);
        nothing.shrink_to(0);
    }
}
