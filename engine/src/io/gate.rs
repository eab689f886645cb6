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
//!
//! A turn grants at most [`FlushGate::piece_bytes`] (`rill.read.ahead.hold.piece.bytes`): what
//! a flush may find ahead of it on the device. A flush arriving at a random moment waits for
//! the rest of the piece in flight, and a read that waited goes right after a flush ends, so
//! under a steady producer the next flush nearly always finds one. With 256 KiB pieces a flush
//! took 426–447 µs beside a catch-up reader against ~190 µs alone, so at 2,000 flushes/s
//! producers queued behind the flush loop (mailbox wait 139–151 µs); with 128 KiB pieces
//! 306–343 µs (mailbox 26–45 µs), the reader at 503–564 MB/s instead of 561–592; 64 KiB and
//! 32 KiB shortened flushes further but slowed the reader to 231–404 MB/s without lowering the
//! producer's p99 (development sweep of the mixed bench, cold reads, 2026-12-01 16:09–16:16;
//! BENCHMARKS.md has the figures of record).
//!
//! The gate is held through the whole flush, its fdatasync too: reads started once the write
//! completed delayed the fdatasync as much (on ext4 it commits the journal then, and those
//! writes queue behind the reads): a C probe at 2,000 flushes/s beside one paced reader
//! measured a flush at 173–419 µs held through the fdatasync, 241–940 µs held through the
//! write only (32–256 KiB pieces).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Default of [`FlushGate::piece_bytes`]: see the module doc and BENCHMARKS.md (mixed workload).
pub const PIECE_BYTES_DEFAULT: usize = 128 << 10;

/// The durable flushes in flight on one core and its paced read in flight, shared by its logs.
#[derive(Debug)]
pub struct FlushGate {
    flushes: Cell<usize>,
    /// Flushes ended so far: a waiting read goes once one has ended since it began waiting.
    ended: Cell<u64>,
    /// Whether a paced read holds its turn.
    reading: Cell<bool>,
    /// Largest piece one turn grants.
    piece_bytes: Cell<usize>,
    /// Turns granted so far.
    turns: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
}

impl Default for FlushGate {
    fn default() -> Self {
        FlushGate {
            flushes: Cell::new(0),
            ended: Cell::new(0),
            reading: Cell::new(false),
            piece_bytes: Cell::new(PIECE_BYTES_DEFAULT),
            turns: Cell::new(0),
            waiters: RefCell::new(Vec::new()),
        }
    }
}

impl FlushGate {
    /// Sets the largest piece a turn grants (`rill.read.ahead.hold.piece.bytes`); a multiple
    /// of the 4 KiB block, at least one block.
    pub fn set_piece_bytes(&self, bytes: usize) {
        assert!(
            bytes > 0 && bytes.is_multiple_of(super::BLOCK_BYTES as usize),
            "a piece is whole blocks: {bytes}"
        );
        self.piece_bytes.set(bytes);
    }

    /// The largest piece one turn grants.
    pub fn piece_bytes(&self) -> usize {
        self.piece_bytes.get()
    }

    /// Read turns granted so far (one per paced piece).
    pub fn turns(&self) -> u64 {
        self.turns.get()
    }

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
            gate.turns.set(gate.turns.get() + 1);
            return Poll::Ready(ReadTurn(gate.clone()));
        }
        gate.waiters.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}

/// A paced read's turn (see [`FlushGate::read_turn`]): one piece of at most
/// [`Self::piece_bytes`] in flight.
#[derive(Debug)]
pub struct ReadTurn(Rc<FlushGate>);

impl ReadTurn {
    /// The most this turn may read in one piece.
    pub fn piece_bytes(&self) -> usize {
        self.0.piece_bytes()
    }
}

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

    #[test]
    fn a_turn_grants_at_most_the_piece_size() {
        let gate = Rc::new(FlushGate::default());
        let turn = gate.read_turn().now_or_never().unwrap();
        assert_eq!(turn.piece_bytes(), PIECE_BYTES_DEFAULT);
        drop(turn);
        gate.set_piece_bytes(4096);
        let turn = gate.read_turn().now_or_never().unwrap();
        assert_eq!(turn.piece_bytes(), 4096);
        assert_eq!(gate.turns(), 2);
    }

    #[test]
    #[should_panic(expected = "whole blocks")]
    fn a_piece_is_whole_blocks() {
        FlushGate::default().set_piece_bytes(5000);
    }

    #[test]
    fn a_flush_arriving_mid_piece_stops_the_next_piece_until_it_ends() {
        let gate = Rc::new(FlushGate::default());
        let piece = gate.read_turn().now_or_never().unwrap();
        let flushing = gate.flush_started(); // the piece is on the device: the flush waits on it
        let mut next = gate.read_turn().boxed_local();
        assert!((&mut next).now_or_never().is_none(), "a piece in flight");
        drop(piece);
        assert!(
            (&mut next).now_or_never().is_none(),
            "no piece starts while the flush is in flight"
        );
        drop(flushing);
        assert!(
            next.now_or_never().is_some(),
            "the flush ended: the read goes"
        );
    }

    #[test]
    fn a_storm_of_overlapping_flushes_never_starves_a_read() {
        let gate = Rc::new(FlushGate::default());
        let mut in_flight = gate.flush_started();
        for _ in 0..100 {
            let mut waiting = gate.read_turn().boxed_local();
            assert!((&mut waiting).now_or_never().is_none());
            // The next flush starts before the previous one ends: always one in flight.
            let next = gate.flush_started();
            drop(std::mem::replace(&mut in_flight, next));
            assert!(gate.is_flushing());
            let turn = waiting
                .now_or_never()
                .expect("one flush ended since it waited");
            drop(turn);
        }
        assert_eq!(gate.turns(), 100);
    }
}
