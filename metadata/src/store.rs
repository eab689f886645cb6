//! The durable raft log of the metadata quorum, as raft-rs's [`raft::Storage`].
//!
//! On disk (a directory, Kafka names it `__cluster_metadata-0`):
//!
//! ```text
//! raft.log   frames, appended:  len:u32 | crc32c(kind+payload):u32 | kind:u8 | payload
//!            kind 1 = Entry (raft-rs protobuf), kind 2 = HardState (protobuf)
//! snapshot   one frame of kind 3 = Snapshot (protobuf: index, term, voters, image bytes)
//! ```
//!
//! Recovery reads the snapshot, then replays `raft.log` in order: an entry at index `i` drops
//! every entry at `>= i` before it is added (a new leader overwrote a suffix), entries at or below
//! the snapshot are skipped, the last HardState wins. Replay stops at the first frame that is
//! short or fails its CRC, and the file is cut there: such a frame was never synced, so nothing
//! was acknowledged from it (raft-rs sends votes and acknowledgements only after we persisted).
//!
//! Compaction ([`RaftStore::compact`]) writes a snapshot of the applied image, then rewrites
//! `raft.log` with the HardState and the entries after the snapshot, each step atomic; a crash
//! between the two leaves entries the snapshot covers, which replay skips.

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use crate::files::MetaFiles;

/// The raft log file.
pub const LOG_FILE: &str = "raft.log";
/// The snapshot file.
pub const SNAPSHOT_FILE: &str = "snapshot";

const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_SNAPSHOT: u8 = 3;
/// len + crc + kind.
const FRAME_HEADER_BYTES: usize = 9;
/// Largest frame accepted on replay (an entry is bounded far below; a snapshot holds the image).
const FRAME_BYTES_MAX: usize = 256 << 20;

/// Why the metadata log cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing failed.
    #[error("metadata log I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A durable file is damaged where no crash could have damaged it.
    #[error("metadata log is damaged: {0}")]
    Corrupt(String),
    /// The log was written for another set of voters (static quorums cannot change).
    #[error(
        "the metadata log was written by voters {stored:?}, but controller.quorum.voters names \
         {configured:?}"
    )]
    VotersChanged {
        /// Raft ids in the log.
        stored: Vec<u64>,
        /// Raft ids configured.
        configured: Vec<u64>,
    },
}

/// What recovery found, for the start-up log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Index of the snapshot recovered (0: none).
    pub snapshot_index: u64,
    /// Entries recovered after it.
    pub entries: usize,
    /// Bytes of a torn tail cut from `raft.log`.
    pub torn_bytes: usize,
}

/// raft-rs storage over [`MetaFiles`] (see the module doc).
pub struct RaftStore<F: MetaFiles> {
    files: F,
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
    /// Entries after the snapshot, contiguous.
    entries: Vec<Entry>,
}

impl<F: MetaFiles> RaftStore<F> {
    /// Recover the log from `files`, or start an empty one for `voters` (raft ids).
    pub fn open(mut files: F, voters: &[u64]) -> Result<(Self, Recovery), StoreError> {
        let mut voters = voters.to_vec();
        voters.sort_unstable();
        let mut recovery = Recovery::default();
        let snapshot = match files.read(SNAPSHOT_FILE)? {
            Some(bytes) => read_snapshot(&bytes)?,
            None => {
                let mut s = Snapshot::default();
                s.mut_metadata().mut_conf_state().voters = voters.clone();
                s
            }
        };
        let conf_state = snapshot.get_metadata().get_conf_state().clone();
        let mut stored = conf_state.voters.clone();
        stored.sort_unstable();
        if stored != voters {
            return Err(StoreError::VotersChanged {
                stored,
                configured: voters,
            });
        }
        recovery.snapshot_index = snapshot.get_metadata().index;
        let mut store = Self {
            files,
            hard_state: HardState::default(),
            conf_state,
            snapshot,
            entries: Vec::new(),
        };
        recovery.torn_bytes = store.replay()?;
        recovery.entries = store.entries.len();
        let snapshot_index = store.snapshot.get_metadata().index;
        if store.hard_state.commit < snapshot_index {
            store.hard_state.commit = snapshot_index;
        }
        if store.hard_state.term < store.snapshot.get_metadata().term {
            store.hard_state.term = store.snapshot.get_metadata().term;
        }
        Ok((store, recovery))
    }

    /// Replay `raft.log`; returns the bytes of a torn tail cut off.
    fn replay(&mut self) -> Result<usize, StoreError> {
        let Some(bytes) = self.files.read(LOG_FILE)? else {
            return Ok(0);
        };
        let mut at = 0;
        while let Some((kind, payload)) = next_frame(&bytes[at..]) {
            match kind {
                KIND_ENTRY => {
                    let entry = Entry::parse_from_bytes(payload)
                        .map_err(|e| StoreError::Corrupt(format!("entry at byte {at}: {e}")))?;
                    self.put_entry(entry)?;
                }
                KIND_HARD_STATE => {
                    self.hard_state = HardState::parse_from_bytes(payload)
                        .map_err(|e| StoreError::Corrupt(format!("state at byte {at}: {e}")))?;
                }
                other => {
                    return Err(StoreError::Corrupt(format!(
                        "frame kind {other} at byte {at}"
                    )))
                }
            }
            at += FRAME_HEADER_BYTES + payload.len();
        }
        let torn = bytes.len() - at;
        if torn > 0 {
            tracing::warn!(torn, "metadata log: cutting a torn tail");
            self.files.truncate(LOG_FILE, at as u64)?;
        }
        Ok(torn)
    }

    /// Add one recovered entry with "a later write of index i replaces i.." semantics.
    fn put_entry(&mut self, entry: Entry) -> Result<(), StoreError> {
        let snapshot_index = self.snapshot.get_metadata().index;
        if entry.index <= snapshot_index {
            return Ok(());
        }
        let first = snapshot_index + 1;
        let keep = (entry.index - first) as usize;
        if keep > self.entries.len() {
            return Err(StoreError::Corrupt(format!(
                "gap before entry {} (have up to {})",
                entry.index,
                self.last()
            )));
        }
        self.entries.truncate(keep);
        self.entries.push(entry);
        Ok(())
    }

    fn first(&self) -> u64 {
        self.snapshot.get_metadata().index + 1
    }

    fn last(&self) -> u64 {
        self.entries
            .last()
            .map_or(self.snapshot.get_metadata().index, |e| e.index)
    }

    /// The latest snapshot (its index, term, voters and image bytes).
    pub fn latest_snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The durable HardState (term, vote, commit).
    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// Append entries from a `Ready` (they may replace a suffix); durable after [`Self::sync`].
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), StoreError> {
        let mut frames = Vec::new();
        for entry in entries {
            assert!(entry.index >= self.first(), "append below the snapshot");
            assert!(entry.index <= self.last() + 1, "append leaves a gap");
            push_frame(
                &mut frames,
                KIND_ENTRY,
                &entry.write_to_bytes().expect("encode"),
            );
            self.put_entry(entry.clone())?;
        }
        if !frames.is_empty() {
            self.files.append(LOG_FILE, &frames)?;
        }
        Ok(())
    }

    /// Record a new HardState; durable after [`Self::sync`].
    pub fn set_hard_state(&mut self, hard_state: HardState) -> Result<(), StoreError> {
        let mut frame = Vec::new();
        let bytes = hard_state.write_to_bytes().expect("encode");
        push_frame(&mut frame, KIND_HARD_STATE, &bytes);
        self.files.append(LOG_FILE, &frame)?;
        self.hard_state = hard_state;
        Ok(())
    }

    /// Record a new commit index (not synced on its own: a lost commit index is learnt again).
    pub fn set_commit(&mut self, commit: u64) -> Result<(), StoreError> {
        let mut hard_state = self.hard_state.clone();
        hard_state.commit = commit;
        self.set_hard_state(hard_state)
    }

    /// Make everything appended durable.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.files.sync(LOG_FILE)?;
        Ok(())
    }

    /// Install a snapshot received from the leader: it replaces the whole log.
    pub fn install_snapshot(&mut self, snapshot: Snapshot) -> Result<(), StoreError> {
        let meta = snapshot.get_metadata();
        assert!(meta.index >= self.snapshot.get_metadata().index);
        self.hard_state.commit = self.hard_state.commit.max(meta.index);
        self.hard_state.term = self.hard_state.term.max(meta.term);
        self.conf_state = meta.get_conf_state().clone();
        self.entries.clear();
        self.write_snapshot(snapshot)
    }

    /// Replace everything up to `snapshot`'s index (which must be applied) by the snapshot.
    pub fn compact(&mut self, snapshot: Snapshot) -> Result<(), StoreError> {
        let index = snapshot.get_metadata().index;
        assert!(
            index <= self.hard_state.commit,
            "compacting uncommitted entries"
        );
        assert!(index >= self.first() - 1 && index <= self.last());
        let drop = (index + 1 - self.first()) as usize;
        self.entries.drain(..drop);
        self.write_snapshot(snapshot)
    }

    fn write_snapshot(&mut self, snapshot: Snapshot) -> Result<(), StoreError> {
        let mut frame = Vec::new();
        push_frame(
            &mut frame,
            KIND_SNAPSHOT,
            &snapshot.write_to_bytes().expect("encode"),
        );
        self.files.replace(SNAPSHOT_FILE, &frame)?;
        self.snapshot = snapshot;
        let mut log = Vec::new();
        push_frame(
            &mut log,
            KIND_HARD_STATE,
            &self.hard_state.write_to_bytes().expect("encode"),
        );
        for entry in &self.entries {
            push_frame(
                &mut log,
                KIND_ENTRY,
                &entry.write_to_bytes().expect("encode"),
            );
        }
        self.files.replace(LOG_FILE, &log)?;
        Ok(())
    }

    /// Entries `[low, high)` (for the apply path and tests).
    pub fn entries_between(&self, low: u64, high: u64) -> &[Entry] {
        assert!(low >= self.first() && high <= self.last() + 1 && low <= high);
        let start = (low - self.first()) as usize;
        &self.entries[start..start + (high - low) as usize]
    }
}

impl<F: MetaFiles> raft::Storage for RaftStore<F> {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let mut entries = self.entries_between(low, high).to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        let meta = self.snapshot.get_metadata();
        if index == meta.index {
            return Ok(meta.term);
        }
        if index < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if index > self.last() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(index - self.first()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot.get_metadata().index < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(self.snapshot.clone())
    }
}

fn push_frame(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    let len = u32::try_from(payload.len() + 1).expect("frame fits u32");
    let mut crc = crc32c::crc32c(&[kind]);
    crc = crc32c::crc32c_append(crc, payload);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
}

/// The frame at the start of `bytes`, if it is whole and its CRC matches.
fn next_frame(bytes: &[u8]) -> Option<(u8, &[u8])> {
    let header = bytes.get(..FRAME_HEADER_BYTES)?;
    let len = u32::from_be_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_be_bytes(header[4..8].try_into().expect("4 bytes"));
    if len == 0 || len > FRAME_BYTES_MAX {
        return None;
    }
    let body = bytes.get(8..8 + len)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    Some((body[0], &body[1..]))
}

fn read_snapshot(bytes: &[u8]) -> Result<Snapshot, StoreError> {
    // The snapshot file is replaced atomically: a bad one is damage, not a torn write.
    match next_frame(bytes) {
        Some((KIND_SNAPSHOT, payload)) if FRAME_HEADER_BYTES + payload.len() == bytes.len() => {
            Snapshot::parse_from_bytes(payload)
                .map_err(|e| StoreError::Corrupt(format!("snapshot: {e}")))
        }
        _ => Err(StoreError::Corrupt(
            "snapshot file fails its checksum".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::sim::SimDisk;
    use raft::Storage;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: vec![index as u8; 10].into(),
            ..Default::default()
        }
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote,
            commit,
            ..Default::default()
        }
    }

    fn terms(store: &RaftStore<impl MetaFiles>) -> Vec<(u64, u64)> {
        store.entries.iter().map(|e| (e.index, e.term)).collect()
    }

    #[test]
    fn recovers_entries_hard_state_and_overwritten_suffixes() {
        let disk = SimDisk::new();
        let (mut store, _) = RaftStore::open(disk.files(), &[1, 2, 3]).unwrap();
        store
            .append(&[entry(1, 1), entry(2, 1), entry(3, 1)])
            .unwrap();
        store.set_hard_state(hard_state(2, 2, 1)).unwrap();
        // A new leader overwrote index 2 and on.
        store.append(&[entry(2, 2)]).unwrap();
        store.sync().unwrap();
        drop(store);
        let (store, recovery) = RaftStore::open(disk.files(), &[3, 2, 1]).unwrap();
        assert_eq!(terms(&store), vec![(1, 1), (2, 2)]);
        assert_eq!(store.hard_state(), &hard_state(2, 2, 1));
        assert_eq!(recovery.entries, 2);
        assert_eq!(
            store.initial_state().unwrap().conf_state.voters,
            vec![1, 2, 3]
        );
    }

    #[test]
    fn a_torn_tail_at_every_byte_recovers_every_synced_entry() {
        let reference = SimDisk::new();
        let (mut store, _) = RaftStore::open(reference.files(), &[1]).unwrap();
        store.append(&[entry(1, 1), entry(2, 1)]).unwrap();
        store.sync().unwrap();
        let synced = reference.durable_len(LOG_FILE);
        store.append(&[entry(3, 1), entry(4, 1)]).unwrap();
        let total = reference.files().read(LOG_FILE).unwrap().unwrap().len();
        for kept in 0..=(total - synced) {
            let disk = SimDisk::new();
            let (mut store, _) = RaftStore::open(disk.files(), &[1]).unwrap();
            store.append(&[entry(1, 1), entry(2, 1)]).unwrap();
            store.sync().unwrap();
            store.append(&[entry(3, 1), entry(4, 1)]).unwrap();
            disk.crash(|_| kept);
            let (store, recovery) = RaftStore::open(disk.files(), &[1]).unwrap();
            let last = store.last();
            assert!(last >= 2, "kept {kept}: lost synced entries");
            assert_eq!(store.term(last).unwrap(), 1);
            let whole = match last {
                2 => synced,
                3 => synced + (total - synced) / 2,
                _ => total,
            };
            assert_eq!(recovery.torn_bytes, synced + kept - whole, "kept {kept}");
            // The cut is durable: appending after recovery continues a clean log.
            let (mut store, _) = RaftStore::open(disk.files(), &[1]).unwrap();
            store.append(&[entry(last + 1, 2)]).unwrap();
            store.sync().unwrap();
            let (store, recovery) = RaftStore::open(disk.files(), &[1]).unwrap();
            assert_eq!((store.last(), recovery.torn_bytes), (last + 1, 0));
        }
    }

    #[test]
    fn compaction_and_installed_snapshots_survive_restart() {
        let disk = SimDisk::new();
        let (mut store, _) = RaftStore::open(disk.files(), &[1, 2, 3]).unwrap();
        store
            .append(&(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>())
            .unwrap();
        store.set_hard_state(hard_state(1, 1, 4)).unwrap();
        store.sync().unwrap();
        let mut snapshot = Snapshot::default();
        snapshot.mut_metadata().index = 3;
        snapshot.mut_metadata().term = 1;
        snapshot.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        snapshot.data = b"image".to_vec().into();
        store.compact(snapshot).unwrap();
        assert_eq!(store.first_index().unwrap(), 4);
        assert_eq!(store.term(3).unwrap(), 1);
        assert!(store.term(2).is_err());
        drop(store);
        let (store, recovery) = RaftStore::open(disk.files(), &[1, 2, 3]).unwrap();
        assert_eq!(recovery.snapshot_index, 3);
        assert_eq!(terms(&store), vec![(4, 1), (5, 1)]);
        assert_eq!(&store.latest_snapshot().data[..], b"image");
        let mut newer = Snapshot::default();
        newer.mut_metadata().index = 10;
        newer.mut_metadata().term = 3;
        newer.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        let (mut store, _) = RaftStore::open(disk.files(), &[1, 2, 3]).unwrap();
        store.install_snapshot(newer).unwrap();
        drop(store);
        let (store, _) = RaftStore::open(disk.files(), &[1, 2, 3]).unwrap();
        assert_eq!((store.first(), store.last()), (11, 10));
        assert_eq!(store.hard_state().commit, 10);
    }

    #[test]
    fn other_voters_and_damaged_snapshots_are_refused() {
        let disk = SimDisk::new();
        let (mut store, _) = RaftStore::open(disk.files(), &[1, 2, 3]).unwrap();
        store.append(&[entry(1, 1)]).unwrap();
        store.set_hard_state(hard_state(1, 1, 1)).unwrap();
        let mut snapshot = Snapshot::default();
        snapshot.mut_metadata().index = 1;
        snapshot.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        store.compact(snapshot).unwrap();
        assert!(matches!(
            RaftStore::open(disk.files(), &[1, 2]),
            Err(StoreError::VotersChanged { .. })
        ));
        let mut files = disk.files();
        let mut bytes = files.read(SNAPSHOT_FILE).unwrap().unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        files.replace(SNAPSHOT_FILE, &bytes).unwrap();
        assert!(matches!(
            RaftStore::open(disk.files(), &[1, 2, 3]),
            Err(StoreError::Corrupt(_))
        ));
    }
}
