//! [`LeaderEpochs`]: which leader epoch wrote which offsets (Kafka's leader-epoch cache, KIP-101),
//! and its checkpoint file `leader-epoch-checkpoint`.
//!
//! One entry per epoch that wrote at least one batch: `(epoch, start offset)`, both strictly
//! increasing. The end offset of an epoch is the start of the next entry, or the log end for the
//! latest. A follower asks its leader for the end of its own latest epoch (OffsetForLeaderEpoch,
//! or the diverging epoch of a Fetch, KIP-320/595) and cuts its log there: whatever it holds past
//! that offset was never written by the leader that won.
//!
//! # File format (Kafka's, text)
//! ```text
//! 0                 version
//! 2                 number of entries
//! 0 0               epoch start-offset
//! 3 1207
//! ```
//! Written atomically (temp file, fsync, rename) whenever an entry is added or entries are cut,
//! *before* the batch that starts a new epoch is written: an entry whose start is past the
//! recovered log end is dropped at open (its batch never became durable), so the file is never
//! behind the durable log.

use crate::types::Offset;
use rill_types::LeaderEpoch;

/// Name of the checkpoint file in a partition directory (Kafka's).
pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";
/// Format version written on the first line.
const VERSION: u32 = 0;
/// Entries read at most from a file (a damaged count must not allocate unbounded memory).
const ENTRIES_MAX: usize = 1 << 20;

/// The epochs of one partition log and where each started (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochs {
    entries: Vec<(LeaderEpoch, Offset)>,
}

impl LeaderEpochs {
    /// The entries, oldest first.
    pub fn entries(&self) -> &[(LeaderEpoch, Offset)] {
        &self.entries
    }

    /// The latest epoch that wrote to the log (`None`: none recorded).
    pub fn latest(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|(e, _)| *e)
    }

    /// Note that `epoch` wrote a batch starting at `start`. Returns whether this added an entry
    /// (a newer epoch); older or equal epochs change nothing (a follower copies batches whose
    /// epochs only grow; a negative epoch is "unknown" and never recorded).
    pub fn assign(&mut self, epoch: LeaderEpoch, start: Offset) -> bool {
        if epoch.0 < 0 || self.latest().is_some_and(|latest| epoch <= latest) {
            return false;
        }
        if let Some((_, last_start)) = self.entries.last() {
            assert!(start >= *last_start, "epoch starts only grow");
        }
        // Two epochs starting at the same offset: the older never wrote anything that stayed.
        self.entries.retain(|(_, s)| *s < start);
        self.entries.push((epoch, start));
        true
    }

    /// Kafka's `endOffsetFor`: for the largest epoch `<= epoch` that wrote here, that epoch and
    /// the offset where the next epoch started (or `log_end` for the latest). An `epoch` older
    /// than every entry ends where the first one starts (`epoch` itself is answered, as Kafka
    /// does). `None` for an undefined (negative) epoch or an empty cache (the caller answers
    /// UNDEFINED: -1/-1).
    pub fn end_offset_for(
        &self,
        epoch: LeaderEpoch,
        log_end: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        let i = self.entries.partition_point(|(e, _)| *e <= epoch);
        if i == 0 {
            let first = self.entries.first().filter(|_| epoch.0 >= 0)?;
            return Some((epoch, first.1));
        }
        let found = self.entries[i - 1].0;
        let end = self.entries.get(i).map_or(log_end, |(_, start)| *start);
        Some((found, end))
    }

    /// Forget epochs that started at or after `end` (the log was cut there). Returns whether
    /// anything was removed.
    pub fn truncate_from_end(&mut self, end: Offset) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(_, start)| *start < end);
        self.entries.len() != before
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut text = format!("{VERSION}\n{}\n", self.entries.len());
        for (epoch, start) in &self.entries {
            text.push_str(&format!("{} {}\n", epoch.0, start.0));
        }
        text.into_bytes()
    }

    /// Parse a file; `None` if it is not one (the caller starts empty and logs it).
    pub fn decode(bytes: &[u8]) -> Option<LeaderEpochs> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        if lines.next()?.trim().parse::<u32>().ok()? != VERSION {
            return None;
        }
        let count: usize = lines.next()?.trim().parse().ok()?;
        if count > ENTRIES_MAX {
            return None;
        }
        let mut out = LeaderEpochs::default();
        for _ in 0..count {
            let mut parts = lines.next()?.split_whitespace();
            let epoch = LeaderEpoch(parts.next()?.parse().ok()?);
            let start = Offset(parts.next()?.parse().ok()?);
            let ordered = out
                .entries
                .last()
                .is_none_or(|(e, s)| epoch > *e && start > *s);
            if epoch.0 < 0 || start.0 < 0 || !ordered {
                return None;
            }
            out.entries.push((epoch, start));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(entries: &[(i32, i64)]) -> LeaderEpochs {
        let mut e = LeaderEpochs::default();
        for &(epoch, start) in entries {
            assert!(e.assign(LeaderEpoch(epoch), Offset(start)));
        }
        e
    }

    #[test]
    fn end_offsets_follow_kafkas_end_offset_for() {
        let e = epochs(&[(0, 0), (3, 100), (5, 250)]);
        let end = |epoch| e.end_offset_for(LeaderEpoch(epoch), Offset(300));
        assert_eq!(end(0), Some((LeaderEpoch(0), Offset(100))));
        assert_eq!(
            end(2),
            Some((LeaderEpoch(0), Offset(100))),
            "largest epoch <= asked"
        );
        assert_eq!(end(3), Some((LeaderEpoch(3), Offset(250))));
        assert_eq!(
            end(5),
            Some((LeaderEpoch(5), Offset(300))),
            "latest ends at the log end"
        );
        assert_eq!(end(9), Some((LeaderEpoch(5), Offset(300))));
        assert_eq!(end(-1), None);
        let later = epochs(&[(3, 100), (5, 250)]);
        assert_eq!(
            later.end_offset_for(LeaderEpoch(1), Offset(300)),
            Some((LeaderEpoch(1), Offset(100))),
            "older than every entry: ends where the first starts"
        );
        assert_eq!(
            LeaderEpochs::default().end_offset_for(LeaderEpoch(0), Offset(0)),
            None
        );
    }

    #[test]
    fn older_epochs_and_unknown_epochs_add_nothing() {
        let mut e = epochs(&[(2, 10)]);
        assert!(!e.assign(LeaderEpoch(2), Offset(20)));
        assert!(!e.assign(LeaderEpoch(1), Offset(20)));
        assert!(!e.assign(LeaderEpoch(-1), Offset(20)));
        assert_eq!(e.entries(), &[(LeaderEpoch(2), Offset(10))]);
        assert!(
            e.assign(LeaderEpoch(4), Offset(10)),
            "same start: the older wrote nothing"
        );
        assert_eq!(e.entries(), &[(LeaderEpoch(4), Offset(10))]);
    }

    #[test]
    fn truncation_cuts_epochs_starting_at_or_after_the_end() {
        let mut e = epochs(&[(0, 0), (3, 100), (5, 250)]);
        assert!(!e.truncate_from_end(Offset(251)));
        assert!(e.truncate_from_end(Offset(250)));
        assert_eq!(e.latest(), Some(LeaderEpoch(3)));
        assert!(e.truncate_from_end(Offset(0)));
        assert_eq!(e.latest(), None);
    }

    #[test]
    fn file_round_trips_and_refuses_damage() {
        let e = epochs(&[(0, 0), (3, 100)]);
        assert_eq!(e.encode(), b"0\n2\n0 0\n3 100\n");
        assert_eq!(LeaderEpochs::decode(&e.encode()), Some(e));
        assert_eq!(
            LeaderEpochs::decode(b"0\n0\n"),
            Some(LeaderEpochs::default())
        );
        for bad in [
            &b""[..],
            b"1\n0\n",
            b"0\n2\n0 0\n",
            b"0\n2\n3 0\n1 5\n",
            b"0\nx\n",
            b"0\n1\n-1 0\n",
        ] {
            assert_eq!(
                LeaderEpochs::decode(bad),
                None,
                "{:?}",
                std::str::from_utf8(bad)
            );
        }
    }
}
