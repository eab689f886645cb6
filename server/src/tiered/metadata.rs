//! Remote log metadata (KIP-405's `RemoteLogSegmentMetadata`): one record per segment copy,
//! with its offset range, leader epochs and state, kept durably in the partition directory.
//!
//! ```text
//!   COPY_STARTED ──(every object PUT)──▶ COPY_FINISHED ──(retention)──▶ DELETE_STARTED
//!        │                                                                  │
//!        └──(crash, failed copy: cleaned up)──▶ DELETE_STARTED ──(objects deleted)──▶ DELETE_FINISHED
//! ```
//! - Only `COPY_FINISHED` segments are read from, and only they move local retention's gate
//!   (`rill_engine::tiering`): the gate is the end of the contiguous run of finished copies
//!   that starts at the oldest one.
//! - Every transition is written before the work it announces (`COPY_STARTED` before the first
//!   PUT, `DELETE_STARTED` before the first DELETE) and after the work it records
//!   (`COPY_FINISHED` once every PUT returned), so after a crash the file names every object
//!   that may exist: at open, `COPY_STARTED` and `DELETE_STARTED` records are deleted (their
//!   objects removed, the record dropped). A `DELETE_FINISHED` record is dropped from the file
//!   when it is written: the file holds the live segments only, so it stays small.
//!
//! # Where it is stored, and why
//! A single node keeps it in the side file [`METADATA_FILE`] of the partition directory,
//! replaced atomically (write, fsync, rename, fsync) at each transition: it lives and dies
//! with the partition, needs no second log, and its durability is the engine's own small-file
//! rule. A cluster needs every replica to see it (a new leader continues where the old one
//! stopped): Kafka's answer is the `__remote_log_metadata` topic, and Rill's will be the same
//! records as events in a replicated internal topic (or the metadata log); this file's
//! content is that topic's state, and its codec the event's.
//!
//! # Format
//! JSON: `{"version":1,"segments":[RemoteSegment...]}` in base-offset order.

use rill_engine::tiering::SealedSegment;
use rill_types::{DurationMs, Offset, TimestampMs};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::keys::ObjectKind;

/// The side file the metadata is kept in.
pub const METADATA_FILE: &str = "remote-log-metadata";

/// A copy's state (Kafka's `RemoteLogSegmentState`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SegmentState {
    /// Objects are being put; none may be read.
    CopyStarted,
    /// Every object is in the store: readable, and local retention may delete the local copy.
    CopyFinished,
    /// Objects are being deleted; none may be read.
    DeleteStarted,
    /// Every object deleted (the record leaves the file as it is written).
    DeleteFinished,
}

/// One segment copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteSegment {
    /// This copy's id (in every object key).
    pub id: Uuid,
    /// First offset.
    pub base_offset: i64,
    /// Last offset (inclusive, as Kafka's `endOffset`).
    pub end_offset: i64,
    /// Largest batch timestamp (total retention by time). A raw i64 like the offsets beside
    /// it: this struct is the JSON file's layout; retention reads it as a [`TimestampMs`].
    pub max_timestamp_ms: i64,
    /// Bytes of its `.log`.
    pub size_bytes: u64,
    /// Leader epochs of its batches: (epoch, first offset), as Kafka's `segmentLeaderEpochs`.
    pub leader_epochs: Vec<(i32, i64)>,
    /// The objects put (or being put).
    pub objects: Vec<ObjectKind>,
    /// Its state.
    pub state: SegmentState,
}

impl RemoteSegment {
    /// A copy of `segment` starting now.
    pub fn started(segment: &SealedSegment, leader_epochs: Vec<(i32, i64)>) -> Self {
        RemoteSegment {
            id: Uuid::new_v4(),
            base_offset: segment.base.0,
            end_offset: segment.next_offset.0 - 1,
            max_timestamp_ms: segment.max_timestamp.0,
            size_bytes: segment.size_bytes,
            leader_epochs,
            objects: Vec::new(),
            state: SegmentState::CopyStarted,
        }
    }

    /// One past its last offset.
    pub fn next_offset(&self) -> Offset {
        Offset(self.end_offset + 1)
    }

    /// Whether it holds `offset`.
    pub fn holds(&self, offset: Offset) -> bool {
        (self.base_offset..=self.end_offset).contains(&offset.0)
    }
}

/// A partition's remote log metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteLogMetadata {
    version: u32,
    segments: Vec<RemoteSegment>,
    /// The partition's log start after DeleteRecords (nothing below it is read; copies wholly
    /// below it are deleted). Absent: no DeleteRecords reached the remote tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log_start_offset: Option<i64>,
    /// Where the partition's objects are (`tiered::keys`), for `rill check`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keys: Option<String>,
}

impl RemoteLogMetadata {
    /// Reads the file's bytes (`None`: no file yet, an empty tier).
    pub fn decode(bytes: Option<&[u8]>) -> Result<Self, String> {
        let Some(bytes) = bytes else {
            return Ok(RemoteLogMetadata {
                version: 1,
                segments: Vec::new(),
                log_start_offset: None,
                keys: None,
            });
        };
        let meta: RemoteLogMetadata =
            serde_json::from_slice(bytes).map_err(|e| format!("remote log metadata: {e}"))?;
        if meta.version != 1 {
            return Err(format!("remote log metadata version {}", meta.version));
        }
        Ok(meta)
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("plain data serializes")
    }

    /// Records where the partition's objects are (written with the next transition).
    pub fn set_keys_dir(&mut self, dir: &str) {
        self.keys = Some(dir.to_string());
    }

    /// Where the partition's objects are, if recorded.
    pub fn keys_dir(&self) -> Option<&str> {
        self.keys.as_deref()
    }

    /// Every record, in base-offset order.
    pub fn segments(&self) -> &[RemoteSegment] {
        &self.segments
    }

    /// Records `segment` in its (new) state; `DELETE_FINISHED` removes it.
    pub fn put(&mut self, segment: RemoteSegment) {
        self.segments.retain(|s| s.id != segment.id);
        if segment.state == SegmentState::DeleteFinished {
            return;
        }
        let at = self
            .segments
            .partition_point(|s| s.base_offset <= segment.base_offset);
        self.segments.insert(at, segment);
    }

    fn finished(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.segments
            .iter()
            .filter(|s| s.state == SegmentState::CopyFinished)
    }

    /// The end of the contiguous run of finished copies from the oldest: local retention may
    /// delete local segments below it. `None` when nothing is copied.
    pub fn copied_until(&self) -> Option<Offset> {
        let mut end: Option<Offset> = None;
        for s in self.finished() {
            match end {
                Some(e) if Offset(s.base_offset) > e => break, // a hole: stop there
                _ => end = Some(end.map_or(s.next_offset(), |e| e.max(s.next_offset()))),
            }
        }
        end
    }

    /// First offset held remotely and readable (the partition's log start when below the
    /// local one): the oldest copy's base, or the DeleteRecords log start inside it.
    pub fn earliest_offset(&self) -> Option<Offset> {
        let start = self.log_start_offset.unwrap_or(0);
        self.finished()
            .filter(|s| s.end_offset >= start)
            .map(|s| Offset(s.base_offset.max(start)))
            .min()
    }

    /// Moves the log start to `offset` (DeleteRecords); false if it is not past the current one.
    pub fn advance_log_start(&mut self, offset: Offset) -> bool {
        if self.log_start_offset.is_some_and(|s| offset.0 <= s) {
            return false;
        }
        self.log_start_offset = Some(offset.0);
        true
    }

    /// Highest offset held remotely (ListOffsets latest-tiered, -5).
    pub fn highest_offset(&self) -> Option<Offset> {
        self.finished().map(|s| Offset(s.end_offset)).max()
    }

    /// The finished copy holding `offset` (none below the DeleteRecords log start).
    pub fn segment_for(&self, offset: Offset) -> Option<&RemoteSegment> {
        if self.log_start_offset.is_some_and(|s| offset.0 < s) {
            return None;
        }
        self.finished().find(|s| s.holds(offset))
    }

    /// Bytes held remotely.
    pub fn size_bytes(&self) -> u64 {
        self.finished().map(|s| s.size_bytes).sum()
    }

    /// Records a crash or a failed copy left behind (`COPY_STARTED`, `DELETE_STARTED`): their
    /// objects are to be deleted and the records dropped.
    pub fn unfinished(&self) -> Vec<RemoteSegment> {
        let unfinished = |s: &&RemoteSegment| {
            matches!(
                s.state,
                SegmentState::CopyStarted | SegmentState::DeleteStarted
            )
        };
        self.segments.iter().filter(unfinished).cloned().collect()
    }

    /// The next local segment to copy: the first of `copyable` past what is copied (or being
    /// copied), so copies go in offset order with no hole.
    pub fn next_to_copy(&self, copyable: &[SealedSegment]) -> Option<SealedSegment> {
        let covered = self
            .segments
            .iter()
            .filter(|s| s.state != SegmentState::DeleteStarted)
            .map(|s| s.next_offset())
            .max();
        copyable
            .iter()
            .find(|s| covered.is_none_or(|c| s.base >= c))
            .copied()
    }

    /// Finished copies total retention deletes at `now`: older than `retention_ms`, or the
    /// oldest while the whole log (remote copies plus `local_bytes_above`, the local log
    /// past the last copy) without it is still at least `retention_bytes`; oldest first.
    pub fn expired(
        &self,
        now: TimestampMs,
        retention_ms: Option<u64>,
        retention_bytes: Option<u64>,
        local_bytes_above: u64,
    ) -> Vec<RemoteSegment> {
        let mut total = self.size_bytes() + local_bytes_above;
        let mut out = Vec::new();
        let start = self.log_start_offset.unwrap_or(0);
        for s in self.finished() {
            let by_records = s.end_offset < start; // DeleteRecords
            let max_timestamp = TimestampMs(s.max_timestamp_ms);
            let by_time = retention_ms.is_some_and(|ms| {
                max_timestamp >= TimestampMs(0)
                    && now.saturating_since(max_timestamp) > DurationMs(ms as i64)
            });
            let by_size = retention_bytes.is_some_and(|max| total - s.size_bytes >= max);
            if !(by_records || by_time || by_size) {
                break;
            }
            total -= s.size_bytes;
            out.push(s.clone());
        }
        out
    }
}

/// The leader epochs of the offsets `[base, next)`, from a log's epoch entries (each epoch
/// with the offset it started at): the epoch in force at `base`, then those starting inside.
pub fn epochs_of(entries: &[(i32, i64)], base: Offset, next: Offset) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = Vec::new();
    for &(epoch, start) in entries {
        if start >= next.0 {
            break;
        }
        if start <= base.0 {
            out.clear();
            out.push((epoch, base.0));
        } else {
            out.push((epoch, start));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(base: i64, next: i64) -> SealedSegment {
        SealedSegment {
            base: Offset(base),
            next_offset: Offset(next),
            size_bytes: 100,
            max_timestamp: TimestampMs(1_000 + base),
        }
    }

    fn copied(meta: &mut RemoteLogMetadata, base: i64, next: i64) -> RemoteSegment {
        let mut s = RemoteSegment::started(&sealed(base, next), vec![]);
        meta.put(s.clone());
        s.state = SegmentState::CopyFinished;
        meta.put(s.clone());
        s
    }

    #[test]
    fn copies_go_in_order_and_the_gate_is_the_contiguous_finished_run() {
        let mut meta = RemoteLogMetadata::decode(None).unwrap();
        let local = [sealed(0, 10), sealed(10, 20), sealed(20, 30)];
        assert_eq!(meta.next_to_copy(&local), Some(local[0]));
        assert_eq!(meta.copied_until(), None);
        let started = RemoteSegment::started(&local[0], vec![(0, 0)]);
        meta.put(started.clone());
        assert_eq!(
            meta.next_to_copy(&local),
            Some(local[1]),
            "in flight counts"
        );
        assert_eq!(meta.copied_until(), None, "not finished");
        assert_eq!(meta.segment_for(Offset(3)), None, "not readable");
        meta.put(RemoteSegment {
            state: SegmentState::CopyFinished,
            ..started
        });
        copied(&mut meta, 10, 20);
        assert_eq!(meta.copied_until(), Some(Offset(20)));
        assert_eq!(meta.earliest_offset(), Some(Offset(0)));
        assert_eq!(meta.highest_offset(), Some(Offset(19)));
        assert_eq!(meta.segment_for(Offset(15)).unwrap().base_offset, 10);
        assert_eq!(meta.next_to_copy(&local), Some(local[2]));
        let decoded = RemoteLogMetadata::decode(Some(&meta.encode())).unwrap();
        assert_eq!(decoded, meta, "round trip");
    }

    #[test]
    fn unfinished_records_are_found_and_delete_finished_leaves_the_file() {
        let mut meta = RemoteLogMetadata::decode(None).unwrap();
        let done = copied(&mut meta, 0, 10);
        let crashed = RemoteSegment::started(&sealed(10, 20), vec![]);
        meta.put(crashed.clone());
        assert_eq!(meta.unfinished(), vec![crashed.clone()]);
        meta.put(RemoteSegment {
            state: SegmentState::DeleteFinished,
            ..crashed
        });
        assert_eq!(meta.segments(), &[done]);
        assert!(RemoteLogMetadata::decode(Some(b"{\"version\":9,\"segments\":[]}")).is_err());
    }

    #[test]
    fn total_retention_expires_the_oldest_copies() {
        let mut meta = RemoteLogMetadata::decode(None).unwrap();
        for base in [0, 10, 20] {
            copied(&mut meta, base, base + 10);
        }
        let now = TimestampMs(1_015);
        let by_time = meta.expired(now, Some(10), None, 0);
        assert_eq!(
            by_time.len(),
            1,
            "only the one older than 10 ms: {by_time:?}"
        );
        // 400 bytes in all: without the oldest 300 >= 250, without two 200 < 250.
        let by_size = meta.expired(now, None, Some(250), 100);
        assert_eq!(by_size.len(), 1);
        assert_eq!(meta.expired(now, None, Some(200), 100).len(), 2);
        assert!(meta.expired(now, None, None, 0).is_empty());
    }

    #[test]
    fn delete_records_hides_and_expires_what_lies_below_it() {
        let mut meta = RemoteLogMetadata::decode(None).unwrap();
        for base in [0, 10, 20] {
            copied(&mut meta, base, base + 10);
        }
        assert!(meta.advance_log_start(Offset(15)));
        assert!(!meta.advance_log_start(Offset(12)), "only forward");
        assert_eq!(meta.earliest_offset(), Some(Offset(15)));
        assert_eq!(meta.segment_for(Offset(14)), None);
        assert_eq!(meta.segment_for(Offset(15)).unwrap().base_offset, 10);
        let expired = meta.expired(TimestampMs(0), None, None, 0);
        assert_eq!(expired.len(), 1, "the copy wholly below 15: {expired:?}");
        let decoded = RemoteLogMetadata::decode(Some(&meta.encode())).unwrap();
        assert_eq!(decoded, meta, "the log start is durable");
    }

    #[test]
    fn a_segments_epochs_start_with_the_one_in_force() {
        let entries = [(0, 0), (3, 15), (5, 40)];
        assert_eq!(
            epochs_of(&entries, Offset(10), Offset(20)),
            vec![(0, 10), (3, 15)]
        );
        assert_eq!(epochs_of(&entries, Offset(20), Offset(30)), vec![(3, 20)]);
        assert!(epochs_of(&[], Offset(0), Offset(5)).is_empty());
    }
}
