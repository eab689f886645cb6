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
//! Why few, large pieces: on ext4 a durable append into preallocated (unwritten) blocks still
//! converts them to written, and fdatasync commits that change of the extent tree. An inode
//! holds 4 extents itself; past that the tree has a leaf block, and every commit journals it
//! too. On the development VM's ext4 a 4 KiB write + fdatasync took 25-50 us more in a file of
//! 7 extents than in one of 1, in some runs and not others (BENCHMARKS.md, issue 17). Each
//! grant is at least one extent unless the file system places it right after the previous one,
//! which small and odd-sized grants on a used file system seldom get: ext4 puts a small
//! allocation in whatever small gap fits it (a file under 16 blocks even in a pool shared by
//! small files).
//! So a segment's grants are few, aligned and placed with room behind them:
//! - its first write takes [`PREALLOC_STEP_MIN`] (its block in the same allocation), allocated
//!   as the start of a whole [`PREALLOC_STEP_MAX`] whose rest is given back at once (the
//!   appender's `allocate_first`), so ext4 picks a large free area and the next grants can
//!   follow it;
//! - a step grows 16x per request, and each grant ends on a multiple of its step.
//!
//! A partition written at a sustained rate allocates `[0, 64 KiB)`, `[64 KiB, 1 MiB)`,
//! `[1 MiB, 16 MiB)`, then aligned 16 MiB steps, as the fixed step did; the 4x ramp made six
//! pieces (an extending write's block, then 64 KiB to 16 MiB past it, none aligned): in
//! replays on the development VM's ext4 its file ended in 6-10 extents, this layout's mostly
//! in 2, as the fixed step's (BENCHMARKS.md).
//!
//! Policy ([`Prealloc`]): a segment's first request for room past the allocated end takes at
//! least [`PREALLOC_STEP_MIN`] (the previous segment's step when it rolled). Each later request
//! asks for a step of about [`PREALLOC_AHEAD_MS`] of writes at the rate measured since the
//! previous request, rounded up to a power of two and clamped to
//! [`PREALLOC_STEP_MIN`]..=[`PREALLOC_STEP_MAX`]; a step grows at most [`STEP_GROWTH_MAX`]x per
//! request (a short burst does not reserve much: at most 16 times what it wrote at that rate).
//! A partition slower than about half the minimum step per `PREALLOC_AHEAD_MS` preallocates
//! nothing more: its writes extend the file themselves, as Kafka's always do. So an empty
//! partition costs no data blocks, one written at a trickle costs its data and at most its
//! first step ahead (until its idle release trims it), and a hot one runs ahead by up to
//! 16 MiB.
//!
//! Budget ([`PreallocBudget`]): the bytes allocated ahead of the data by all partitions of one
//! shard. A grant beyond what is left is cut to what is left (possibly nothing: the write then
//! extends the file). A segment holds its grant until its next request, its seal, its idle
//! release (which trims the file back to its data) or its drop, whichever comes first, so
//! the budget over-counts while a grant is being filled, never under-counts.

use crate::io::{align_up, Clock, BLOCK_BYTES};
use std::cell::Cell;
use std::rc::Rc;

/// Smallest preallocation step, and what a segment's first write takes when it has no step yet
/// (a partition slower than this per second preallocates nothing more).
pub const PREALLOC_STEP_MIN: u64 = 64 << 10;
/// Largest preallocation step: what a hot partition runs ahead of its data.
pub const PREALLOC_STEP_MAX: u64 = 16 << 20;
/// A step covers about this long of writes at the measured rate.
pub const PREALLOC_AHEAD_MS: u64 = 1000;
/// Default budget of one shard: bytes allocated ahead of the data by all its partitions.
pub const SHARD_PREALLOC_BYTES_DEFAULT: u64 = 256 << 20;
/// Largest growth of the step from one request to the next (16: three grants from the smallest
/// step to the largest, so few extents; see the module doc).
pub const STEP_GROWTH_MAX: u64 = 16;

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
    /// segment's, so a hot partition keeps its pace across a roll; 0 for a new or idle one,
    /// whose first request takes [`PREALLOC_STEP_MIN`]).
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
    /// (now filled with data) is given back first. The grant ends on the next multiple of the
    /// step past `needed` (as far as the budget and `cap` allow): once the step is steady,
    /// every allocation is exactly one step at a step-aligned offset, as a fixed step's were,
    /// which ext4 places where the next one can follow (see the module doc).
    pub fn extent_end(&mut self, needed: u64, logical_end: u64, cap: u64) -> u64 {
        assert!(needed.is_multiple_of(BLOCK_BYTES));
        let now = self.clock.now().0;
        self.step = self.next_step(now, logical_end);
        self.last = Some((now, logical_end));
        self.budget.give_back(self.held);
        let ahead = match self.step {
            0 => 0,
            step => (needed / step + 1) * step - needed,
        };
        let room = cap.saturating_sub(needed) / BLOCK_BYTES * BLOCK_BYTES;
        self.held = self.budget.take(ahead.min(room));
        needed + self.held
    }

    /// Gives the grant back (the file was trimmed to its data or is gone).
    pub fn release(&mut self) {
        self.budget.give_back(self.held);
        self.held = 0;
    }

    /// The step for a request at `now` with the log at `end` (see the module doc). The first
    /// request of a segment has no rate yet: it takes the step it started from, at least the
    /// smallest step, so the segment's first write lands inside its first grant (one extent).
    fn next_step(&self, now: i64, end: u64) -> u64 {
        let Some((then, end_then)) = self.last else {
            return self.step.max(PREALLOC_STEP_MIN);
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
    use crate::types::TimestampMs;

    fn setup(limit: u64) -> (Rc<PreallocBudget>, Rc<ManualClock>) {
        (
            PreallocBudget::new(limit),
            Rc::new(ManualClock::new(TimestampMs(1_000))),
        )
    }

    #[test]
    fn a_new_partition_takes_its_first_step_then_nothing_at_a_trickle() {
        let (budget, clock) = setup(1 << 30);
        let mut p = Prealloc::new(budget.clone(), clock.clone(), 0);
        assert_eq!(
            p.extent_end(4096, 100, 1 << 30),
            PREALLOC_STEP_MIN,
            "first write: the first step, its block included (one allocation)"
        );
        assert_eq!(budget.held_bytes(), PREALLOC_STEP_MIN - 4096);
        clock.advance(60_000);
        let needed = PREALLOC_STEP_MIN + 4096;
        assert_eq!(
            p.extent_end(needed, needed - 4000, 1 << 30),
            needed,
            "a trickle: nothing more"
        );
        assert_eq!(budget.held_bytes(), 0);
    }

    /// Issue 17: every allocation may become an extent of its own, and past 4 extents each
    /// durable append on ext4 also journals a tree block. A partition written durably in 4 KiB
    /// appends at ~20 MB/s (one every ~200 us) reaches the largest step in three allocations,
    /// the first holding its first block; from then on each is one aligned 16 MiB step, as a
    /// fixed step's were.
    #[test]
    fn a_sustained_stream_allocates_few_pieces_then_aligned_steps() {
        let (budget, clock) = setup(1 << 30);
        let mut p = Prealloc::new(budget, clock.clone(), 0);
        let (mut end, mut allocated) = (0u64, 0u64);
        let mut allocations = Vec::new();
        while allocated < 64 << 20 {
            for _ in 0..5 {
                end += 4096;
                if end > allocated {
                    let to = p.extent_end(end, end, 1 << 30);
                    assert!(to > end, "every request of this stream gets a grant");
                    allocations.push((allocated, to));
                    allocated = to;
                }
            }
            clock.advance(1);
        }
        const MIB: u64 = 1 << 20;
        assert_eq!(
            allocations,
            [
                (0, PREALLOC_STEP_MIN),
                (PREALLOC_STEP_MIN, MIB),
                (MIB, 16 * MIB),
                (16 * MIB, 32 * MIB),
                (32 * MIB, 48 * MIB),
                (48 * MIB, 64 * MIB)
            ]
        );
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
            steps.push(p.step());
            assert_eq!(budget.held_bytes(), to - needed);
            assert!(to > needed && to - needed <= p.step());
            assert!(to.is_multiple_of(p.step()), "{to} ends on a step");
        }
        assert_eq!(
            steps,
            [
                64 << 10,
                1 << 20,
                16 << 20,
                16 << 20,
                16 << 20,
                16 << 20,
                16 << 20,
                16 << 20
            ]
        );
        // Down to 100 KB/s: a 128 KiB step (about one second of writes), at once.
        end += 100_000;
        clock.advance(1000);
        let to = p.extent_end(align_up(end), end, 1 << 30);
        assert_eq!(p.step(), 128 << 10);
        assert_eq!(to, align_up(end).next_multiple_of(128 << 10));
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
