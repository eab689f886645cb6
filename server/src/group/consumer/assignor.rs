//! The server-side assignors of KIP-848 consumer groups: `uniform` and `range`
//! (`group.consumer.assignors`), each a pure function from the members' subscriptions, the
//! subscribed topics' partition counts and the current target assignment to the next target.

use std::collections::{BTreeMap, BTreeSet};

use rill_types::PartitionIndex;
use uuid::Uuid;

pub use crate::group::settings::Assignor;

/// Partitions by topic id: what one member owns or is to own.
pub type Assignment = BTreeMap<Uuid, BTreeSet<PartitionIndex>>;

impl Assignor {
    /// The next target assignment. `members` maps each member to the topic ids it subscribes
    /// to; `topics` holds the subscribed topics' partition counts (a subscribed topic missing
    /// from it does not exist and gets nothing); `current` is the present target, kept where
    /// it stays balanced. Every partition of a subscribed topic goes to exactly one member that
    /// subscribes to it.
    pub fn assign(
        self,
        members: &BTreeMap<String, BTreeSet<Uuid>>,
        topics: &BTreeMap<Uuid, i32>,
        current: &BTreeMap<String, Assignment>,
    ) -> BTreeMap<String, Assignment> {
        match self {
            Assignor::Uniform => uniform(members, topics, current),
            Assignor::Range => range(members, topics),
        }
    }
}

/// Per topic, the members subscribed to it, in member-id order.
fn subscribers(
    members: &BTreeMap<String, BTreeSet<Uuid>>,
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<Uuid, Vec<String>> {
    let mut out: BTreeMap<Uuid, Vec<String>> = BTreeMap::new();
    for (member, subscribed) in members {
        for topic in subscribed.iter().filter(|t| topics.contains_key(t)) {
            out.entry(*topic).or_default().push(member.clone());
        }
    }
    out
}

/// Range: for each topic, its partitions in order cut into one contiguous range per
/// subscribed member (the first `partitions % members` ranges one longer).
fn range(
    members: &BTreeMap<String, BTreeSet<Uuid>>,
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, subs) in subscribers(members, topics) {
        let count = topics[&topic].max(0) as usize;
        let (each, extra) = (count / subs.len(), count % subs.len());
        let mut next = 0;
        for (i, member) in subs.iter().enumerate() {
            let take = each + usize::from(i < extra);
            let parts: BTreeSet<PartitionIndex> = (next..next + take)
                .map(|p| PartitionIndex(p as i32))
                .collect();
            next += take;
            if !parts.is_empty() {
                out.get_mut(member).expect("a member").insert(topic, parts);
            }
        }
    }
    out
}

/// Uniform: every member's share of the partitions it can take is at most one off another's,
/// and a partition stays with its current owner while that keeps the balance (so a member
/// joining moves only the partitions it takes over).
fn uniform(
    members: &BTreeMap<String, BTreeSet<Uuid>>,
    topics: &BTreeMap<Uuid, i32>,
    current: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let subs = subscribers(members, topics);
    let total: usize = subs.keys().map(|t| topics[t].max(0) as usize).sum();
    let eligible = members
        .values()
        .filter(|s| s.iter().any(|t| subs.contains_key(t)));
    let quota = total.div_ceil(eligible.count().max(1));
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut counts: BTreeMap<String, usize> = members.keys().map(|m| (m.clone(), 0)).collect();
    let mut taken: BTreeSet<(Uuid, PartitionIndex)> = BTreeSet::new();
    // Keep what each member has, up to the quota (in partition order, so the same ones stay).
    for (member, assignment) in current {
        let Some(subscribed) = members.get(member) else {
            continue;
        };
        for (topic, parts) in assignment {
            let Some(&count) = topics.get(topic) else {
                continue;
            };
            if !subscribed.contains(topic) {
                continue;
            }
            for &p in parts.iter().filter(|&&p| p < PartitionIndex(count)) {
                if counts[member] < quota && taken.insert((*topic, p)) {
                    out.get_mut(member)
                        .expect("a member")
                        .entry(*topic)
                        .or_default()
                        .insert(p);
                    *counts.get_mut(member).expect("a member") += 1;
                }
            }
        }
    }
    // Give each remaining partition to the subscribed member with the fewest (ties: member id).
    for (topic, candidates) in &subs {
        for p in PartitionIndex::all(topics[topic]) {
            if taken.contains(&(*topic, p)) {
                continue;
            }
            let member = candidates
                .iter()
                .min_by_key(|m| (counts[*m], (*m).clone()))
                .expect("a topic in `subs` has a subscriber")
                .clone();
            out.get_mut(&member)
                .expect("a member")
                .entry(*topic)
                .or_default()
                .insert(p);
            *counts.get_mut(&member).expect("a member") += 1;
            taken.insert((*topic, p));
        }
    }
    // Members subscribed to different topics can leave one member under; move partitions from
    // the fullest member that shares a topic with it until no move narrows the gap.
    rebalance(&mut out, &mut counts, members, topics);
    out
}

/// Moves partitions from a member holding two or more than another member subscribed to
/// the same topic, until no such pair is left (bounded: each move lowers the spread).
fn rebalance(
    out: &mut BTreeMap<String, Assignment>,
    counts: &mut BTreeMap<String, usize>,
    members: &BTreeMap<String, BTreeSet<Uuid>>,
    topics: &BTreeMap<Uuid, i32>,
) {
    let total: usize = topics.values().map(|c| (*c).max(0) as usize).sum();
    for _ in 0..=total {
        let Some((high, low, topic, p)) = find_move(out, counts, members, topics) else {
            return;
        };
        let from = out.get_mut(&high).expect("a member");
        let set = from.get_mut(&topic).expect("a topic");
        set.remove(&p);
        if set.is_empty() {
            from.remove(&topic);
        }
        out.get_mut(&low)
            .expect("a member")
            .entry(topic)
            .or_default()
            .insert(p);
        *counts.get_mut(&high).expect("a member") -= 1;
        *counts.get_mut(&low).expect("a member") += 1;
    }
}

/// One partition (from, to, topic, partition) whose move narrows the spread, if any.
fn find_move(
    out: &BTreeMap<String, Assignment>,
    counts: &BTreeMap<String, usize>,
    members: &BTreeMap<String, BTreeSet<Uuid>>,
    topics: &BTreeMap<Uuid, i32>,
) -> Option<(String, String, Uuid, PartitionIndex)> {
    for (low, low_subs) in members {
        for (high, assignment) in out {
            if counts[high] < counts[low] + 2 {
                continue;
            }
            for (topic, parts) in assignment {
                if !low_subs.contains(topic) || !topics.contains_key(topic) {
                    continue;
                }
                if let Some(&p) = parts.iter().next_back() {
                    return Some((high.clone(), low.clone(), *topic, p));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn subs(list: &[(&str, &[u8])]) -> BTreeMap<String, BTreeSet<Uuid>> {
        list.iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|n| t(*n)).collect()))
            .collect()
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    fn every_partition_once(
        out: &BTreeMap<String, Assignment>,
        members: &BTreeMap<String, BTreeSet<Uuid>>,
        topics: &BTreeMap<Uuid, i32>,
    ) {
        let mut seen = BTreeSet::new();
        for (m, a) in out {
            for (topic, parts) in a {
                assert!(members[m].contains(topic), "{m} not subscribed to {topic}");
                for p in parts {
                    assert!(seen.insert((*topic, *p)), "{topic}-{p} twice");
                }
            }
        }
        let subscribed: BTreeSet<Uuid> = members.values().flatten().copied().collect();
        let expected: usize = topics
            .iter()
            .filter(|(t, _)| subscribed.contains(t))
            .map(|(_, c)| *c as usize)
            .sum();
        assert_eq!(seen.len(), expected);
    }

    #[test]
    fn range_cuts_each_topic_into_contiguous_ranges() {
        let members = subs(&[("a", &[1]), ("b", &[1])]);
        let topics = BTreeMap::from([(t(1), 5)]);
        let out = Assignor::Range.assign(&members, &topics, &BTreeMap::new());
        assert_eq!(
            out["a"][&t(1)],
            BTreeSet::from([PartitionIndex(0), PartitionIndex(1), PartitionIndex(2)])
        );
        assert_eq!(
            out["b"][&t(1)],
            BTreeSet::from([PartitionIndex(3), PartitionIndex(4)])
        );
        every_partition_once(&out, &members, &topics);
    }

    #[test]
    fn uniform_is_balanced_and_sticky() {
        let topics = BTreeMap::from([(t(1), 6)]);
        let one = subs(&[("a", &[1])]);
        let first = Assignor::Uniform.assign(&one, &topics, &BTreeMap::new());
        assert_eq!(count(&first["a"]), 6);
        let two = subs(&[("a", &[1]), ("b", &[1])]);
        let second = Assignor::Uniform.assign(&two, &topics, &first);
        assert_eq!((count(&second["a"]), count(&second["b"])), (3, 3));
        // a keeps the partitions it had first in order; b takes the rest.
        assert_eq!(
            second["a"][&t(1)],
            BTreeSet::from([PartitionIndex(0), PartitionIndex(1), PartitionIndex(2)])
        );
        every_partition_once(&second, &two, &topics);
        let back = Assignor::Uniform.assign(&subs(&[("b", &[1])]), &topics, &second);
        assert_eq!(count(&back["b"]), 6);
    }

    #[test]
    fn uniform_with_different_subscriptions_gives_every_partition_once() {
        let members = subs(&[("a", &[1, 2]), ("b", &[2]), ("c", &[3])]);
        let topics = BTreeMap::from([(t(1), 4), (t(2), 4), (t(3), 1), (t(9), 3)]);
        let out = Assignor::Uniform.assign(&members, &topics, &BTreeMap::new());
        every_partition_once(&out, &members, &topics);
        assert_eq!(count(&out["c"]), 1);
        assert!(count(&out["a"]).abs_diff(count(&out["b"])) <= 2);
    }

    #[test]
    fn missing_topics_and_no_members_assign_nothing() {
        let members = subs(&[("a", &[7])]);
        let out = Assignor::Uniform.assign(&members, &BTreeMap::new(), &BTreeMap::new());
        assert!(out["a"].is_empty());
        let none = Assignor::Range.assign(&BTreeMap::new(), &BTreeMap::from([(t(1), 3)]), &out);
        assert!(none.is_empty());
    }

    #[test]
    fn names_round_trip() {
        for a in [Assignor::Uniform, Assignor::Range] {
            assert_eq!(Assignor::from_name(a.name()), Some(a));
        }
        assert_eq!(Assignor::from_name("sticky"), None);
    }
}
