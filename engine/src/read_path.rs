//! Reads of a [`PartitionLog`]: the tail from its batch cache, cold bytes through the shard's
//! [`ReadCache`] with sequential read-ahead, so a catch-up consumer never waits on the disk
//! between two fetches while the disk keeps up.
//!
//! | where the batch holding `from` is | served from | copies of record bytes |
//! |---|---|---|
//! | in the batch cache (the newest appends) | the appended `Bytes` | none |
//! | a batch that left the batch cache, still in the read cache (write-through) | the appended `Bytes` | none |
//! | a sealed segment, or the active one below its settled tail block | a cached extent | one per load: DMA buffer -> `Bytes` |
//! | the active segment's unsettled tail, not in the batch cache | a direct read ([`PartitionLog::read_from_segment`]) | one, plus the appender's pending bytes |
//!
//! An extent spans index entries (batch starts), about [`EXTENT_BYTES`], never past the
//! *settled* end of its segment: a sealed segment's size, or the active segment's tail block
//! start once its background writes are settled. Nothing below that is ever written again
//! (the appender only rewrites its tail block), so a read in flight there can never see a
//! stale or torn byte; the simulated disk checks it ([`crate::io::BlockFile::read_owned`]).
//!
//! Read-ahead: a read first issues the loads of the extents it may need (up to its
//! `max_bytes`, at most [`READ_AHEAD_BYTES`]), all in flight at once, then serves from them in
//! order. A read that starts where the previous one ended is sequential: its window is
//! [`READ_AHEAD_BYTES`] whatever its `max_bytes`, and it is topped up again from where the read
//! stopped, so the next fetch finds its bytes loaded or loading. Each load is then driven to
//! its end on its own ([`crate::io::BlockFile::run_detached`]): its copy and CRC checks run when
//! its bytes arrive, while the consumer digests the previous response, not inside the fetch
//! that needs them.
//!
//! Held read-ahead ([`PartitionLog::hold_read_ahead`], while producers wait on flushes): a
//! sequential reader still reads ahead, but with at most one load of its window in flight at a
//! time ([`HELD_LOADS_IN_FLIGHT`]), each paced ([`crate::io::BlockFile::read_owned_paced`]):
//! the core's paced pieces go to the device one at a time, none started while one of its
//! flushes is in flight ([`crate::io::gate::FlushGate`]), so the next flush waits behind at
//! most one piece, while the next fetch's bytes still load as the client digests this one.

use crate::batch::BatchHeader;
use crate::error::EngineError;
use crate::io::{align_down, align_up, BlockFile, Storage};
use crate::partition_log::{PartitionLog, ReadBatches};
use crate::read_cache::{Extent, Found, Load, LoadError};
use crate::segment::Segment;
use crate::types::Offset;
use bytes::Bytes;
use futures::future::{Either, LocalBoxFuture};
use futures::FutureExt;
use std::rc::Rc;

/// Nominal size of one extent (one range read from disk): it ends at the last index entry within
/// this many bytes of its start (or at the next one, for a larger batch).
pub const EXTENT_BYTES: u64 = 1 << 20;
/// How far a sequential reader's loads run ahead of it.
pub const READ_AHEAD_BYTES: usize = 4 << 20;
/// Most extents issued by one read (bounds the work of a read with tiny extents).
const READ_AHEAD_EXTENTS_MAX: usize = 16;
/// Loads of one log in flight at once while its read-ahead is held: its pieces are read one
/// at a time anyway (paced), the second keeps the next piece queued behind the first's last.
pub const HELD_LOADS_IN_FLIGHT: usize = 2;

/// What [`PartitionLog::extent_for`] could get for an offset.
enum Had {
    /// The extent holding it.
    Extent(Rc<Extent>),
    /// Not cached nor loading, and not to be loaded now.
    Missing,
    /// No extent can hold it (past the settled end, or its load failed): read it directly.
    Unsettled,
}

/// The planned bounds of an extent: file positions of two batch starts and their offsets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExtentPlan {
    /// Index of the segment in the log.
    segment: usize,
    first: Offset,
    end: Offset,
    start_pos: u64,
    end_pos: u64,
}

impl<S: Storage> PartitionLog<S> {
    /// Whole batches from the one containing `from`, below the high watermark, up to `max_bytes`
    /// but at least one whole batch if any (KIP-74). Tail reads come from the batch cache,
    /// cold ones from the shard's read cache (see the module doc).
    pub async fn read(
        &mut self,
        from: Offset,
        max_bytes: usize,
    ) -> Result<ReadBatches, EngineError> {
        let hw = self.positions.high_watermark();
        self.read_below(from, max_bytes, hw).await
    }

    /// [`Self::read`] with batches starting below `limit` (at most the high watermark): the
    /// high watermark for read_uncommitted, the last stable offset for read_committed.
    pub(crate) async fn read_below(
        &mut self,
        from: Offset,
        max_bytes: usize,
        limit: Offset,
    ) -> Result<ReadBatches, EngineError> {
        assert!(limit <= self.positions.high_watermark());
        self.read_below_end(from, max_bytes, limit).await
    }

    /// [`Self::read_below`] with any `limit` up to the log end (a follower's fetch reads what
    /// is not replicated yet; consumers never get past the high watermark).
    pub(crate) async fn read_below_end(
        &mut self,
        from: Offset,
        max_bytes: usize,
        limit: Offset,
    ) -> Result<ReadBatches, EngineError> {
        self.check_usable()?;
        self.check_in_range(from)?;
        assert!(limit <= self.positions.log_end());
        let sequential = self.reads_ahead_from(from);
        let chunks = self
            .read_past_compaction(from, limit, max_bytes, sequential)
            .await?;
        if let Some(last) = chunks.last() {
            self.last_read_end = Some(end_of_chunk(last));
        }
        debug_assert!(chunks
            .windows(2)
            .all(|w| end_of_chunk(&w[0]) <= BatchHeader::view(&w[1]).unwrap().base()));
        Ok(ReadBatches {
            chunks,
            high_watermark: self.positions.high_watermark(),
            log_start_offset: self.positions.log_start(),
        })
    }

    /// Reads from the batch cache or cold, and goes on where compaction would leave a plain
    /// read answering badly:
    /// - nothing at `from` in its segment (its tail was compacted away): the next segment's
    ///   batches, not an empty answer;
    /// - only batches without records (empty headers compaction keeps to mark a range's end):
    ///   also the next batch that holds records, so no client takes the answer for "nothing up
    ///   to the high watermark" (kafkajs does).
    async fn read_past_compaction(
        &mut self,
        from: Offset,
        limit: Offset,
        max_bytes: usize,
        sequential: bool,
    ) -> Result<Vec<Bytes>, EngineError> {
        let (mut chunks, mut at) = (Vec::new(), from);
        while at < limit {
            let budget = max_bytes.saturating_sub(chunks.iter().map(Bytes::len).sum());
            let read = if self.cache.covers(at) {
                self.cache.read(at, limit, budget)
            } else {
                self.read_cold(at, limit, budget, sequential).await?
            };
            let Some(last) = read.last() else {
                let i = self.segment_index_for(at);
                match self.segments.get(i + 1) {
                    Some(next) => at = next.base,
                    None => break,
                }
                continue;
            };
            at = end_of_chunk(last);
            chunks.extend(read);
            if chunks.iter().any(|c| holds_records(c)) {
                break;
            }
        }
        Ok(chunks)
    }

    /// Holds (or releases) read-ahead: while held, a read issues a load only while fewer than
    /// [`HELD_LOADS_IN_FLIGHT`] of the extents it walks are loading, and its loads are paced
    /// (one piece at a time on the core, none started while a flush is in flight). The
    /// partition's owner holds it while producers wait for their appends to be made durable: a
    /// sequential reader's window of loads (up to [`READ_AHEAD_BYTES`], issued at once) would
    /// otherwise queue on the device ahead of the next flush's write and fdatasync; loading
    /// ahead still keeps the reader from waiting on the disk at every fetch.
    pub fn hold_read_ahead(&mut self, held: bool) {
        self.read_ahead_held = held;
    }

    /// Whether a read from `from` loads ahead: it starts where the previous read ended.
    fn reads_ahead_from(&self, from: Offset) -> bool {
        self.last_read_end == Some(from)
    }

    /// Issues the loads a read from `from` needs, without waiting on them: `Some(loaded)` when
    /// some of the extents it would serve (up to `max_bytes`) are still loading (a read now
    /// would wait on the disk; after `loaded` it finds them in memory), `None` when a read now
    /// would not wait on a load. Lets the partition's owner serve other requests (appends)
    /// while the disk reads.
    pub async fn prepare_read(
        &mut self,
        from: Offset,
        max_bytes: usize,
    ) -> Option<LocalBoxFuture<'static, ()>> {
        let usable = self.check_usable().is_ok() && self.check_in_range(from).is_ok();
        if !usable || self.cache.covers(from) {
            return None;
        }
        let sequential = self.reads_ahead_from(from);
        self.read_ahead(from, read_window(max_bytes, sequential))
            .await;
        let log = self.read_cache_log;
        let (mut offset, mut bytes, mut loading) = (from, 0usize, Vec::new());
        while bytes < max_bytes.max(1) && offset < self.positions.high_watermark() {
            let Some((end, size)) = self.read_cache.entry_covering(log, offset) else {
                break;
            };
            if let Some(load) = self.read_cache.loading(log, offset) {
                if load.peek().is_none() {
                    loading.push(load);
                }
            }
            (offset, bytes) = (end, bytes + size);
        }
        if loading.is_empty() {
            return None;
        }
        Some(futures::future::join_all(loading).map(|_| ()).boxed_local())
    }

    /// Serves `from` out of extents, else reads it directly. The loads this read needs (up to
    /// [`READ_AHEAD_BYTES`] of them) are issued together first; a sequential reader's window
    /// is topped up after.
    async fn read_cold(
        &mut self,
        from: Offset,
        hw: Offset,
        max_bytes: usize,
        sequential: bool,
    ) -> Result<Vec<Bytes>, EngineError> {
        self.read_ahead(from, read_window(max_bytes, sequential))
            .await;
        let (mut chunks, mut total, mut next) = (Vec::new(), 0usize, from);
        while next < hw && total < max_bytes {
            let first = chunks.is_empty();
            if !first && self.cache.covers(next) {
                // Caught up with the tail cache (written extents end where it starts): the
                // rest comes from there, within what is left of the budget.
                let rest = self.cache.read(next, hw, max_bytes - total);
                if rest.first().is_some_and(|b| b.len() <= max_bytes - total) {
                    next = end_of_chunk(rest.last().expect("not empty"));
                    chunks.extend(rest);
                }
                break;
            }
            let extent = match self.extent_for(next, first).await? {
                Had::Extent(extent) => extent,
                Had::Missing => break,
                Had::Unsettled if first => {
                    return self.read_from_segment(from, hw, max_bytes).await
                }
                Had::Unsettled => {
                    // The rest lies in the active segment's unsettled tail: read it directly,
                    // within what is left of the budget.
                    let rest = self.read_from_segment(next, hw, max_bytes - total).await?;
                    if rest.iter().map(Bytes::len).sum::<usize>() <= max_bytes - total {
                        chunks.extend(rest);
                    }
                    return Ok(chunks);
                }
            };
            let Some((bytes, after)) = extent.take(next, hw, max_bytes - total, first) else {
                if !extent.holds_from(next) && next < extent.end() {
                    next = extent.end(); // a gap compaction left: on to the next extent
                    continue;
                }
                break;
            };
            total += bytes.len();
            chunks.push(bytes);
            next = after;
        }
        if chunks.is_empty() {
            return self.read_from_segment(from, hw, max_bytes).await;
        }
        if sequential {
            self.read_ahead(next, READ_AHEAD_BYTES).await;
        }
        Ok(chunks)
    }

    /// The extent holding `offset`: cached, or loading (awaited), or, if `load_if_missing`,
    /// loaded now. A failed load is [`Had::Unsettled`]: the direct read reports its error.
    async fn extent_for(
        &mut self,
        offset: Offset,
        load_if_missing: bool,
    ) -> Result<Had, EngineError> {
        let log = self.read_cache_log;
        let (first, load) = match self.read_cache.find(log, offset) {
            Some(Found::Ready(extent)) => return Ok(Had::Extent(extent)),
            Some(Found::Loading(first, load)) => (first, load),
            None => {
                let Some(plan) = self.plan_extent(offset).await? else {
                    return Ok(Had::Unsettled);
                };
                if !load_if_missing {
                    return Ok(Had::Missing);
                }
                (plan.first, self.start_load(&plan).0)
            }
        };
        let outcome = load.clone().await;
        self.read_cache.finish(log, first, &load, &outcome);
        match outcome {
            Ok(extent) if extent.covers(offset) => Ok(Had::Extent(extent)),
            Ok(_) => Ok(Had::Unsettled),
            Err(e) => {
                tracing::debug!(dir = %self.dir.display(), error = ?e, "extent load failed; reading directly");
                Ok(Had::Unsettled)
            }
        }
    }

    /// Issues the loads of the extents within `window` bytes from `from` that are not cached
    /// or loading yet, stopping at the batch cache, the settled end of the log, or when the
    /// cache has no room. Failures only end the read-ahead (the reads report them).
    /// While read-ahead is held, stops once [`HELD_LOADS_IN_FLIGHT`] of those extents are
    /// loading.
    async fn read_ahead(&mut self, from: Offset, window: usize) {
        let log = self.read_cache_log;
        let in_flight_max = if self.read_ahead_held {
            HELD_LOADS_IN_FLIGHT
        } else {
            usize::MAX
        };
        let (mut offset, mut ahead, mut in_flight) = (from, 0usize, 0usize);
        for _ in 0..READ_AHEAD_EXTENTS_MAX {
            let done =
                ahead >= window || offset >= self.positions.log_end() || self.cache.covers(offset);
            if done {
                break;
            }
            if let Some((end, bytes)) = self.read_cache.entry_covering(log, offset) {
                let loading = self.read_cache.loading(log, offset);
                in_flight += usize::from(loading.is_some_and(|load| load.peek().is_none()));
                (offset, ahead) = (end, ahead + bytes);
                continue;
            }
            if in_flight >= in_flight_max {
                break;
            }
            let Ok(Some(plan)) = self.plan_extent(offset).await else {
                break;
            };
            let (load, admitted) = self.start_load(&plan);
            if !admitted {
                break;
            }
            in_flight += usize::from(load.peek().is_none());
            (offset, ahead) = (plan.end, ahead + (plan.end_pos - plan.start_pos) as usize);
        }
    }

    /// Plans the extent holding `offset`: opens its segment (loading its indexes) and, for the
    /// active one, settles its background writes first. `None` if `offset` lies past the
    /// settled end.
    async fn plan_extent(&mut self, offset: Offset) -> Result<Option<ExtentPlan>, EngineError> {
        let i = self.segment_index_for(offset);
        self.ensure_open(i).await?;
        let segment = &self.segments[i];
        let settled_end = if i + 1 == self.segments.len() {
            let file = segment.file.as_ref().expect("an open segment has a file");
            file.settle().await.map_err(EngineError::from_io)?;
            segment
                .appender
                .as_ref()
                .map_or(align_down(segment.size_bytes), |a| a.tail_start())
        } else {
            segment.size_bytes
        };
        Ok(plan_in(segment, i, offset, settled_end))
    }

    /// Starts loading `plan` (its read is issued before this returns) and admits it to the
    /// read cache if it fits; returns the load and whether it was admitted.
    fn start_load(&self, plan: &ExtentPlan) -> (Load, bool) {
        let segment = &self.segments[plan.segment];
        let file = segment.file.as_ref().expect("a planned segment is open");
        let read_pos = align_down(plan.start_pos);
        let read_len = (align_up(plan.end_pos) - read_pos) as usize;
        // Held (producers wait on flushes): one piece at a time, none while a flush is in
        // flight, so a flush waits behind at most one piece of it.
        let read = if self.read_ahead_held {
            let gate = self.read_cache.flush_gate().clone();
            Either::Left(file.read_owned_paced(read_pos, read_len, gate))
        } else {
            Either::Right(file.read_owned(read_pos, read_len))
        };
        let skip = (plan.start_pos - read_pos) as usize;
        let want = skip + (plan.end_pos - plan.start_pos) as usize;
        let (first, end) = (plan.first, plan.end);
        let may_have_gaps = segment.may_have_gaps;
        let load = async move {
            let bytes = read
                .await
                .map_err(|e| LoadError::from_engine(EngineError::from_io(e)))?;
            if bytes.len() < want {
                let why = format!("segment shorter than its size at offset {first}");
                return Err(LoadError::Corrupt(why));
            }
            let extent = Extent::parse_in(bytes.slice(..want), skip, first, end, may_have_gaps);
            extent.map(Rc::new).map_err(LoadError::from_engine)
        }
        .boxed_local()
        .shared();
        let log = self.read_cache_log;
        let admitted = self
            .read_cache
            .insert_loading(log, first, end, read_len, load.clone());
        // One poll issues the read (io_uring submission), so it runs while we go on; then the
        // load is driven on its own, so its copy and checks are done when its bytes arrive
        // (while the client digests the previous response), not by the read that needs it.
        if admitted {
            match load.clone().now_or_never() {
                Some(outcome) => self.read_cache.finish(log, first, &load, &outcome),
                None => {
                    let (cache, mine) = (self.read_cache.clone(), load.clone());
                    file.run_detached(
                        async move {
                            let outcome = mine.clone().await;
                            cache.finish(log, first, &mine, &outcome);
                        }
                        .boxed_local(),
                    );
                }
            }
        }
        (load, admitted)
    }
}

/// How far a cold read from one offset loads ahead: a sequential reader's whole window,
/// another reader what it asked for (within the window).
fn read_window(max_bytes: usize, sequential: bool) -> usize {
    if sequential {
        READ_AHEAD_BYTES
    } else {
        max_bytes.min(READ_AHEAD_BYTES)
    }
}

/// The extent of `segment` (the log's `index`-th) holding `offset`, within `settled_end`:
/// from the index entry at or below `offset` to the last entry within [`EXTENT_BYTES`]
/// (the next entry if there is none, the segment end if it is near and settled).
fn plan_in<F: BlockFile>(
    segment: &Segment<F>,
    index: usize,
    offset: Offset,
    settled_end: u64,
) -> Option<ExtentPlan> {
    let entry_at = |(rel, pos): (crate::types::RelativeOffset, crate::types::FilePosition)| {
        (rel.absolute(segment.base), u64::from(pos.0))
    };
    let start = segment.index.lookup(offset.relative_to(segment.base));
    let (first, start_pos) = start.map_or((segment.base, 0), entry_at);
    if start_pos >= settled_end {
        return None;
    }
    let target = (start_pos + EXTENT_BYTES).min(settled_end);
    let whole_rest = (segment.next_offset, segment.size_bytes);
    let to_pos = |pos: u64| crate::types::FilePosition(u32::try_from(pos).unwrap_or(u32::MAX));
    let (end, end_pos) = if segment.size_bytes <= target {
        whole_rest
    } else if let Some(e) = segment
        .index
        .last_at_or_below_position(to_pos(target))
        .map(entry_at)
        .filter(|&(_, pos)| pos > start_pos)
    {
        e
    } else if let Some(e) = segment
        .index
        .first_after_position(to_pos(start_pos))
        .map(entry_at)
        .filter(|&(_, pos)| pos <= settled_end)
    {
        e
    } else if segment.size_bytes <= settled_end {
        whole_rest
    } else {
        return None;
    };
    assert!(start_pos < end_pos && end_pos <= settled_end);
    (offset < end).then_some(ExtentPlan {
        segment: index,
        first,
        end,
        start_pos,
        end_pos,
    })
}

/// Whether a served chunk holds at least one record (compaction keeps some empty batches).
fn holds_records(chunk: &[u8]) -> bool {
    let mut rest = chunk;
    while let Some(header) = BatchHeader::view(rest) {
        if header.records_count.get() > 0 {
            return true;
        }
        let total = header.total_bytes().expect("served batches verified");
        rest = &rest[total.min(rest.len())..];
    }
    false
}

/// One past the last offset of the (whole, back to back) batches in `chunk`.
fn end_of_chunk(chunk: &Bytes) -> Offset {
    let mut rest = &chunk[..];
    let mut end = None;
    while let Some(header) = BatchHeader::view(rest) {
        end = Some(header.last().plus(1));
        let total = header.total_bytes().expect("served batches verified");
        rest = &rest[total.min(rest.len())..];
    }
    end.expect("a served chunk holds a batch")
}
