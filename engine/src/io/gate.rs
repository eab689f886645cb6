//! [`FlushGate`]: one core's durable flushes in flight, and the turns of its paced reads.
//!
//! A catch-up reader's loads and a producer's flush (write + fdatasync) share the device. On a
//! device that serves requests in order (a virtio disk's backend), a flush issued behind reads
//! waits for all of them: a durable 4 KiB write took 75–107 µs alone here, 1.6–1.7 ms (p50)
//! beside back-to-back 1 MiB reads (one 1 MiB read, or four 256 KiB pieces, in flight),
//! 380–400 µs beside one 256 KiB read at a time, and 148–211 µs when each of those waited while
//! a flush was in flight, the reads still at ~1 GB/s (a C probe of O_DIRECT reads beside
//! 4 KiB O_DIRECT writes + fdatasync). A paced read ([`super::BlockFile::read_owned_paced`])
//! therefore reads one piece per turn: one paced piece in flight on the core at a time, none
//! started while a flush is in flight. A flush waits behind at most one piece, and a read that
//! has waited for a flush goes once one has ended (back-to-back flushes of many logs cannot
//! starve it).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// The durable flushes in flight on one core and its paced read in flight, shared by its logs.
#[derive(Debug, Default)]
pub struct FlushGate {
    flushes: Cell<usize>,
    /// Flushes ended so far: a waiting read goes once one has ended since it began waiting.
    ended: Cell<u64>,
    /// Whether a paced read holds its turn.
    reading: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

impl FlushGate {
    /// Marks a flush in flight until the guard drops.
    pub fn flush_started(self: &Rc<Self>) -> FlushGuard {
        self.flushes.set(self.flushes.get() + 1);
        FlushGuard(self.clone())
    }

    /// Whether a flush is in flight.
    pub fn is_flushing(&self) -> bool {
        self.flushes.get() > 0
    }

    /// A turn to read one piece: once no other paced read holds one, and no flush is in
    /// flight (or one has ended since this began waiting). The turn ends when it drops.
    pub fn read_turn(self: &Rc<Self>) -> WaitTurn {
        WaitTurn {
            gate: self.clone(),
            ended_at_start: self.ended.get(),
        }
    }

    fn wake_all(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        waiters.into_iter().for_each(Waker::wake);
    }
}

/// A flush in flight (see [`FlushGate::flush_started`]).
#[derive(Debug)]
pub struct FlushGuard(Rc<FlushGate>);

impl Drop for FlushGuard {
    fn drop(&mut self) {
        let gate = &self.0;
        assert!(gate.flushes.get() > 0, "a flush ended that never started");
        gate.flushes.set(gate.flushes.get() - 1);
        gate.ended.set(gate.ended.get() + 1);
        gate.wake_all();
    }
}

/// The future of [`FlushGate::read_turn`].
#[derive(Debug)]
pub struct WaitTurn {
    gate: Rc<FlushGate>,
    ended_at_start: u64,
}

impl Future for WaitTurn {
    type Output = ReadTurn;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ReadTurn> {
        let gate = &self.gate;
        let flush_clear = !gate.is_flushing() || gate.ended.get() != self.ended_at_start;
        if flush_clear && !gate.reading.get() {
            gate.reading.set(true);
            return Poll::Ready(ReadTurn(gate.clone()));
        }
        gate.waiters.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}

/// A paced read's turn (see [`FlushGate::read_turn`]).
#[derive(Debug)]
pub struct ReadTurn(Rc<FlushGate>);

impl Drop for ReadTurn {
    fn drop(&mut self) {
        assert!(self.0.reading.get(), "a read turn ended that was not held");
        self.0.reading.set(false);
        self.0.wake_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn a_turn_at_once_without_a_flush_or_another_read() {
        let gate = Rc::new(FlushGate::default());
        let turn = gate.read_turn().now_or_never().expect("nothing in the way");
        let mut next = gate.read_turn().boxed_local();
        assert!(
            (&mut next).now_or_never().is_none(),
            "one read turn at a time"
        );
        drop(turn);
        assert!(next.now_or_never().is_some());
    }

    #[test]
    fn a_read_waits_for_a_flush_but_goes_when_one_ends_even_if_another_is_in_flight() {
        let gate = Rc::new(FlushGate::default());
        let first = gate.flush_started();
        let mut waiting = gate.read_turn().boxed_local();
        assert!((&mut waiting).now_or_never().is_none());
        let second = gate.flush_started();
        drop(first);
        assert!(gate.is_flushing());
        let turn = waiting
            .now_or_never()
            .expect("one flush ended: no starving");
        drop(turn);
        // A new read waits behind the flush still in flight, then goes.
        let mut later = gate.read_turn().boxed_local();
        assert!((&mut later).now_or_never().is_none());
        drop(second);
        assert!(!gate.is_flushing());
        assert!(later.now_or_never().is_some());
    }
}
