//! [`LeaderState`]: what a partition's leader knows of its followers (their log ends and when
//! each last caught up), the high watermark over the ISR, ISR changes to ask the controller for,
//! and the acks=all produces waiting for the high watermark. Pure logic, no I/O.

use std::collections::BTreeMap;

use rill_metadata::types::NodeId;
use rill_types::{DurationMs, Offset, TimestampMs};

use super::role::LeaderRole;

/// One follower as its fetches show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerProgress {
    /// Its log end: the offset of its last fetch.
    pub log_end: Offset,
    /// When it last held everything the leader had (Kafka's lastCaughtUpTimeMs).
    pub caught_up_ms: TimestampMs,
    /// The leader's log end at its previous fetch, and when that fetch came.
    last_fetch: (Offset, TimestampMs),
}

/// The leader's view of its followers (reset on every new leader epoch).
#[derive(Clone, Debug)]
pub struct LeaderState {
    /// The role the image gave (epoch, ISR, replicas).
    pub role: LeaderRole,
    /// Followers by node, once they fetched.
    pub followers: BTreeMap<NodeId, FollowerProgress>,
    /// When this leadership began: followers that never fetched count as caught up then.
    pub since_ms: TimestampMs,
    /// An ISR change sent to the controller and not answered yet (no second one meanwhile).
    pub alter_in_flight: bool,
}

impl LeaderState {
    /// A leader that has heard from no follower yet.
    pub fn new(role: LeaderRole, now_ms: TimestampMs) -> Self {
        LeaderState {
            role,
            followers: BTreeMap::new(),
            since_ms: now_ms,
            alter_in_flight: false,
        }
    }

    /// A follower fetched from `fetch_offset` while the leader's log ended at `leader_end`.
    /// It caught up now if it asked for the leader's end; or at its previous fetch if it asked
    /// for what the leader had then (Kafka's rule, so a busy partition does not look lagging).
    pub fn on_fetch(
        &mut self,
        node: NodeId,
        fetch_offset: Offset,
        leader_end: Offset,
        now_ms: TimestampMs,
    ) {
        // The actor answers a fetch past its log end OFFSET_OUT_OF_RANGE before it gets here.
        assert!(
            fetch_offset <= leader_end,
            "a follower fetches within the leader's log"
        );
        let since = self.since_ms;
        let progress = self.followers.entry(node).or_insert(FollowerProgress {
            log_end: fetch_offset,
            caught_up_ms: since,
            last_fetch: (Offset(i64::MAX), now_ms),
        });
        progress.log_end = fetch_offset;
        if fetch_offset >= leader_end {
            progress.caught_up_ms = now_ms;
        } else if fetch_offset >= progress.last_fetch.0 {
            progress.caught_up_ms = progress.caught_up_ms.max(progress.last_fetch.1);
        }
        progress.last_fetch = (leader_end, now_ms);
    }

    /// The high watermark: the least of the leader's own `durable` end and the log ends of
    /// the ISR followers (one that never fetched holds nothing we know of: the log start).
    pub fn high_watermark(&self, me: NodeId, durable: Offset, log_start: Offset) -> Offset {
        assert!(
            log_start <= durable,
            "the log starts at or before its durable end"
        );
        let high_watermark = self
            .isr_followers(me)
            .map(|n| self.followers.get(&n).map_or(log_start, |f| f.log_end))
            .fold(durable, Offset::min);
        assert!(
            high_watermark <= durable,
            "the high watermark is durable on the leader"
        );
        assert!(
            self.isr_followers(me)
                .all(|n| self.followers.get(&n).map_or(log_start, |f| f.log_end) >= high_watermark),
            "every in-sync follower holds the high watermark"
        );
        high_watermark
    }

    /// The ISR's members other than the leader `me`.
    fn isr_followers(&self, me: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.role.isr.iter().copied().filter(move |n| *n != me)
    }

    /// The ISR the leader should ask for, if it differs: members that have not caught up for
    /// `lag_max_ms` leave; replicas whose log end reached `high_watermark` (and that caught up
    /// within `lag_max_ms`) join if they are `live` (the controller refuses fenced brokers).
    /// The leader always stays.
    pub fn wanted_isr(
        &self,
        me: NodeId,
        now_ms: TimestampMs,
        lag_max_ms: DurationMs,
        high_watermark: Offset,
        live: impl Fn(NodeId) -> bool,
    ) -> Option<Vec<NodeId>> {
        let in_sync = |n: &NodeId| {
            *n == me
                || self
                    .followers
                    .get(n)
                    .map_or(self.since_ms, |f| f.caught_up_ms)
                    >= now_ms - lag_max_ms
        };
        let mut isr: Vec<NodeId> = self.role.isr.iter().copied().filter(in_sync).collect();
        for replica in &self.role.replicas {
            let joins = !isr.contains(replica)
                && live(*replica)
                && self.followers.get(replica).is_some_and(|f| {
                    f.log_end >= high_watermark && f.caught_up_ms >= now_ms - lag_max_ms
                });
            if joins {
                isr.push(*replica);
            }
        }
        isr.sort_by_key(|n| self.role.replicas.iter().position(|r| r == n));
        assert!(
            !self.role.isr.contains(&me) || isr.contains(&me),
            "the leader never leaves the ISR it asks for"
        );
        assert!(
            isr.iter().all(|n| self.role.isr.contains(n)
                || self
                    .followers
                    .get(n)
                    .is_some_and(|f| f.log_end >= high_watermark)),
            "a replica joins the ISR only holding the high watermark"
        );
        let mut current = self.role.isr.clone();
        current.sort_by_key(|n| self.role.replicas.iter().position(|r| r == n));
        (isr != current).then_some(isr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_metadata::types::PartitionEpoch;
    use rill_types::LeaderEpoch;

    /// The instant `ms` milliseconds after the epoch.
    fn at(ms: i64) -> TimestampMs {
        TimestampMs(ms)
    }

    fn leader(isr: &[i32]) -> LeaderState {
        let role = LeaderRole {
            epoch: LeaderEpoch(1),
            partition_epoch: PartitionEpoch(0),
            isr: isr.iter().map(|n| NodeId(*n)).collect(),
            replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
            topic_id: uuid::Uuid::nil(),
        };
        LeaderState::new(role, at(1_000))
    }

    #[test]
    fn high_watermark_is_the_least_end_over_the_isr() {
        let mut l = leader(&[1, 2, 3]);
        let me = NodeId(1);
        assert_eq!(
            l.high_watermark(me, Offset(10), Offset(0)),
            Offset(0),
            "nobody fetched"
        );
        l.on_fetch(NodeId(2), Offset(7), Offset(10), at(1_100));
        l.on_fetch(NodeId(3), Offset(10), Offset(10), at(1_100));
        assert_eq!(l.high_watermark(me, Offset(10), Offset(0)), Offset(7));
        assert_eq!(
            l.high_watermark(me, Offset(5), Offset(0)),
            Offset(5),
            "not yet durable here"
        );
        l.role.isr = vec![NodeId(1), NodeId(3)];
        assert_eq!(
            l.high_watermark(me, Offset(10), Offset(0)),
            Offset(10),
            "2 left the ISR"
        );
    }

    #[test]
    fn a_lagging_follower_leaves_and_a_caught_up_one_joins() {
        let mut l = leader(&[1, 2, 3]);
        let me = NodeId(1);
        l.on_fetch(NodeId(2), Offset(10), Offset(10), at(2_000));
        l.on_fetch(NodeId(3), Offset(4), Offset(10), at(2_000));
        assert_eq!(
            l.wanted_isr(me, at(2_500), DurationMs(30_000), Offset(4), |_| true),
            None
        );
        // 3 last caught up when the leadership began (1 000): 31 s later it is out.
        assert_eq!(
            l.wanted_isr(me, at(31_001), DurationMs(30_000), Offset(4), |_| true),
            Some(vec![NodeId(1), NodeId(2)])
        );
        l.role.isr = vec![NodeId(1), NodeId(2)];
        l.on_fetch(NodeId(3), Offset(10), Offset(10), at(31_500));
        assert_eq!(
            l.wanted_isr(me, at(31_600), DurationMs(30_000), Offset(10), |n| n
                != NodeId(3)),
            None,
            "a fenced broker does not join"
        );
        assert_eq!(
            l.wanted_isr(me, at(31_600), DurationMs(30_000), Offset(10), |_| true),
            Some(vec![NodeId(1), NodeId(2), NodeId(3)])
        );
    }

    #[test]
    fn an_empty_log_has_its_high_watermark_at_its_start() {
        let mut l = leader(&[1, 2, 3]);
        let me = NodeId(1);
        // DeleteRecords or retention emptied it at 5: the start is the end.
        assert_eq!(l.high_watermark(me, Offset(5), Offset(5)), Offset(5));
        l.on_fetch(NodeId(2), Offset(5), Offset(5), at(1_100));
        l.on_fetch(NodeId(3), Offset(5), Offset(5), at(1_100));
        assert_eq!(l.high_watermark(me, Offset(5), Offset(5)), Offset(5));
        assert_eq!(l.followers[&NodeId(2)].caught_up_ms, at(1_100));
    }

    #[test]
    fn the_high_watermark_reaches_the_log_end_once_every_isr_follower_holds_it() {
        let mut l = leader(&[1, 2, 3]);
        let me = NodeId(1);
        l.on_fetch(NodeId(2), Offset(10), Offset(10), at(1_100));
        l.on_fetch(NodeId(3), Offset(9), Offset(10), at(1_100));
        assert_eq!(l.high_watermark(me, Offset(10), Offset(0)), Offset(9));
        l.on_fetch(NodeId(3), Offset(10), Offset(10), at(1_200));
        assert_eq!(l.high_watermark(me, Offset(10), Offset(0)), Offset(10));
        // A follower back from a crash that lost unflushed batches reports less: the ISR's
        // least end drops (the actor keeps the high watermark it showed: it never moves back).
        l.on_fetch(NodeId(2), Offset(6), Offset(10), at(1_300));
        assert_eq!(l.high_watermark(me, Offset(10), Offset(0)), Offset(6));
    }

    #[test]
    #[should_panic(expected = "a follower fetches within the leader's log")]
    fn a_fetch_past_the_leaders_end_is_a_bug_here() {
        // The actor answers it OFFSET_OUT_OF_RANGE before asking.
        leader(&[1, 2]).on_fetch(NodeId(2), Offset(11), Offset(10), at(1_100));
    }

    #[test]
    #[should_panic(expected = "the log starts at or before its durable end")]
    fn a_log_start_past_the_durable_end_is_a_bug() {
        leader(&[1, 2]).high_watermark(NodeId(1), Offset(3), Offset(4));
    }

    #[test]
    fn the_leader_stays_and_a_joiner_must_hold_the_high_watermark() {
        let mut l = leader(&[1]);
        let me = NodeId(1);
        // The leader alone, long after it last heard from anyone: it stays.
        assert_eq!(
            l.wanted_isr(me, at(100_000), DurationMs(30_000), Offset(0), |_| true),
            None
        );
        l.on_fetch(NodeId(2), Offset(9), Offset(10), at(2_000));
        l.on_fetch(NodeId(3), Offset(10), Offset(10), at(2_000));
        assert_eq!(
            l.wanted_isr(me, at(2_100), DurationMs(30_000), Offset(10), |_| true),
            Some(vec![NodeId(1), NodeId(3)]),
            "2 lacks the high watermark by one offset"
        );
        assert_eq!(
            l.wanted_isr(me, at(2_100), DurationMs(30_000), Offset(9), |_| true),
            Some(vec![NodeId(1), NodeId(2), NodeId(3)]),
            "exactly at the high watermark is enough"
        );
    }

    #[test]
    fn fetching_what_the_leader_had_at_the_previous_fetch_counts_as_caught_up_then() {
        let mut l = leader(&[1, 2]);
        l.on_fetch(NodeId(2), Offset(5), Offset(8), at(2_000));
        l.on_fetch(NodeId(2), Offset(8), Offset(12), at(3_000));
        assert_eq!(l.followers[&NodeId(2)].caught_up_ms, at(2_000));
    }
}
