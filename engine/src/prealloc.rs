//! How far ahead of its data an active `.log` is allocated: a step that follows the
//! partition's write rate, bounded by a budget shared by one shard's partitions.
//!
//! Why preallocate at all: an O_DIRECT write past the allocated end must allocate blocks and
//! move the file size, which ext4 will not do without blocking, so io_uring hands such a write
//! to a worker thread; a write into allocated extents is issued inline. What that saves depends
//! on the file system: BENCHMARKS.md (issue 17, bench `engine_append_fdatasync_each`) has the
//! measurements. On xfs every durable append measured gained; on the development VM's ext4 only
//! durable 64 KiB appends gained a little, and group commits did not gain at all.
//!
//! Why not a fixed step: a fixed 16 MiB per active segment costs 16 MiB of real blocks per
//! partition as soon as it holds one byte, 80 GB for a 5,000-partition topic with a message in
//! each partition.
//!
//! Policy ([`Prealloc`]): each time the appender needs room past the allocated end, it asks for a
//! step of about [`PREALLOC_AHEAD_MS`] of writes at the rate measured since the previous request,
//! rounded up to a power of two and clamped to [`PREALLOC_STEP_MIN`]..=[`PREALLOC_STEP_MAX`];
//! a step grows at most 4x per request (a short burst does not reserve much). A partition slower
//! than about half the minimum step per `PREALLOC_AHEAD_MS` preallocates nothing: its writes
//! extend the file themselves, as Kafka's always do. So an empty partition costs no data blocks,
//! one written at a trickle costs its data, and a hot one runs ahead by up to 16 MiB.
//!
//! Budget ([`PreallocBudget`]): the bytes allocated ahead of the data by all partitions of one
//! shard. A grant beyond what is left is cut to what is left (possibly nothing: the write then
//! extends the file). A segment holds its grant until its next request, its seal, its idle
//! release (which trims the file back to its data) or its drop, whichever comes first, so
//! the budget over-counts while a grant is being filled, never under-counts.

use crate::io::{align_up, Clock, BLOCK_BYTES};
use std::cell::Cell;
use std::rc::Rc;

/// Smallest preallocation step (a partition slower than this per second preallocates nothing).
pub const PREALLOC_STEP_MIN: u64 = 64 << 10;
/// Largest preallocation step: what a hot partition runs ahead of its data.
pub const PREALLOC_STEP_MAX: u64 = 16 << 20;
/// A step covers about this long of writes at the measured rate.
pub const PREALLOC_AHEAD_MS: u64 = 1000;
/// Default budget of one shard: bytes allocated ahead of the data by all its partitions.
pub const SHARD_PREALLOC_BYTES_DEFAULT: u64 = 256 << 20;
/// Largest growth of the step from one request to the next.
const STEP_GROWTH_MAX: u64 = 4;

/// Bytes a shard's partitions may hold allocated ahead of their data (see the module doc).
/// Shared by the partitions of one shard (`Rc`, one core): never crosses threads.
#[derive(Debug)]
pub struct PreallocBudget {
    limit_bytes: u64,
    held_bytes: Cell<u64>,
}

impl PreallocBudget {
    /// A budget of `limit_bytes` (0: no partition preallocates).
    pub fn new(limit_bytes: u64) -> Rc<Self> {
        Rc::new(PreallocBudget {
            limit_bytes,
            held_bytes: Cell::new(0),
        })
    }

    /// The configured bound.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Bytes granted and not yet given back.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes.get()
    }

    /// Grants up to `want` bytes (whole blocks), less if the budget has less left.
    fn take(&self, want: u64) -> u64 {
        let left = self.limit_bytes.saturating_sub(self.held_bytes.get());
        let granted = want.min(left) / BLOCK_BYTES * BLOCK_BYTES;
        self.held_bytes.set(self.held_bytes.get() + granted);
        granted
    }

    fn give_back(&self, bytes: u64) {
        let held = self.held_bytes.get();
        assert!(bytes <= held, "giving back {bytes} of {held} held");
        self.held_bytes.set(held - bytes);
    }
}

/// The preallocation of one active segment: its step, following the write rate, and the part of
/// the shard's budget it holds (given back on drop).
pub struct Prealloc {
    budget: Rc<PreallocBudget>,
    clock: Rc<dyn Clock>,
    /// The step of the last request (0: writes extend the file).
    step: u64,
    /// Time and logical end of the last request.
    last: Option<(i64, u64)>,
    /// Bytes of the budget held (granted at the last request).
    held: u64,
}

impl std::fmt::Debug for Prealloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prealloc")
            .field("step", &self.step)
            .field("last", &self.last)
            .field("held", &self.held)
            .finish()
    }
}

impl Prealloc {
    /// A segment's preallocation drawing on `budget`, starting from `step` (the previous
    /// segment's, so a hot partition keeps its pace across a roll; 0 for a new or idle one).
    pub fn new(budget: Rc<PreallocBudget>, clock: Rc<dyn Clock>, step: u64) -> Self {
        Prealloc {
            budget,
            clock,
            step: step.min(PREALLOC_STEP_MAX),
            last: None,
            held: 0,
        }
    }

    /// The current step (0: no preallocation).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Bytes of the shard's budget this segment holds.
    pub fn held_bytes(&self) -> u64 {
        self.held
    }

    /// Where to allocate the file to before writing up to `needed` (block aligned, past the
    /// allocated end), at most `cap`: `needed` plus this segment's grant. The previous grant
    /// (now filled with data) is given back first.
    pub fn extent_end(&mut self, needed: u64, logical_end: u64, cap: u64) -> u64 {
        assert!(needed.is_multiple_of(BLOCK_BYTES));
        let now = self.clock.now().0;
        self.step = self.next_step(now, logical_end);
        self.last = Some((now, logical_end));
        self.budget.give_back(self.held);
        let room = cap.saturating_sub(needed) / BLOCK_BYTES * BLOCK_BYTES;
        self.held = self.budget.take(self.step.min(room));
        needed + self.held
    }

    /// Gives the grant back (the file was trimmed to its data or is gone).
    pub fn release(&mut self) {
        self.budget.give_back(self.held);
        self.held = 0;
    }

    /// The step for a request at `now` with the log at `end` (see the module doc).
    fn next_step(&self, now: i64, end: u64) -> u64 {
        let Some((then, end_then)) = self.last else {
            return self.step;
        };
        let elapsed_ms = now.saturating_sub(then).max(1) as u64;
        let written = end.saturating_sub(end_then);
        let at_rate = written.saturating_mul(PREALLOC_AHEAD_MS) / elapsed_ms;
        if at_rate < PREALLOC_STEP_MIN / 2 {
            return 0;
        }
        let want = align_up(at_rate)
            .next_power_of_two()
            .clamp(PREALLOC_STEP_MIN, PREALLOC_STEP_MAX);
        want.min((self.step * STEP_GROWTH_MAX).max(PREALLOC_STEP_MIN))
    }
}

impl Drop for Prealloc {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::ManualClock;

    fn setup(limit: u64) -> (Rc<PreallocBudget>, Rc<ManualClock>) {
        (PreallocBudget::new(limit), Rc::new(ManualClock::new(1_000)))
    }

    #[test]
    fn a_new_partition_preallocates_nothing_until_it_shows_a_rate() {
        let (budget, clock) = setup(1 << 30);
        let mut p = Prealloc::new(budget.clone(), clock.clone(), 0);
        assert_eq!(
            p.extent_end(4096, 100, 1 << 30),
            4096,
            "first write: no step"
        );
        clock.advance(60_000);
        assert_eq!(
            p.extent_end(8192, 4196, 1 << 30),
            8192,
            "a trickle: still none"
        );
        assert_eq!(budget.held_bytes(), 0);
    }

    #[test]
    fn the_step_grows_with_the_rate_and_shrinks_when_it_drops() {
        let (budget, clock) = setup(1 << 30);
        let mut p = Prealloc::new(budget.clone(), clock.clone(), 0);
        let mut end = 0u64;
        let mut steps = Vec::new();
        // 100 MB/s: 1 MiB every 10 ms.
        for _ in 0..8 {
            end += 1 << 20;
            clock.advance(10);
            let needed = align_up(end);
            let to = p.extent_end(needed, end, 1 << 30);
            steps.push(to - needed);
            assert_eq!(budget.held_bytes(), to - needed);
        }
        assert_eq!(
            steps,
            [
                0,
                64 << 10,
                256 << 10,
                1 << 20,
                4 << 20,
                16 << 20,
                16 << 20,
                16 << 20
            ]
        );
        // Down to 100 KB/s: a 128 KiB step (about one second of writes), at once.
        end += 100_000;
        clock.advance(1000);
        let to = p.extent_end(align_up(end), end, 1 << 30);
        assert_eq!(to - align_up(end), 128 << 10);
        // Idle for a minute: nothing ahead.
        end += 4096;
        clock.advance(60_000);
        assert_eq!(p.extent_end(align_up(end), end, 1 << 30), align_up(end));
        assert_eq!(budget.held_bytes(), 0);
    }

    #[test]
    fn grants_stop_at_the_budget_and_the_segment_end_and_come_back_on_drop() {
        let (budget, clock) = setup(1 << 20);
        let fast = |budget: &Rc<PreallocBudget>, cap: u64| {
            let mut p = Prealloc::new(budget.clone(), clock.clone(), PREALLOC_STEP_MAX);
            let to = p.extent_end(4096, 4096, cap);
            (p, to)
        };
        let (a, to) = fast(&budget, 1 << 30);
        assert_eq!(to, 4096 + (1 << 20), "the whole budget");
        let (b, to) = fast(&budget, 1 << 30);
        assert_eq!(to, 4096, "nothing left: the write extends the file");
        drop(a);
        assert_eq!(budget.held_bytes(), 0);
        let (_c, to) = fast(&budget, 64 << 10);
        assert_eq!(to, 64 << 10, "capped at the segment size");
        assert_eq!(budget.held_bytes(), (64 << 10) - 4096);
        drop(b);
    }
}
