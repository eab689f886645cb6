//! Swapping a cleaned segment in for the segments it replaces, so that a crash at any step
//! loses nothing; and what recovery does with what a crash left. The on-disk contract.
//!
//! Files (`B` is the cleaned segment's base, that of the first segment it replaces; `Bi` the
//! bases of the others):
//!
//! | name                          | meaning                                                   |
//! |-------------------------------|-----------------------------------------------------------|
//! | `B.log.cleaned`               | a cleaned segment being written, or written and synced    |
//! | `B.index.cleaned`, `B.timeindex.cleaned`, `B.txnindex.cleaned` | its indexes (each complete: atomic writes; the `.txnindex` only if it has entries) |
//! | `Bi.log.deleted`              | a replaced segment moved aside before the commit          |
//! | `B.log.swap`                  | the commit: the cleaned segment is whole and replaces `B` and every `.deleted` |
//! | `cleaner-checkpoint`          | `[i64 first dirty offset BE][i64 delete horizon BE, -1 if none][u32 crc32c BE of the 16 bytes]`: what the last whole clean left for the next |
//!
//! Steps of [`PartitionLog::install_cleaned`] (each rename and removal is durable on return):
//! ```text
//!  0. B.log.cleaned and its indexes are durable          (CleanedWriter::finish)
//!  1. rename Bi.log -> Bi.log.deleted, for each Bi        crash: undo (rename back)
//!  2. rename B.log.cleaned -> B.log.swap                  commit point
//!  3. remove Bi.log.deleted, Bi.index, Bi.timeindex, Bi.txnindex   crash: redo from here
//!  4. rename B.index.cleaned -> B.index, B.timeindex.cleaned -> B.timeindex,
//!     B.txnindex.cleaned -> B.txnindex (if there is one)
//!  5. rename B.log.swap -> B.log (replacing the old B.log)
//! ```
//! Recovery, before anything else opens the directory:
//! - a `.log.swap` exists (committed): remove every `.log.deleted`; move each `.cleaned` index
//!   of `B` over `B`'s, or, if it is gone (step 4 done or half done), remove `B`'s `.index` and
//!   `.timeindex` so they are rebuilt from the log, and keep `B.txnindex` as it is (the merged
//!   one if step 4 moved it, else `B`'s own: then the merged one was empty, and so was it);
//!   rename the swap to `B.log`;
//! - no `.log.swap` (not committed): rename every `.log.deleted` back to `.log`;
//! - then remove every `.cleaned` file left.
//!
//! Every step of both is idempotent, so a crash during recovery is recovered the same way.
//! Step 3 comes before 5 so that no `.log.deleted` outlives the swap: once the swap is gone,
//! a `.deleted` file can only be an uncommitted one, safe to restore.

use super::job::CleanedGroup;
use crate::error::EngineError;
use crate::io::{BlockFile, Storage};
use crate::partition_log::PartitionLog;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::segment::Segment;
use crate::small_file;
use crate::types::{Offset, TimestampMs};
use std::path::Path;

/// Suffix of a cleaned segment's files before the swap.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of the cleaned `.log` once committed.
pub const SWAP_SUFFIX: &str = ".swap";
/// Suffix of a replaced `.log` moved aside before the commit.
pub const DELETED_SUFFIX: &str = ".deleted";
/// A segment's files besides its `.log`.
const INDEX_KINDS: [FileKind; 3] = [FileKind::Index, FileKind::TimeIndex, FileKind::TxnIndex];
/// File holding the cleaner checkpoint (the first dirty offset).
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-checkpoint";

/// Whether `name` is a file of a compaction swap in progress (`.cleaned`, `.swap`, `.deleted`),
/// which recovery finishes or undoes.
pub fn is_swap_leftover(name: &str) -> bool {
    [CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

/// `<base>.<ext>.cleaned`.
pub(crate) fn cleaned_name(base: Offset, kind: FileKind) -> String {
    format!("{}{CLEANED_SUFFIX}", segment_file_name(base, kind))
}

fn swap_name(base: Offset) -> String {
    format!("{}{SWAP_SUFFIX}", segment_file_name(base, FileKind::Log))
}

fn deleted_name(base: Offset) -> String {
    format!("{}{DELETED_SUFFIX}", segment_file_name(base, FileKind::Log))
}

impl<S: Storage> PartitionLog<S> {
    /// Swaps `group` in for the segments it replaces (steps in the module doc). `Ok(false)`
    /// if they are no longer all there, unchanged (retention or DeleteRecords removed some):
    /// the cleaned files are deleted and the log is untouched. An I/O error fails the log;
    /// reopening it finishes or undoes the swap.
    pub async fn install_cleaned(&mut self, group: &CleanedGroup) -> Result<bool, EngineError> {
        self.check_usable()?;
        let Some(first) = self.replaced_segments(group) else {
            tracing::info!(dir = %self.dir.display(), base = group.base.0, "cleaned segment no longer matches the log; discarded");
            remove_cleaned_of(&*self.storage, &self.dir, group.base).await?;
            return Ok(false);
        };
        let swapped = self.swap_in(first, group).await;
        if swapped.is_err() {
            self.failed = true;
        }
        swapped?;
        tracing::debug!(dir = %self.dir.display(), base = group.base.0, end = group.end.0, members = group.members.len(), size = group.size_bytes, "swapped in cleaned segment");
        Ok(true)
    }

    /// Index of the first replaced segment if every member is still a sealed segment of the
    /// same size, in order, and the segment after them starts at the group's end.
    fn replaced_segments(&self, group: &CleanedGroup) -> Option<usize> {
        let first = self.segments.iter().position(|s| s.base == group.base)?;
        let n = group.members.len();
        let sealed = self.segments.len() - 1;
        if first + n > sealed || self.segments[first + n].base != group.end {
            return None;
        }
        let same = self.segments[first..first + n]
            .iter()
            .zip(&group.members)
            .all(|(s, &(base, size))| s.base == base && s.size_bytes == size);
        same.then_some(first)
    }

    async fn swap_in(&mut self, first: usize, group: &CleanedGroup) -> Result<(), EngineError> {
        let n = group.members.len();
        for segment in &mut self.segments[first..first + n] {
            if let Some(file) = segment.file.take() {
                file.close().await?;
            }
        }
        let members: Vec<Offset> = group.members.iter().map(|&(b, _)| b).collect();
        self.open_sealed.retain(|b| !members.contains(b));
        let storage = &*self.storage;
        let dir = &self.dir;
        for &base in &members[1..] {
            let log = dir.join(segment_file_name(base, FileKind::Log));
            storage.rename(&log, &dir.join(deleted_name(base))).await?;
        }
        let cleaned_log = dir.join(cleaned_name(group.base, FileKind::Log));
        storage
            .rename(&cleaned_log, &dir.join(swap_name(group.base)))
            .await?;
        for &base in &members[1..] {
            remove_if_exists(storage, &dir.join(deleted_name(base))).await?;
            for kind in INDEX_KINDS {
                remove_if_exists(storage, &dir.join(segment_file_name(base, kind))).await?;
            }
        }
        for kind in INDEX_KINDS {
            let from = dir.join(cleaned_name(group.base, kind));
            let to = dir.join(segment_file_name(group.base, kind));
            if kind != FileKind::TxnIndex || storage.exists(&from).await? {
                storage.rename(&from, &to).await?;
            }
        }
        let log = dir.join(segment_file_name(group.base, FileKind::Log));
        storage
            .rename(&dir.join(swap_name(group.base)), &log)
            .await?;
        self.replace_in_memory(first, group);
        Ok(())
    }

    /// The segment table after the swap: one summary (indexes on disk) for the members.
    fn replace_in_memory(&mut self, first: usize, group: &CleanedGroup) {
        let mut cleaned = Segment::new(group.base);
        cleaned.may_have_gaps = true;
        cleaned.next_offset = group.end;
        cleaned.size_bytes = group.size_bytes;
        cleaned.max_timestamp = group.max_timestamp;
        cleaned.txn_first_offset_min = group.txn_first_offset_min;
        cleaned.drop_indexes();
        let n = group.members.len();
        self.segments.splice(first..first + n, [cleaned]);
        self.cache.drop_below(group.end);
        self.read_cache.forget_below(self.read_cache_log, group.end);
        debug_assert!(self
            .segments
            .windows(2)
            .all(|w| w[0].next_offset == w[1].base));
    }

    /// Records what a whole clean leaves for the next one (the end of a clean).
    pub async fn finish_clean(&mut self, checkpoint: CleanerCheckpoint) -> Result<(), EngineError> {
        self.check_usable()?;
        let bytes = checkpoint.encode();
        small_file::write_atomic(&*self.storage, &self.dir, CLEANER_CHECKPOINT_FILE, &bytes)
            .await?;
        Ok(())
    }

    /// Finishes or undoes a swap a crash interrupted (the recovery rules in the module doc).
    pub(crate) async fn recover_interrupted_swap(&self) -> Result<(), EngineError> {
        let storage = &*self.storage;
        let dir = &self.dir;
        let names = storage.list_dir(dir).await?;
        let swaps: Vec<Offset> = names
            .iter()
            .filter_map(|n| n.strip_suffix(SWAP_SUFFIX))
            .filter_map(parse_log_name)
            .collect();
        for name in names.iter().filter(|n| n.ends_with(DELETED_SUFFIX)) {
            let path = dir.join(name);
            if swaps.is_empty() {
                let restored = name.strip_suffix(DELETED_SUFFIX).expect("filtered");
                tracing::warn!(dir = %dir.display(), name, "undoing an uncommitted compaction swap");
                storage.rename(&path, &dir.join(restored)).await?;
            } else {
                storage.remove_file(&path).await?;
            }
        }
        for &base in &swaps {
            tracing::warn!(dir = %dir.display(), base = base.0, "finishing a committed compaction swap");
            for kind in INDEX_KINDS {
                let cleaned = dir.join(cleaned_name(base, kind));
                let target = dir.join(segment_file_name(base, kind));
                if storage.exists(&cleaned).await? {
                    storage.rename(&cleaned, &target).await?;
                } else if kind != FileKind::TxnIndex {
                    remove_if_exists(storage, &target).await?;
                }
            }
            let log = dir.join(segment_file_name(base, FileKind::Log));
            storage.rename(&dir.join(swap_name(base)), &log).await?;
        }
        remove_cleaned_leftovers(storage, dir).await
    }
}

/// The base offset of a `<20 digits>.log` name.
fn parse_log_name(name: &str) -> Option<Offset> {
    match crate::segment::file_name::parse_segment_file_name(name)? {
        (base, FileKind::Log) => Some(base),
        _ => None,
    }
}

/// Removes every `.cleaned` file in `dir` (an abandoned or uncommitted clean).
pub(crate) async fn remove_cleaned_leftovers<S: Storage>(
    storage: &S,
    dir: &Path,
) -> Result<(), EngineError> {
    for name in storage.list_dir(dir).await? {
        if name.ends_with(CLEANED_SUFFIX) {
            storage.remove_file(&dir.join(name)).await?;
        }
    }
    Ok(())
}

/// Removes the `.cleaned` files of the group at `base`.
async fn remove_cleaned_of<S: Storage>(
    storage: &S,
    dir: &Path,
    base: Offset,
) -> Result<(), EngineError> {
    for kind in FileKind::ALL {
        remove_if_exists(storage, &dir.join(cleaned_name(base, kind))).await?;
    }
    Ok(())
}

async fn remove_if_exists<S: Storage>(storage: &S, path: &Path) -> Result<(), EngineError> {
    if storage.exists(path).await? {
        storage.remove_file(path).await?;
    }
    Ok(())
}

/// What a whole clean leaves for the next one (`cleaner-checkpoint`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CleanerCheckpoint {
    /// Where the next clean's dirty section starts: everything below was cleaned.
    pub first_dirty: Offset,
    /// The earliest delete horizon of the tombstones the clean kept. Once it has passed, a
    /// clean is due even with nothing dirty, so tombstones go on a quiet log too (as Kafka's
    /// cleaner does since KIP-534).
    pub delete_horizon: Option<TimestampMs>,
}

impl CleanerCheckpoint {
    fn encode(&self) -> Vec<u8> {
        let mut out = self.first_dirty.0.to_be_bytes().to_vec();
        let horizon = self.delete_horizon.unwrap_or(TimestampMs::NONE);
        out.extend_from_slice(&horizon.0.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&out).to_be_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (body, crc) = (bytes.get(..16)?, bytes.get(16..20)?);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return None;
        }
        let word = |i: usize| i64::from_be_bytes(body[i..i + 8].try_into().expect("8 bytes"));
        Some(CleanerCheckpoint {
            first_dirty: Offset(word(0)),
            delete_horizon: Some(TimestampMs(word(8))).filter(|&h| h != TimestampMs::NONE),
        })
    }
}

/// The cleaner checkpoint, `None` if there is none (never cleaned) or it is damaged.
pub(crate) async fn read_cleaner_checkpoint<S: Storage>(
    storage: &S,
    dir: &Path,
) -> Result<Option<CleanerCheckpoint>, EngineError> {
    let bytes = small_file::read_whole(storage, &dir.join(CLEANER_CHECKPOINT_FILE)).await?;
    Ok(bytes.and_then(|b| CleanerCheckpoint::decode(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_and_damage_reads_as_none() {
        for horizon in [
            None,
            Some(TimestampMs(0)),
            Some(TimestampMs(1_700_000_000_000)),
        ] {
            let cp = CleanerCheckpoint {
                first_dirty: Offset(42),
                delete_horizon: horizon,
            };
            let bytes = cp.encode();
            assert_eq!(CleanerCheckpoint::decode(&bytes), Some(cp));
            for i in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[i] ^= 1;
                assert_eq!(CleanerCheckpoint::decode(&bad), None);
            }
            assert_eq!(CleanerCheckpoint::decode(&bytes[..19]), None);
        }
    }
}
