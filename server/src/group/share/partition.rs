//! One share-partition (KIP-932): the delivery state of one topic-partition's records for one
//! share group. Runtime-free: every call is handed `now` (ms on the coordinator's clock).
//!
//! The in-flight window runs from the share-partition start offset (SPSO, [`SharePartition::start`])
//! to its end ([`SharePartition::end`], exclusive: Kafka's SPEO is `end - 1`). Every offset in it
//! has a [`RecordState`]; records below it are done (acknowledged or archived), records from
//! `end` on have never been delivered. The window's length is bounded by
//! `group.share.partition.max.record.locks`: past it no new record is acquired until the start
//! moves, which it does as soon as the records at the front are done. So what a client can make
//! one share-partition hold is that many entries, whatever it sends.
//!
//! A record acquired by a member is locked for `group.share.record.lock.duration.ms`; a lock that
//! expires, a RELEASE, or the member leaving makes it Available again, or Archived once it has
//! been delivered `group.share.delivery.count.limit` times (the dead-letter rule). ACCEPT makes
//! it Acknowledged, REJECT (and GAP, for an offset that held no record) Archived. An
//! acknowledgement names only records the member holds; any other makes the whole
//! acknowledgement of the partition fail with INVALID_RECORD_STATE and change nothing, as
//! Kafka's `SharePartition.acknowledge` rolls back.

use std::collections::VecDeque;
use std::rc::Rc;

use rill_protocol::ErrorCode;
use rill_types::Offset;

pub use crate::group::ops::share::{AckBatch, AckType, Acquired, FetchedBatch};
pub use crate::group::settings::PartitionSettings;

/// Where a record of the window is in its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    /// May be acquired (never delivered yet, released, or its lock expired).
    Available,
    /// Delivered to a member, locked until acknowledged or the lock expires.
    Acquired,
    /// Accepted: done.
    Acknowledged,
    /// Rejected, a gap, or delivered too often: done, never delivered again.
    Archived,
}

impl RecordState {
    /// Acknowledged or Archived: the start may move past it.
    fn is_done(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// One offset of the window.
#[derive(Debug, Clone)]
struct Entry {
    state: RecordState,
    delivery_count: i16,
    /// The member holding it (Acquired only).
    owner: Option<Rc<str>>,
    /// When its lock expires (Acquired only), ms.
    deadline: i64,
}

impl Entry {
    fn available() -> Entry {
        Entry {
            state: RecordState::Available,
            delivery_count: 0,
            owner: None,
            deadline: 0,
        }
    }

    fn archived() -> Entry {
        Entry {
            state: RecordState::Archived,
            ..Entry::available()
        }
    }
}

/// One share-partition's state (see the module doc).
#[derive(Debug, Clone)]
pub struct SharePartition {
    settings: PartitionSettings,
    /// SPSO.
    start: i64,
    /// `window[i]` is offset `start + i`; `start + window.len()` is the end.
    window: VecDeque<Entry>,
    /// The earliest lock deadline among acquired records (`i64::MAX`: none), so a tick skips
    /// partitions with nothing to expire.
    next_deadline: i64,
}

impl SharePartition {
    /// A share-partition whose first record to deliver is `start`.
    pub fn new(start: Offset, settings: PartitionSettings) -> SharePartition {
        SharePartition {
            settings,
            start: start.0.max(0),
            window: VecDeque::new(),
            next_deadline: i64::MAX,
        }
    }

    /// SPSO: the first offset not yet done.
    pub fn start(&self) -> Offset {
        Offset(self.start)
    }

    /// One past the last offset ever acquired (Kafka's SPEO + 1).
    pub fn end(&self) -> Offset {
        Offset(self.start + self.window.len() as i64)
    }

    /// The state and delivery count of `offset` (`None` outside the window).
    pub fn state(&self, offset: i64) -> Option<(RecordState, i16)> {
        let e = self.entry(offset)?;
        Some((e.state, e.delivery_count))
    }

    /// Records currently acquired (locked).
    pub fn acquired_count(&self) -> usize {
        self.window
            .iter()
            .filter(|e| e.state == RecordState::Acquired)
            .count()
    }

    fn entry(&self, offset: i64) -> Option<&Entry> {
        let i = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.window.get(i)
    }

    /// Where the next fetch should read from: the first Available record of the window, else
    /// its end; `None` when the window is full and holds nothing available (nothing can be
    /// acquired until records are acknowledged or their locks expire).
    pub fn next_fetch_offset(&self) -> Option<Offset> {
        if let Some(i) = self
            .window
            .iter()
            .position(|e| e.state == RecordState::Available)
        {
            return Some(Offset(self.start + i as i64));
        }
        (self.window.len() < self.settings.max_record_locks).then(|| self.end())
    }

    /// Moves the start to `log_start` if the log no longer holds records below it (retention,
    /// DeleteRecords): those records can never be delivered.
    pub fn advance_to_log_start(&mut self, log_start: Offset) {
        while self.start < log_start.0 {
            if self.window.pop_front().is_none() {
                self.start = log_start.0;
                return;
            }
            self.start += 1;
        }
    }

    /// Acquires for `member`, from the fetched `batches` (in offset order), up to
    /// `max_records` records: Available records of the window, then new ones past its end
    /// while the window has room. Offsets past the end that no batch holds (compacted away)
    /// and control batches are archived as they are passed. Returns the acquired ranges.
    pub fn acquire(
        &mut self,
        member: &Rc<str>,
        batches: &[FetchedBatch],
        max_records: usize,
        now: i64,
    ) -> Vec<Acquired> {
        let deadline = now.saturating_add(self.settings.lock_duration_ms.0);
        let mut out: Vec<Acquired> = Vec::new();
        let mut taken = 0usize;
        'batches: for b in batches {
            if b.last < b.first {
                continue;
            }
            for offset in b.first.max(self.start)..=b.last {
                if taken >= max_records {
                    break 'batches;
                }
                let end = self.start + self.window.len() as i64;
                if offset >= end {
                    if self.window.is_empty() {
                        // Nothing in flight: the offsets up to here held no record.
                        self.start = offset;
                    }
                    // Offsets between the end and this batch hold no record.
                    while self.start + (self.window.len() as i64) < offset {
                        if self.window.len() >= self.settings.max_record_locks {
                            break 'batches;
                        }
                        self.window.push_back(Entry::archived());
                    }
                    if self.window.len() >= self.settings.max_record_locks {
                        break 'batches;
                    }
                    self.window.push_back(if b.control {
                        Entry::archived()
                    } else {
                        Entry::available()
                    });
                }
                let i = (offset - self.start) as usize;
                let e = &mut self.window[i];
                if b.control && e.state == RecordState::Available {
                    e.state = RecordState::Archived;
                }
                if e.state != RecordState::Available {
                    continue;
                }
                e.state = RecordState::Acquired;
                e.delivery_count = e.delivery_count.saturating_add(1);
                e.owner = Some(member.clone());
                e.deadline = deadline;
                taken += 1;
                let count = e.delivery_count;
                match out.last_mut() {
                    Some(a) if a.last + 1 == offset && a.delivery_count == count => a.last = offset,
                    _ => out.push(Acquired {
                        first: offset,
                        last: offset,
                        delivery_count: count,
                    }),
                }
            }
        }
        if taken > 0 {
            self.next_deadline = self.next_deadline.min(deadline);
        }
        self.advance();
        out
    }

    /// Applies `member`'s acknowledgement `batches`, all or none: INVALID_REQUEST for a
    /// malformed batch, INVALID_RECORD_STATE when an offset is not a record `member` holds.
    pub fn acknowledge(&mut self, member: &str, batches: &[AckBatch]) -> Result<(), ErrorCode> {
        let mut previous_last: Option<i64> = None;
        for b in batches {
            let len = b
                .last
                .checked_sub(b.first)
                .and_then(|d| d.checked_add(1))
                .filter(|n| *n > 0)
                .ok_or(ErrorCode::InvalidRequest)?;
            if b.types.len() != 1 && b.types.len() as i64 != len {
                return Err(ErrorCode::InvalidRequest);
            }
            if previous_last.is_some_and(|p| b.first <= p) {
                return Err(ErrorCode::InvalidRequest);
            }
            previous_last = Some(b.last);
            if b.first < self.start || b.last >= self.end().0 {
                return Err(ErrorCode::InvalidRecordState);
            }
            for offset in b.first..=b.last {
                let e = self.entry(offset).expect("inside the window");
                if e.state != RecordState::Acquired || e.owner.as_deref() != Some(member) {
                    return Err(ErrorCode::InvalidRecordState);
                }
            }
        }
        for b in batches {
            for (k, offset) in (b.first..=b.last).enumerate() {
                let ack = if b.types.len() == 1 {
                    b.types[0]
                } else {
                    b.types[k]
                };
                let limit = self.settings.delivery_count_limit;
                let i = (offset - self.start) as usize;
                let e = &mut self.window[i];
                e.owner = None;
                e.state = match ack {
                    AckType::Accept => RecordState::Acknowledged,
                    AckType::Reject | AckType::Gap => RecordState::Archived,
                    AckType::Release if e.delivery_count >= limit => RecordState::Archived,
                    AckType::Release => RecordState::Available,
                };
            }
        }
        self.advance();
        Ok(())
    }

    /// Gives back every record `member` holds (it left the group or closed its session).
    pub fn release_member(&mut self, member: &str) {
        let limit = self.settings.delivery_count_limit;
        for e in self.window.iter_mut() {
            if e.state == RecordState::Acquired && e.owner.as_deref() == Some(member) {
                release(e, limit);
            }
        }
        self.advance();
    }

    /// Expires the locks whose deadline has passed; returns how many records came back.
    pub fn tick(&mut self, now: i64) -> usize {
        if now < self.next_deadline {
            return 0;
        }
        let limit = self.settings.delivery_count_limit;
        let mut expired = 0;
        let mut next = i64::MAX;
        for e in self.window.iter_mut() {
            if e.state != RecordState::Acquired {
                continue;
            }
            if e.deadline <= now {
                release(e, limit);
                expired += 1;
            } else {
                next = next.min(e.deadline);
            }
        }
        self.next_deadline = next;
        self.advance();
        expired
    }

    /// Moves the start past the done records at the front of the window.
    fn advance(&mut self) {
        while self.window.front().is_some_and(|e| e.state.is_done()) {
            self.window.pop_front();
            self.start += 1;
        }
    }

    /// The done records past the start (accepted, rejected, archived, gaps), as runs
    /// `delta:len` (delta from the start) joined by `,`: what [`durable`] keeps beside the start.
    /// At most `max_record_locks` / 2 runs of ten characters or so: it fits a record string.
    ///
    /// [`durable`]: super::durable
    pub fn done_runs(&self) -> String {
        let mut out = String::new();
        let mut i = 0;
        while i < self.window.len() {
            if !self.window[i].state.is_done() {
                i += 1;
                continue;
            }
            let first = i;
            while i < self.window.len() && self.window[i].state.is_done() {
                i += 1;
            }
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&format!("{first}:{}", i - first));
        }
        out
    }

    /// A share-partition restored at `start`, with the done runs [`Self::done_runs`] wrote: the
    /// records between them are Available again (delivery counts start over). Malformed text
    /// restores no run; nothing is restored past the window's bound.
    pub fn restored(start: Offset, runs: &str, settings: PartitionSettings) -> SharePartition {
        let mut p = SharePartition::new(start, settings);
        for run in runs.split(',').filter(|r| !r.is_empty()) {
            let Some((first, len)) = run.split_once(':') else {
                break;
            };
            let (Ok(first), Ok(len)) = (first.parse::<usize>(), len.parse::<usize>()) else {
                break;
            };
            let end = first.saturating_add(len);
            if first < p.window.len() || end > settings.max_record_locks {
                break;
            }
            while p.window.len() < first {
                p.window.push_back(Entry::available());
            }
            while p.window.len() < end {
                p.window.push_back(Entry {
                    state: RecordState::Acknowledged,
                    ..Entry::available()
                });
            }
        }
        p.advance();
        p
    }

    /// Resets the start to `offset` and forgets the window (AlterShareGroupOffsets, allowed
    /// only while the group has no members).
    pub fn reset(&mut self, offset: Offset) {
        self.window.clear();
        self.start = offset.0.max(0);
        self.next_deadline = i64::MAX;
    }
}

/// A held record given back: Available, or Archived once delivered `limit` times.
fn release(e: &mut Entry, limit: i16) {
    e.owner = None;
    e.state = if e.delivery_count >= limit {
        RecordState::Archived
    } else {
        RecordState::Available
    };
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
