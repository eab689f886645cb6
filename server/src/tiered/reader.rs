//! Reads from the remote tier: whole batches of a copied segment from an offset, with ranged
//! GETs guided by the segment's remote offset index.
//!
//! 1. The segment's `.index` (8 bytes per `index.interval.bytes` of log) is fetched once and
//!    kept in the shard's [`IndexCache`] (bounded, least recently used first out).
//! 2. The entry at or below the wanted offset gives the byte position to start at.
//! 3. One ranged GET of about what the fetch may return (at least [`READ_BYTES_MIN`], at most
//!    [`READ_BYTES_MAX`], never past the segment's end) brings batches; whole batches are cut
//!    from it, those ending before the offset skipped. A first batch larger than the range is
//!    fetched again whole (a fetch returns at least one batch, as Kafka's).
//!
//! A batch's framing is checked (its length inside the segment, offsets moving forward); a
//! bad one is an error, never a panic. Record CRCs are the client's to check, as for local reads.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use bytes::Bytes;
use rill_engine::segment::offset_index::OffsetIndex;
use rill_types::{Offset, RelativeOffset};
use uuid::Uuid;

use super::keys::{ObjectKind, PartitionKeys};
use super::metadata::RemoteSegment;
use super::store::{RemoteError, RemoteStore};

/// Least bytes one ranged GET asks for.
pub const READ_BYTES_MIN: u64 = 64 << 10;
/// Most bytes one ranged GET asks for.
pub const READ_BYTES_MAX: u64 = 8 << 20;
/// Remote offset indexes a shard keeps in memory.
pub const INDEX_CACHE_ENTRIES: usize = 256;
/// A v2 batch header's bytes up to and including `lastOffsetDelta`.
const HEADER_BYTES: usize = 27;

/// The shard's cache of remote offset indexes, by segment copy id.
#[derive(Default)]
pub struct IndexCache {
    entries: RefCell<VecDeque<(Uuid, Rc<OffsetIndex>)>>,
}

impl IndexCache {
    fn get(&self, id: Uuid) -> Option<Rc<OffsetIndex>> {
        let mut entries = self.entries.borrow_mut();
        let at = entries.iter().position(|(i, _)| *i == id)?;
        let entry = entries.remove(at).expect("found");
        let index = entry.1.clone();
        entries.push_back(entry);
        Some(index)
    }

    fn put(&self, id: Uuid, index: Rc<OffsetIndex>) {
        let mut entries = self.entries.borrow_mut();
        entries.retain(|(i, _)| *i != id);
        entries.push_back((id, index));
        while entries.len() > INDEX_CACHE_ENTRIES {
            entries.pop_front();
        }
    }
}

/// Whole batches of `segment` from `from` (which it holds), up to `max_bytes` after the first.
pub async fn read_segment(
    store: &RemoteStore,
    cache: &IndexCache,
    keys: &PartitionKeys,
    segment: &RemoteSegment,
    from: Offset,
    max_bytes: usize,
) -> Result<Vec<Bytes>, RemoteError> {
    let base = Offset(segment.base_offset);
    let key = keys.object(base, segment.id, ObjectKind::Log);
    let start = start_position(store, cache, keys, segment, from).await?;
    let end = segment.size_bytes;
    let want = (max_bytes as u64).clamp(READ_BYTES_MIN, READ_BYTES_MAX);
    let range = start..(start + want).min(end);
    let bytes = store.get_range(key.clone(), range).await?;
    match cut_batches(&bytes, from, max_bytes)? {
        Cut::Batches(chunks) => Ok(chunks),
        Cut::FirstIncomplete { at, len } => {
            let pos = start + at as u64;
            if pos + len > end {
                return Err(RemoteError::Other("a batch runs past its segment".into()));
            }
            let whole = store.get_range(key, pos..pos + len).await?;
            Ok(vec![whole])
        }
    }
}

/// Where in the segment's `.log` to start reading for `from`.
async fn start_position(
    store: &RemoteStore,
    cache: &IndexCache,
    keys: &PartitionKeys,
    segment: &RemoteSegment,
    from: Offset,
) -> Result<u64, RemoteError> {
    let base = Offset(segment.base_offset);
    let index = match cache.get(segment.id) {
        Some(index) => index,
        None => {
            let key = keys.object(base, segment.id, ObjectKind::Index);
            let bytes = match store.get(key).await {
                Ok(bytes) => bytes,
                Err(RemoteError::NotFound(_)) => Bytes::new(), // no index: scan from the start
                Err(e) => return Err(e),
            };
            let index = OffsetIndex::decode(&bytes, segment.size_bytes).unwrap_or_default();
            let index = Rc::new(index);
            cache.put(segment.id, index.clone());
            index
        }
    };
    let rel = RelativeOffset::between(from, base);
    Ok(index.lookup(rel).map_or(0, |(_, pos)| u64::from(pos.0)))
}

/// What [`cut_batches`] found.
#[derive(Debug, PartialEq, Eq)]
enum Cut {
    /// Whole batches (possibly none: the range held none past `from`).
    Batches(Vec<Bytes>),
    /// The first batch to return starts at `at` and is `len` bytes, more than the range has.
    FirstIncomplete { at: usize, len: u64 },
}

/// Whole batches of `bytes` (starting at a batch) ending at or past `from`, up to `max_bytes`
/// after the first.
fn cut_batches(bytes: &Bytes, from: Offset, max_bytes: usize) -> Result<Cut, RemoteError> {
    let mut out = Vec::new();
    let (mut at, mut total) = (0usize, 0usize);
    while bytes.len() - at >= HEADER_BYTES {
        let header = &bytes[at..at + HEADER_BYTES];
        let base = i64::from_be_bytes(header[0..8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(header[8..12].try_into().expect("4 bytes"));
        let delta = i32::from_be_bytes(header[23..27].try_into().expect("4 bytes"));
        if length < (HEADER_BYTES - 12) as i32 || delta < 0 || base < 0 {
            return Err(RemoteError::Other(format!(
                "bad batch framing at {at} (length {length})"
            )));
        }
        let len = 12 + length as usize;
        if base + i64::from(delta) < from.0 {
            at += len;
            continue;
        }
        if at + len > bytes.len() {
            if out.is_empty() {
                return Ok(Cut::FirstIncomplete {
                    at,
                    len: len as u64,
                });
            }
            break;
        }
        if !out.is_empty() && total + len > max_bytes {
            break;
        }
        out.push(bytes.slice(at..at + len));
        total += len;
        at += len;
    }
    Ok(Cut::Batches(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, records: i32, payload: usize) -> Vec<u8> {
        let mut b = vec![0u8; 61 + payload];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        let length = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        b[23..27].copy_from_slice(&(records - 1).to_be_bytes());
        b
    }

    #[test]
    fn whole_batches_from_the_offset_up_to_the_budget() {
        let mut log = Vec::new();
        for base in [0, 5, 10, 15] {
            log.extend(batch(base, 5, 100));
        }
        let bytes = Bytes::from(log);
        let Cut::Batches(got) = cut_batches(&bytes, Offset(7), 300).unwrap() else {
            panic!("whole batches")
        };
        assert_eq!(got.len(), 1, "161 + 161 > 300");
        assert_eq!(&got[0][0..8], &5i64.to_be_bytes());
        let Cut::Batches(all) = cut_batches(&bytes, Offset(0), 1 << 20).unwrap() else {
            panic!()
        };
        assert_eq!(all.len(), 4);
        let cut = bytes.slice(0..200);
        assert_eq!(
            cut_batches(&cut, Offset(5), 10).unwrap(),
            Cut::FirstIncomplete { at: 161, len: 161 }
        );
        let mut bad = batch(0, 1, 10);
        bad[8..12].copy_from_slice(&(-4i32).to_be_bytes());
        assert!(cut_batches(&Bytes::from(bad), Offset(0), 100).is_err());
    }
}
