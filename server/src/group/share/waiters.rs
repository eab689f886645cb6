//! Fetch order: the ShareFetch that has waited longest on a share-partition acquires its new
//! records first. Kafka completes its delayed share fetches in the order they began to wait,
//! so members that all keep a fetch outstanding take turns; without an order the first fetch to
//! look after an append takes every record, and one member can take them all for ever.
//!
//! Rill's fetches poll (every `RETRY_MS` of the ShareFetch handler), so a waiter is one that
//! looked within [`STALE_MS`]: a fetch that ended, or a member that stopped fetching, holds
//! nobody back for longer than that. One entry per member, so the table is bounded by the
//! group's members. Runtime-free: every call is handed `now` (ms on the coordinator's clock).

use std::collections::HashMap;

use super::super::ops::share::ShareKey;

/// A waiter not seen for longer than this (ms) has stopped waiting: three of the ShareFetch
/// handler's retries, so a live fetch is never taken for gone between two of its looks.
pub const STALE_MS: i64 = 150;

/// One member's outstanding fetch.
#[derive(Debug, Clone)]
struct Waiter {
    /// Its place in line: lower waited longer.
    since: u64,
    /// The share-partitions it waits on.
    keys: Vec<ShareKey>,
    /// When it last looked.
    seen: i64,
}

/// The members waiting for records, in the order they began to wait.
#[derive(Debug, Clone, Default)]
pub struct Waiters {
    next: u64,
    by_member: HashMap<String, Waiter>,
}

impl Waiters {
    /// Notes that `member` looks for records of `keys` at `now`: a member already waiting
    /// keeps its place, a new one goes to the back of the line.
    pub fn look(&mut self, member: &str, keys: &[ShareKey], now: i64) {
        self.by_member.retain(|_, w| live(w, now));
        match self.by_member.get_mut(member) {
            Some(w) => {
                w.seen = now;
                w.keys.clear();
                w.keys.extend_from_slice(keys);
            }
            None => {
                let since = self.next;
                self.next += 1;
                self.by_member.insert(
                    member.to_string(),
                    Waiter {
                        since,
                        keys: keys.to_vec(),
                        seen: now,
                    },
                );
            }
        }
    }

    /// Whether another member has waited longer than `member` on `key` and still waits: then
    /// the new records of `key` are that member's to take first.
    pub fn behind(&self, member: &str, key: &ShareKey, now: i64) -> bool {
        let mine = self.by_member.get(member).map_or(u64::MAX, |w| w.since);
        self.by_member
            .iter()
            .any(|(m, w)| m != member && w.since < mine && live(w, now) && w.keys.contains(key))
    }

    /// `member`'s fetch got records (or the member left): its wait is over.
    pub fn done(&mut self, member: &str) {
        self.by_member.remove(member);
    }

    /// Members in line (bounded by the group's members).
    pub fn len(&self) -> usize {
        self.by_member.len()
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.by_member.is_empty()
    }
}

fn live(w: &Waiter, now: i64) -> bool {
    now.saturating_sub(w.seen) <= STALE_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn key(p: i32) -> ShareKey {
        (Uuid::from_u128(7), rill_types::PartitionIndex(p))
    }

    #[test]
    fn the_longest_waiting_member_goes_first_then_the_next() {
        let mut w = Waiters::default();
        w.look("a", &[key(0)], 0);
        w.look("b", &[key(0)], 10);
        assert!(!w.behind("a", &key(0), 20));
        assert!(w.behind("b", &key(0), 20));
        w.done("a");
        assert!(!w.behind("b", &key(0), 20));
        // a fetches again: it is now behind b.
        w.look("a", &[key(0)], 30);
        assert!(w.behind("a", &key(0), 30));
        assert!(!w.behind("b", &key(0), 30));
    }

    #[test]
    fn looking_again_keeps_a_member_s_place() {
        let mut w = Waiters::default();
        w.look("a", &[key(0)], 0);
        w.look("b", &[key(0)], 1);
        w.look("a", &[key(0)], 50);
        assert!(w.behind("b", &key(0), 60));
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn only_a_waiter_on_the_same_partition_comes_first() {
        let mut w = Waiters::default();
        w.look("a", &[key(0)], 0);
        w.look("b", &[key(1)], 1);
        assert!(!w.behind("b", &key(1), 2));
        assert!(!w.behind("a", &key(0), 2));
    }

    #[test]
    fn a_waiter_gone_quiet_holds_nobody_back_past_the_stale_bound() {
        let mut w = Waiters::default();
        w.look("a", &[key(0)], 0);
        w.look("b", &[key(0)], 0);
        assert!(w.behind("b", &key(0), STALE_MS));
        assert!(!w.behind("b", &key(0), STALE_MS + 1));
        // the next look drops it: the table holds only the living.
        w.look("b", &[key(0)], STALE_MS + 1);
        assert_eq!(w.len(), 1);
        assert!(!w.is_empty());
    }

    #[test]
    fn a_member_not_in_line_is_behind_everyone_waiting() {
        let mut w = Waiters::default();
        w.look("a", &[key(0)], 0);
        assert!(w.behind("c", &key(0), 1));
        assert!(!Waiters::default().behind("c", &key(0), 1));
    }
}
