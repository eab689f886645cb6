//! [`ReadCache`]: one core's cache of log bytes past each log's tail, shared by all the
//! partitions it owns, so a catch-up consumer finds its next fetch already in memory. Two
//! things fill it:
//! - *write-through*: a batch leaving a log's tail cache ([`crate::batch_cache`]) is kept here,
//!   the very `Bytes` the append wrote (no copy), so a log just written is read from memory as
//!   Kafka reads it from the page cache (O_DIRECT writes leave nothing there);
//! - the read-ahead in `read_path.rs`, loading from disk what is not here.
//!
//! Entries are [`Extent`]s: whole batches `[first, end)` of one segment, back to back. A loaded
//! one is read from disk as one range (`BlockFile::read_owned`) whose bounds come from the
//! sparse index, so both ends are batch starts and no batch is ever split between two extents
//! (nor copied to join it back); a written one is one appended batch. An entry is *loading*
//! (its read in flight, a shared future any reader may await) or *ready*.
//!
//! No stale byte: entries are keyed by a [`LogId`] that an open log takes and never shares, so
//! whatever rewrites a log's bytes by reopening it (follower truncation, recovery of a torn
//! tail, a partition deleted and created again) leaves the old entries unreachable (the old
//! log's drop also forgets them); what removes bytes of an open log forgets their entries
//! (retention, [`ReadCache::forget_below`]; a cleaner's segment swap, the same), and the tail
//! cache drops, rather than hands over, batches compaction rewrote.
//!
//! | bound | how |
//! |---|---|
//! | bytes of all entries, loading or ready, `<= bytes_max` | checked on every insert (`assert!`) |
//! | room is made least recently used first | loading entries too |
//! | a stopped consumer pins nothing | its entries are evicted like any other; a closed log drops them (an idle one keeps them: they are within the bound) |
//! | write-through adds no copy | a written entry is the appended batch's `Bytes`, counted as the whole allocation it keeps alive (a batch received in a Produce frame pins the frame: `ValidatedBatch::held_bytes`) |
//!
//! Bytes already handed to a response are `Bytes` clones: they live on until the response is
//! written, outside the bound (the connection's in-flight limits bound those). So does a load
//! evicted while its read is in flight: on the real disk a task drives every load to its end
//! (`BlockFile::run_detached`), so its read finishes and its bytes are then dropped; the excess
//! is at most the reads in flight.

use crate::batch::validate_prefix;
use crate::error::EngineError;
use crate::io::gate::FlushGate;
use crate::types::Offset;
use bytes::Bytes;
use futures::future::{LocalBoxFuture, Shared};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;

/// Identifies one open partition log within a cache (never reused, so a reopened log never
/// sees its predecessor's bytes).
pub type LogId = u64;

/// Bound of a read cache built without a size of its own (engine tests, tools); the broker
/// sizes its shards' caches to the machine's memory (`rill.read.cache.bytes`).
pub const READ_CACHE_BYTES_DEFAULT: usize = 64 << 20;
/// What an entry costs beyond its bytes and batch list: the `Rc<Extent>`, and its slots in
/// the cache's two maps (estimated), so many tiny written batches stay within the bound too.
const ENTRY_OVERHEAD_BYTES: usize = 256;

/// One batch inside an extent.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct BatchSpan {
    base: Offset,
    last: Offset,
    /// Where the batch ends within the extent's bytes.
    end: u32,
}

/// Whole, verified batches of one segment, back to back, in offset order.
#[derive(Debug)]
pub struct Extent {
    bytes: Bytes,
    batches: Vec<BatchSpan>,
    /// Size of the buffer `bytes` is a slice of (what the extent really keeps alive).
    held_bytes: usize,
    /// One past the last offset the extent answers for: its last batch's, or, in a segment
    /// compaction may have left gaps in, the planned end when every planned batch verified
    /// (offsets after the last batch up to it hold nothing).
    end: Offset,
}

impl Extent {
    /// Verifies the batches of `read[skip..]` (length, magic, CRC-32C, offsets contiguous
    /// from `first`), keeping those before `end` and before the first that does not verify; an
    /// error only if not even the first one does. `read` is the whole buffer a disk read filled.
    pub fn parse(
        read: Bytes,
        skip: usize,
        first: Offset,
        end: Offset,
    ) -> Result<Extent, EngineError> {
        Self::parse_in(read, skip, first, end, false)
    }

    /// [`Self::parse`] of a segment that may have gaps (compaction): offsets only increase.
    pub fn parse_in(
        read: Bytes,
        skip: usize,
        first: Offset,
        end: Offset,
        may_have_gaps: bool,
    ) -> Result<Extent, EngineError> {
        let held_bytes = read.len();
        let bytes = read.slice(skip.min(held_bytes)..);
        let mut batches = Vec::new();
        let (mut pos, mut expected) = (0usize, first);
        let in_order =
            |base: Offset, expected: Offset| base == expected || (may_have_gaps && base > expected);
        while pos < bytes.len() && expected < end {
            let meta = match validate_prefix(&bytes[pos..]) {
                Ok(meta) if in_order(meta.base_offset, expected) && meta.base_offset < end => meta,
                Ok(meta) if batches.is_empty() => {
                    let why = format!("extent batch base {} not {expected}", meta.base_offset);
                    return Err(EngineError::CorruptBatch(why));
                }
                Err(e) if batches.is_empty() => return Err(e),
                Ok(_) | Err(_) => break,
            };
            pos += meta.total_bytes;
            expected = meta.last_offset.plus(1);
            let end = u32::try_from(pos).expect("an extent is < 4 GiB");
            batches.push(BatchSpan {
                base: meta.base_offset,
                last: meta.last_offset,
                end,
            });
        }
        if batches.is_empty() {
            return Err(EngineError::CorruptBatch(format!(
                "no whole batch at offset {first}"
            )));
        }
        let last_end = batches.last().expect("not empty").last.plus(1);
        let whole = pos == bytes.len();
        Ok(Extent {
            bytes: bytes.slice(..pos),
            batches,
            held_bytes,
            end: if may_have_gaps && whole {
                end.max(last_end)
            } else {
                last_end
            },
        })
    }

    /// One batch just appended (`[base, last]`, whole and verified where it entered the
    /// broker), kept as it is: no copy, no second CRC check. It keeps `held` bytes of memory
    /// alive (at least its length: the buffer it was received in).
    pub fn written(bytes: Bytes, (base, last): (Offset, Offset), held: usize) -> Extent {
        assert!(base <= last, "a batch holds at least one offset");
        let end = u32::try_from(bytes.len()).expect("a batch is < 4 GiB");
        debug_assert!(validate_prefix(&bytes).is_ok_and(|m| m.base_offset == base
            && m.last_offset == last
            && m.total_bytes == bytes.len()));
        Extent {
            held_bytes: held.max(bytes.len()),
            bytes,
            batches: vec![BatchSpan { base, last, end }],
            end: last.plus(1),
        }
    }

    /// Offset of the first batch.
    pub fn first(&self) -> Offset {
        self.batches[0].base
    }

    /// One past the last offset held (see the field).
    pub fn end(&self) -> Offset {
        self.end
    }

    /// Whether a batch at or after `from` is held (none may be, in a gap compaction left
    /// before the extent's end).
    pub fn holds_from(&self, from: Offset) -> bool {
        self.batches.last().is_some_and(|b| b.last >= from)
    }

    /// Whether the extent holds the batch containing `offset`.
    pub fn covers(&self, offset: Offset) -> bool {
        self.first() <= offset && offset < self.end()
    }

    /// Heap bytes this extent holds (its read buffer, its batch list, and what its cache
    /// entry costs).
    pub fn heap_bytes(&self) -> usize {
        self.held_bytes
            + self.batches.capacity() * std::mem::size_of::<BatchSpan>()
            + ENTRY_OVERHEAD_BYTES
    }

    /// The whole batches from the one holding `from` whose base is below `limit`, as one slice
    /// (no copy) with the offset after it, adding up to at most `max_bytes` unless the first
    /// alone is larger and `at_least_one` (KIP-74). `None` if no batch qualifies.
    pub fn take(
        &self,
        from: Offset,
        limit: Offset,
        max_bytes: usize,
        at_least_one: bool,
    ) -> Option<(Bytes, Offset)> {
        let first = self.batches.partition_point(|b| b.last < from);
        let start = first
            .checked_sub(1)
            .map_or(0, |i| self.batches[i].end as usize);
        let mut taken = first;
        for (i, batch) in self.batches.iter().enumerate().skip(first) {
            let size = batch.end as usize - start;
            let fits = size <= max_bytes || (at_least_one && i == first);
            if batch.base >= limit || !fits {
                break;
            }
            taken = i + 1;
        }
        if taken == first {
            return None;
        }
        let last = self.batches[taken - 1];
        Some((
            self.bytes.slice(start..last.end as usize),
            last.last.plus(1),
        ))
    }
}

/// Why an extent could not be loaded (cloneable, as every reader of a shared load sees it).
#[derive(Clone, Debug)]
pub enum LoadError {
    /// The read failed.
    Io(io::ErrorKind, Option<i32>),
    /// The bytes read did not verify.
    Corrupt(String),
}

impl LoadError {
    /// From the error the read or the parse returned.
    pub fn from_engine(e: EngineError) -> LoadError {
        match e {
            EngineError::Io(e) => LoadError::Io(e.kind(), e.raw_os_error()),
            EngineError::StorageFull => LoadError::Io(io::ErrorKind::StorageFull, Some(28)),
            other => LoadError::Corrupt(other.to_string()),
        }
    }
}

/// A load in flight; every clone resolves to the same outcome.
pub type Load = Shared<LocalBoxFuture<'static, Result<Rc<Extent>, LoadError>>>;

/// What [`ReadCache::find`] found.
pub enum Found {
    /// The extent is in memory.
    Ready(Rc<Extent>),
    /// Its read is in flight; await the load, then report it with [`ReadCache::finish`] under
    /// this first offset.
    Loading(Offset, Load),
}

/// What the cache did, for tests and metrics.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadCacheStats {
    /// Lookups that found a ready extent.
    pub hits: u64,
    /// Lookups that found a load in flight.
    pub hits_loading: u64,
    /// Lookups that found nothing (the read then loads or reads directly).
    pub misses: u64,
    /// Loads admitted (demand and read-ahead).
    pub loads: u64,
    /// Loads refused for lack of room (read without caching, or not read ahead).
    pub loads_refused: u64,
    /// Entries evicted to make room.
    pub evictions: u64,
    /// Appended batches kept by write-through.
    pub written: u64,
}

enum Slot {
    Loading(Load),
    Ready(Rc<Extent>),
}

struct Entry {
    /// One past the last offset (as planned while loading, as found once ready).
    end: Offset,
    bytes: usize,
    /// Last use, the key of this entry in `Inner::by_use`.
    used: u64,
    slot: Slot,
}

#[derive(Default)]
struct Inner {
    bytes_max: usize,
    /// Whether batches leaving a log's tail cache are kept ([`ReadCache::insert_written`]).
    write_through: bool,
    bytes: usize,
    tick: u64,
    next_log: LogId,
    entries: BTreeMap<(LogId, Offset), Entry>,
    /// Entries by last use, least recent first.
    by_use: BTreeMap<u64, (LogId, Offset)>,
    stats: ReadCacheStats,
}

impl Inner {
    /// The key of the entry holding `offset` of `log`, if any.
    fn key_covering(&self, log: LogId, offset: Offset) -> Option<(LogId, Offset)> {
        let (&key, entry) = self.entries.range(..=(log, offset)).next_back()?;
        (key.0 == log && offset < entry.end).then_some(key)
    }

    fn touch(&mut self, key: (LogId, Offset)) {
        self.tick += 1;
        let tick = self.tick;
        let entry = self.entries.get_mut(&key).expect("touching an entry");
        self.by_use.remove(&entry.used);
        entry.used = tick;
        self.by_use.insert(tick, key);
    }

    fn remove(&mut self, key: (LogId, Offset)) {
        if let Some(entry) = self.entries.remove(&key) {
            self.by_use.remove(&entry.used);
            self.bytes -= entry.bytes;
        }
    }

    /// Evicts least recently used entries until `bytes` more fit; false if they never can.
    fn make_room(&mut self, bytes: usize) -> bool {
        if bytes > self.bytes_max {
            return false;
        }
        while self.bytes + bytes > self.bytes_max {
            let (_, key) = self
                .by_use
                .pop_first()
                .expect("bytes held means entries held");
            let entry = self.entries.remove(&key).expect("indexed entries exist");
            self.bytes -= entry.bytes;
            self.stats.evictions += 1;
        }
        true
    }
}

/// A bounded, least-recently-used cache of extents for all the logs of one core.
pub struct ReadCache {
    inner: RefCell<Inner>,
    /// The core's durable flushes in flight, which held read-ahead loads wait behind.
    flush_gate: Rc<FlushGate>,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.borrow();
        f.debug_struct("ReadCache")
            .field("bytes", &inner.bytes)
            .field("bytes_max", &inner.bytes_max)
            .field("entries", &inner.entries.len())
            .finish()
    }
}

impl ReadCache {
    /// An empty cache holding at most `bytes_max` bytes, with write-through (0 disables
    /// caching: every cold read is read on demand and dropped after use).
    pub fn new(bytes_max: usize) -> Self {
        Self::with_write_through(bytes_max, true)
    }

    /// [`Self::new`], keeping appended batches as they leave their log's tail cache or not
    /// (`rill.read.cache.write.through`; without it only read-ahead fills the cache, and a
    /// catch-up of a log just written reads the disk).
    pub fn with_write_through(bytes_max: usize, write_through: bool) -> Self {
        ReadCache {
            inner: RefCell::new(Inner {
                bytes_max,
                write_through,
                ..Inner::default()
            }),
            flush_gate: Rc::default(),
        }
    }

    /// Keeps the batch `[base, last]` of `log`, which was appended and is leaving the log's
    /// tail cache, as a ready extent (write-through: the same `Bytes`, no copy) counted as the
    /// `held` bytes of memory it keeps alive, evicting least recently used entries for it.
    /// Nothing happens if write-through is off, an entry already holds `base` (read ahead
    /// from disk), or the batch is larger than the cache.
    pub fn insert_written(&self, log: LogId, span: (Offset, Offset), bytes: Bytes, held: usize) {
        let (base, _) = span;
        let mut inner = self.inner.borrow_mut();
        if !inner.write_through || inner.key_covering(log, base).is_some() {
            return;
        }
        let extent = Extent::written(bytes, span, held);
        let size = extent.heap_bytes();
        if !inner.make_room(size) {
            return;
        }
        inner.bytes += size;
        inner.stats.written += 1;
        let key = (log, base);
        let entry = Entry {
            end: extent.end(),
            bytes: size,
            used: 0,
            slot: Slot::Ready(Rc::new(extent)),
        };
        let replaced = inner.entries.insert(key, entry);
        assert!(replaced.is_none(), "no entry held the key: it held nothing");
        inner.touch(key);
        assert!(inner.bytes <= inner.bytes_max, "the cache stays in bounds");
    }

    /// The core's durable flushes in flight (its logs mark theirs; held loads wait behind them).
    pub fn flush_gate(&self) -> &Rc<FlushGate> {
        &self.flush_gate
    }

    /// A fresh id for a log that is opening.
    pub fn register(&self) -> LogId {
        let mut inner = self.inner.borrow_mut();
        inner.next_log += 1;
        inner.next_log
    }

    /// The extent of `log` holding `offset`, ready or loading; counts as a use.
    pub fn find(&self, log: LogId, offset: Offset) -> Option<Found> {
        let mut inner = self.inner.borrow_mut();
        let Some(key) = inner.key_covering(log, offset) else {
            inner.stats.misses += 1;
            return None;
        };
        inner.touch(key);
        let found = match &inner.entries[&key].slot {
            Slot::Ready(extent) => Found::Ready(extent.clone()),
            Slot::Loading(load) => Found::Loading(key.1, load.clone()),
        };
        match found {
            Found::Ready(_) => inner.stats.hits += 1,
            Found::Loading(..) => inner.stats.hits_loading += 1,
        }
        Some(found)
    }

    /// The load in flight of the extent of `log` holding `offset`, if it is loading (not a use).
    pub fn loading(&self, log: LogId, offset: Offset) -> Option<Load> {
        let inner = self.inner.borrow();
        let key = inner.key_covering(log, offset)?;
        match &inner.entries[&key].slot {
            Slot::Loading(load) => Some(load.clone()),
            Slot::Ready(_) => None,
        }
    }

    /// The end offset and size of the entry of `log` holding `offset`, if any (not a use).
    pub fn entry_covering(&self, log: LogId, offset: Offset) -> Option<(Offset, usize)> {
        let inner = self.inner.borrow();
        let key = inner.key_covering(log, offset)?;
        let entry = &inner.entries[&key];
        Some((entry.end, entry.bytes))
    }

    /// Admits the load of `[first, end)` of `log`, reserving `bytes`; evicts what it must.
    /// False if it cannot fit (larger than the whole cache): the caller reads without caching.
    pub fn insert_loading(
        &self,
        log: LogId,
        first: Offset,
        end: Offset,
        bytes: usize,
        load: Load,
    ) -> bool {
        assert!(first < end, "an extent holds at least one offset");
        let mut inner = self.inner.borrow_mut();
        inner.remove((log, first));
        if !inner.make_room(bytes) {
            inner.stats.loads_refused += 1;
            return false;
        }
        inner.bytes += bytes;
        inner.stats.loads += 1;
        let entry = Entry {
            end,
            bytes,
            used: 0,
            slot: Slot::Loading(load),
        };
        inner.entries.insert((log, first), entry);
        inner.touch((log, first));
        assert!(inner.bytes <= inner.bytes_max, "the cache stays in bounds");
        true
    }

    /// Records how `load` of `log` starting at `first` ended: a ready extent replaces it
    /// (evicting others if it is larger than reserved, dropped if it cannot fit), a failure
    /// removes it so the next reader tries again. Nothing happens unless the entry is still
    /// that very load: one evicted or forgotten meanwhile (retention, a cleaner's swap) may
    /// have been replaced by a load of other bytes under the same key.
    pub fn finish(
        &self,
        log: LogId,
        first: Offset,
        load: &Load,
        outcome: &Result<Rc<Extent>, LoadError>,
    ) {
        let mut inner = self.inner.borrow_mut();
        let key = (log, first);
        let Some(entry) = inner.entries.get(&key) else {
            return; // evicted meanwhile
        };
        match &entry.slot {
            Slot::Loading(current) if current.ptr_eq(load) => {}
            // Another reader finished it first, or it is another load now.
            Slot::Loading(_) | Slot::Ready(_) => return,
        }
        inner.remove(key);
        let Ok(extent) = outcome else { return };
        if !inner.make_room(extent.heap_bytes()) {
            inner.stats.loads_refused += 1;
            return;
        }
        inner.bytes += extent.heap_bytes();
        let entry = Entry {
            end: extent.end(),
            bytes: extent.heap_bytes(),
            used: 0,
            slot: Slot::Ready(extent.clone()),
        };
        inner.entries.insert(key, entry);
        inner.touch(key);
        assert!(inner.bytes <= inner.bytes_max, "the cache stays in bounds");
    }

    /// Drops every entry of `log` (it closed, or failed and is reopened).
    pub fn forget_log(&self, log: LogId) {
        let mut inner = self.inner.borrow_mut();
        let keys: Vec<_> = inner
            .entries
            .range((log, Offset(i64::MIN))..=(log, Offset(i64::MAX)))
            .map(|(&k, _)| k)
            .collect();
        keys.into_iter().for_each(|k| inner.remove(k));
    }

    /// Drops the entries of `log` wholly below `offset` (retention removed their segments).
    pub fn forget_below(&self, log: LogId, offset: Offset) {
        let mut inner = self.inner.borrow_mut();
        let keys: Vec<_> = inner
            .entries
            .range((log, Offset(i64::MIN))..(log, offset))
            .filter(|(_, e)| e.end <= offset)
            .map(|(&k, _)| k)
            .collect();
        keys.into_iter().for_each(|k| inner.remove(k));
    }

    /// Bytes held (ready extents and reservations of loads in flight).
    pub fn bytes(&self) -> usize {
        self.inner.borrow().bytes
    }

    /// The bound.
    pub fn bytes_max(&self) -> usize {
        self.inner.borrow().bytes_max
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.inner.borrow().entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries held for one log.
    pub fn entries_of(&self, log: LogId) -> usize {
        self.inner
            .borrow()
            .entries
            .range((log, Offset(i64::MIN))..=(log, Offset(i64::MAX)))
            .count()
    }

    /// Counters since creation.
    pub fn stats(&self) -> ReadCacheStats {
        self.inner.borrow().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    /// A v2 batch of `records` offsets at `base` with `value_bytes` of payload, CRC valid.
    fn batch(base: i64, records: i32, value_bytes: usize) -> Vec<u8> {
        let ts = crate::types::TimestampMs(1);
        let mut b = crate::batch::build_test_batch(records, value_bytes, ts, None);
        crate::batch::set_base_offset(&mut b, Offset(base));
        b
    }

    fn extent_of(batches: &[(i64, i32)]) -> (Bytes, Offset, Offset) {
        let mut bytes = Vec::new();
        for &(base, n) in batches {
            bytes.extend_from_slice(&batch(base, n, 100));
        }
        let (first, &(lb, ln)) = (batches[0].0, batches.last().unwrap());
        (
            Bytes::from(bytes),
            Offset(first),
            Offset(lb + i64::from(ln)),
        )
    }

    fn ready(extent: Extent) -> Load {
        let extent = Rc::new(extent);
        async move { Ok(extent) }.boxed_local().shared()
    }

    #[test]
    fn take_serves_whole_batches_from_the_one_holding_from() {
        let (bytes, first, end) = extent_of(&[(0, 3), (3, 2), (5, 5)]);
        let sizes: Vec<usize> = [(0, 3), (3, 2), (5, 5)]
            .iter()
            .map(|&(b, n)| batch(b, n, 100).len())
            .collect();
        let e = Extent::parse(bytes, 0, first, end).unwrap();
        assert_eq!((e.first(), e.end()), (Offset(0), Offset(10)));
        let (all, next) = e.take(Offset(4), Offset(100), usize::MAX, true).unwrap();
        assert_eq!(all.len(), sizes[1] + sizes[2]);
        assert_eq!(next, Offset(10));
        let (one, next) = e.take(Offset(4), Offset(100), 1, true).unwrap();
        assert_eq!(
            (one.len(), next),
            (sizes[1], Offset(5)),
            "KIP-74: one batch"
        );
        assert!(e.take(Offset(4), Offset(100), 1, false).is_none());
        let (below, _) = e.take(Offset(0), Offset(5), usize::MAX, true).unwrap();
        assert_eq!(below.len(), sizes[0] + sizes[1], "stops at the limit");
        assert!(e.take(Offset(10), Offset(100), usize::MAX, true).is_none());
    }

    #[test]
    fn a_compacted_extent_steps_over_gaps_and_answers_to_its_planned_end() {
        let (mut bytes, first, _) = extent_of(&[(0, 3), (7, 2)]);
        let contiguous = Extent::parse(bytes.clone(), 0, first, Offset(20)).unwrap();
        assert_eq!(
            contiguous.end(),
            Offset(3),
            "a gap ends an extent of a contiguous segment"
        );
        let e = Extent::parse_in(bytes.clone(), 0, first, Offset(20), true).unwrap();
        assert_eq!(
            (e.first(), e.end()),
            (Offset(0), Offset(20)),
            "planned end: 9..20 is empty"
        );
        let (gap_read, next) = e.take(Offset(4), Offset(100), usize::MAX, true).unwrap();
        assert_eq!((gap_read.len(), next), (batch(7, 2, 100).len(), Offset(9)));
        assert!(e.holds_from(Offset(8)) && !e.holds_from(Offset(9)));
        assert!(e.take(Offset(12), Offset(100), usize::MAX, true).is_none());
        let tail = bytes.split_off(bytes.len() - 5); // a torn last batch: no claim past the first
        drop(tail);
        let e = Extent::parse_in(bytes, 0, first, Offset(20), true).unwrap();
        assert_eq!(e.end(), Offset(3), "not every planned batch verified");
    }

    #[test]
    fn parse_keeps_the_verified_prefix_and_stops_at_end() {
        let (bytes, first, _) = extent_of(&[(0, 3), (3, 2), (5, 5)]);
        let e = Extent::parse(bytes.clone(), 0, first, Offset(5)).unwrap();
        assert_eq!(e.end(), Offset(5), "stops at the planned end");
        let mut torn = bytes.to_vec();
        let second = batch(0, 3, 100).len();
        torn[second + 30] ^= 1; // inside the second batch's CRC-covered bytes
        let e = Extent::parse(Bytes::from(torn.clone()), 0, first, Offset(10)).unwrap();
        assert_eq!(e.end(), Offset(3), "only the first batch verifies");
        torn[30] ^= 1;
        assert!(Extent::parse(Bytes::from(torn), 0, first, Offset(10)).is_err());
        assert!(
            Extent::parse(bytes.clone(), 0, Offset(1), Offset(10)).is_err(),
            "wrong first offset"
        );
        let mut padded = vec![0u8; 100];
        padded.extend_from_slice(&bytes);
        let e = Extent::parse(Bytes::from(padded), 100, first, Offset(10)).unwrap();
        assert_eq!(
            e.heap_bytes() - e.batches.capacity() * 24 - ENTRY_OVERHEAD_BYTES,
            bytes.len() + 100
        );
    }

    #[test]
    fn bound_holds_and_least_recently_used_goes_first() {
        let cache = ReadCache::new(3000);
        let (a, b) = (cache.register(), cache.register());
        let load =
            || ready(Extent::parse(extent_of(&[(0, 1)]).0, 0, Offset(0), Offset(1)).unwrap());
        assert!(cache.insert_loading(a, Offset(0), Offset(10), 1000, load()));
        assert!(cache.insert_loading(b, Offset(0), Offset(10), 1000, load()));
        assert!(cache.insert_loading(a, Offset(10), Offset(20), 1000, load()));
        assert!(
            cache.find(a, Offset(5)).is_some(),
            "a's first entry used again"
        );
        assert!(cache.insert_loading(b, Offset(10), Offset(20), 1000, load()));
        assert_eq!(cache.bytes(), 3000);
        assert!(
            cache.find(b, Offset(0)).is_none(),
            "b's older entry was evicted"
        );
        assert!(cache.find(a, Offset(0)).is_some());
        assert!(
            !cache.insert_loading(a, Offset(30), Offset(40), 3001, load()),
            "larger than the cache"
        );
        assert_eq!(cache.stats().evictions, 1);
        let stats = cache.stats();
        assert_eq!(
            (stats.hits_loading, stats.misses),
            (2, 1),
            "finds: 2 loading, 1 evicted"
        );
        cache.forget_log(a);
        assert_eq!((cache.len(), cache.bytes()), (1, 1000));
    }

    #[test]
    fn finish_replaces_the_reservation_with_the_real_size() {
        let cache = ReadCache::new(1 << 20);
        let log = cache.register();
        let (bytes, first, end) = extent_of(&[(0, 3), (3, 2)]);
        let extent = Rc::new(Extent::parse(bytes, 0, first, end).unwrap());
        let load = ready(Extent::parse(extent.bytes.clone(), 0, first, end).unwrap());
        assert!(cache.insert_loading(log, first, Offset(9), 100_000, load.clone()));
        assert!(matches!(
            cache.find(log, Offset(7)),
            Some(Found::Loading(..))
        ));
        let other = ready(Extent::parse(extent.bytes.clone(), 0, first, end).unwrap());
        cache.finish(log, first, &other, &Ok(extent.clone()));
        assert!(
            matches!(cache.find(log, Offset(7)), Some(Found::Loading(..))),
            "another load's outcome does not replace this one"
        );
        cache.finish(log, first, &load, &Ok(extent.clone()));
        assert_eq!(cache.bytes(), extent.heap_bytes());
        assert!(cache.find(log, Offset(7)).is_none(), "the real end is 5");
        assert!(matches!(cache.find(log, Offset(4)), Some(Found::Ready(_))));
        cache.forget_below(log, Offset(5));
        assert!(cache.is_empty());
    }

    #[test]
    fn a_written_batch_counts_the_memory_it_keeps_alive() {
        let cache = ReadCache::new(10_000);
        let log = cache.register();
        let one = Bytes::from(batch(0, 1, 100));
        cache.insert_written(log, (Offset(0), Offset(0)), one.clone(), 6_000);
        assert!(
            cache.bytes() >= 6_000,
            "its whole frame counts: {}",
            cache.bytes()
        );
        let next = Bytes::from(batch(1, 1, 100));
        cache.insert_written(log, (Offset(1), Offset(1)), next, 6_000);
        assert_eq!(cache.len(), 1, "two frames do not fit: the older went");
        assert!(cache.find(log, Offset(1)).is_some() && cache.bytes() <= cache.bytes_max());
        let off = ReadCache::with_write_through(10_000, false);
        off.insert_written(off.register(), (Offset(0), Offset(0)), one, 0);
        assert!(off.is_empty(), "write-through off");
    }

    #[test]
    fn a_failed_load_is_removed() {
        let cache = ReadCache::new(1 << 20);
        let log = cache.register();
        let load = async { Err(LoadError::Corrupt("x".into())) }
            .boxed_local()
            .shared();
        assert!(cache.insert_loading(log, Offset(0), Offset(5), 10, load.clone()));
        cache.finish(log, Offset(0), &load, &Err(LoadError::Corrupt("x".into())));
        assert!(cache.is_empty() && cache.bytes() == 0);
    }
}
