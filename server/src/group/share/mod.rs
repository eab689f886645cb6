//! KIP-932 share groups: members that share the records of their topics' partitions, each
//! record delivered to one member at a time and acknowledged on its own. Runtime-free, handed
//! the time like [`super::consumer`].
//!
//! - membership: ShareGroupHeartbeat's member and group epochs; the group epoch counts changes
//!   of members, subscriptions and subscribed topics' partition counts, and each change
//!   recomputes the assignment with the `simple` assignor ([`assign`]). A member takes its new
//!   assignment on its next heartbeat (share groups revoke nothing: a partition may have many
//!   members). A member with no heartbeat for `group.share.session.timeout.ms` is fenced.
//! - [`partition`]: each share-partition's delivery state (SPSO/SPEO, record states, locks,
//!   delivery counts).
//! - share sessions: a member's ShareFetch session (its epoch and partitions), as Kafka's share
//!   session cache keeps them, one per member: bounded by the group's members.
//!
//! - [`waiters`]: the order in which members' waiting fetches take new records (the longest
//!   waiting first, as Kafka's delayed share fetches complete).
//!
//! A member that leaves or is fenced gives back every record it holds, and its session goes.

pub mod durable;
pub mod partition;
pub mod waiters;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use rill_protocol::ErrorCode;
use rill_types::Offset;
use uuid::Uuid;

pub use super::ops::share::AutoOffsetReset;
use super::ops::share::{
    Acquired, FetchFrom, ShareAcquirePart, ShareGroupView, ShareHeartbeatArgs,
    ShareHeartbeatResult, ShareKey, ShareMemberView, ShareSessionArgs, ShareSessionResult,
};
use super::ops::TopicIdPartitions;
pub use super::settings::{
    ShareConfig, DELIVERY_COUNT_LIMIT_RANGE, MAX_RECORD_LOCKS_RANGE, MAX_SIZE_MAX,
};
use partition::SharePartition;
use waiters::Waiters;

/// Epoch a member sends to leave.
pub const LEAVE_EPOCH: i32 = -1;
/// The only assignor share groups have.
pub const ASSIGNOR: &str = "simple";

/// One member of a share group.
#[derive(Debug, Clone)]
struct ShareMember {
    /// Shared with the records it holds (cheap clones per acquired record).
    id: Rc<str>,
    epoch: i32,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    topic_names: Vec<String>,
    /// Fenced after this (ms) without a heartbeat.
    deadline: i64,
}

/// A member's share session.
#[derive(Debug, Clone, Default)]
struct Session {
    /// The epoch its next request carries.
    next_epoch: i32,
    partitions: BTreeSet<ShareKey>,
}

/// One share group.
#[derive(Debug, Clone)]
pub struct ShareGroup {
    /// Group id.
    pub id: String,
    epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, ShareMember>,
    /// Each member's partitions, as of the assignment epoch.
    assignment: BTreeMap<String, TopicIdPartitions>,
    /// Subscribed topics: name → (id, partitions), as of the last epoch bump.
    subscribed: BTreeMap<String, (Uuid, i32)>,
    partitions: HashMap<ShareKey, SharePartition>,
    sessions: HashMap<String, Session>,
    /// Members whose fetches wait for records, in the order they began to wait.
    waiters: Waiters,
    /// `share.auto.offset.reset`.
    pub auto_offset_reset: AutoOffsetReset,
    /// Each share-partition's start as last written to the log ([`durable`]).
    persisted: HashMap<ShareKey, Durable>,
    config: ShareConfig,
}

impl ShareGroup {
    /// An empty group.
    pub fn new(id: &str, config: ShareConfig) -> Self {
        ShareGroup {
            id: id.to_string(),
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            assignment: BTreeMap::new(),
            subscribed: BTreeMap::new(),
            partitions: HashMap::new(),
            sessions: HashMap::new(),
            waiters: Waiters::default(),
            auto_offset_reset: AutoOffsetReset::default(),
            persisted: HashMap::new(),
            config,
        }
    }

    /// Kafka's share group state name.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// Whether it has members.
    pub fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    /// Share sessions open (bounded by the members: one each).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// ShareGroupHeartbeat (its shape already checked by the handler).
    pub fn heartbeat(&mut self, args: ShareHeartbeatArgs, now: i64) -> ShareHeartbeatResult {
        let member_id = args.member_id.clone();
        if args.member_epoch == LEAVE_EPOCH {
            if !self.members.contains_key(&member_id) {
                return unknown_member(&self.id, &member_id);
            }
            self.remove_member(&member_id);
            self.reassign(&args.topics);
            return ShareHeartbeatResult {
                member_id: Some(member_id),
                member_epoch: LEAVE_EPOCH,
                // Kafka answers a leave with no interval: there is no next heartbeat.
                heartbeat_interval_ms: 0,
                ..Default::default()
            };
        }
        let mut changed = match self.admit(&args) {
            Ok(new) => new,
            Err(refused) => return refused,
        };
        let member = self.members.get_mut(&member_id).expect("present");
        member.deadline = now.saturating_add(i64::from(self.config.session_timeout_ms));
        if args.member_epoch == 0 {
            // A (re)join is answered the whole assignment.
            member.epoch = 0;
        }
        if let Some(rack) = args.rack_id {
            member.rack_id = Some(rack);
        }
        if let Some(mut names) = args.subscribed_topic_names {
            names.sort();
            names.dedup();
            if names != member.topic_names {
                member.topic_names = names;
                changed = true;
            }
        }
        if changed || self.subscription_metadata_changed(&args.topics) {
            self.reassign(&args.topics);
        }
        let member = self.members.get_mut(&member_id).expect("present");
        let assignment = (member.epoch != self.assignment_epoch).then(|| {
            member.epoch = self.assignment_epoch;
            self.assignment.get(&member_id).cloned().unwrap_or_default()
        });
        ShareHeartbeatResult {
            member_id: Some(member_id),
            member_epoch: member.epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            assignment,
            ..Default::default()
        }
    }

    /// A joining member is added (Ok(true): the group changed), a known one checked: an
    /// unknown member, a full group and a wrong epoch are refused.
    fn admit(&mut self, args: &ShareHeartbeatArgs) -> Result<bool, ShareHeartbeatResult> {
        let member_id = &args.member_id;
        match self.members.get(member_id) {
            None if args.member_epoch != 0 => Err(unknown_member(&self.id, member_id)),
            None => {
                if self.members.len() >= self.config.max_size {
                    return Err(ShareHeartbeatResult::error(
                        ErrorCode::GroupMaxSizeReached,
                        format!(
                            "The share group has reached its maximum capacity of {} members.",
                            self.config.max_size
                        ),
                    ));
                }
                self.members.insert(
                    member_id.clone(),
                    ShareMember {
                        id: Rc::from(member_id.as_str()),
                        epoch: 0,
                        rack_id: None,
                        client_id: args.client_id.clone(),
                        client_host: args.client_host.clone(),
                        topic_names: Vec::new(),
                        deadline: 0,
                    },
                );
                Ok(true)
            }
            Some(m) if args.member_epoch != 0 && args.member_epoch != m.epoch => {
                Err(ShareHeartbeatResult::error(
                    ErrorCode::FencedMemberEpoch,
                    format!(
                        "The share group member has a different epoch ({}) than the one known \
                         ({}).",
                        args.member_epoch, m.epoch
                    ),
                ))
            }
            Some(_) => Ok(false),
        }
    }

    /// Whether the subscribed topics' ids or partition counts differ from `topics`.
    fn subscription_metadata_changed(&self, topics: &[super::ops::TopicInfo]) -> bool {
        self.subscribed_now(topics) != self.subscribed
    }

    fn subscribed_now(&self, topics: &[super::ops::TopicInfo]) -> BTreeMap<String, (Uuid, i32)> {
        let names: BTreeSet<&str> = self
            .members
            .values()
            .flat_map(|m| m.topic_names.iter().map(String::as_str))
            .collect();
        topics
            .iter()
            .filter(|t| names.contains(t.name.as_str()))
            .map(|t| (t.name.clone(), (t.id, t.partitions)))
            .collect()
    }

    /// A new group epoch with its assignment.
    fn reassign(&mut self, topics: &[super::ops::TopicInfo]) {
        self.subscribed = self.subscribed_now(topics);
        self.epoch = self.epoch.wrapping_add(1).max(1);
        self.assignment = assign(&self.members, &self.subscribed);
        self.assignment_epoch = self.epoch;
    }

    /// Removes a member: its records come back, its session goes.
    fn remove_member(&mut self, member_id: &str) {
        self.members.remove(member_id);
        self.assignment.remove(member_id);
        self.sessions.remove(member_id);
        self.waiters.done(member_id);
        for p in self.partitions.values_mut() {
            p.release_member(member_id);
        }
    }

    /// Fences members past their session and expires record locks; true if members went.
    pub fn tick(&mut self, now: i64) -> bool {
        for p in self.partitions.values_mut() {
            p.tick(now);
        }
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            self.remove_member(id);
        }
        if !expired.is_empty() {
            // The topics as of the last bump: a tick has no fresher view of them.
            let topics: Vec<super::ops::TopicInfo> = self
                .subscribed
                .iter()
                .map(|(name, (id, partitions))| super::ops::TopicInfo {
                    name: name.clone(),
                    id: *id,
                    partitions: *partitions,
                })
                .collect();
            self.reassign(&topics);
        }
        !expired.is_empty()
    }

    /// ShareGroupDescribe.
    pub fn describe(&self) -> ShareGroupView {
        ShareGroupView {
            state: self.state_name().to_string(),
            group_epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: ASSIGNOR.to_string(),
            members: self
                .members
                .iter()
                .map(|(id, m)| ShareMemberView {
                    member_id: id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.topic_names.clone(),
                    assignment: self.assignment.get(id).cloned().unwrap_or_default(),
                })
                .collect(),
            ..Default::default()
        }
    }

    /// The session part of a ShareFetch or ShareAcknowledge: checks the epoch, updates the
    /// session, applies the acknowledgements.
    pub fn session(&mut self, args: ShareSessionArgs) -> ShareSessionResult {
        let lock_duration_ms =
            i32::try_from(self.config.partition.lock_duration_ms.0).unwrap_or(i32::MAX);
        if let Err((code, message)) = self.check_session(&args) {
            return ShareSessionResult {
                error_code: code,
                error_message: Some(message),
                lock_duration_ms,
                ..Default::default()
            };
        }
        let member = self.members[&args.member_id].id.clone();
        let acks = args
            .acks
            .iter()
            .map(|(key, batches)| {
                let code = match self.partitions.get_mut(key) {
                    Some(p) => p
                        .acknowledge(&member, batches)
                        .err()
                        .unwrap_or(ErrorCode::None),
                    None => ErrorCode::InvalidRecordState,
                };
                (*key, code)
            })
            .collect();
        let mut fetch = Vec::new();
        if args.epoch == LEAVE_EPOCH {
            self.sessions.remove(&args.member_id);
            for p in self.partitions.values_mut() {
                p.release_member(&member);
            }
        } else {
            let session = self.sessions.get_mut(&args.member_id).expect("opened");
            session.next_epoch = next_epoch(args.epoch);
            if args.fetch {
                for key in &args.forget {
                    session.partitions.remove(key);
                }
                session.partitions.extend(args.add.iter().copied());
                fetch = session.partitions.iter().copied().collect();
            }
        }
        ShareSessionResult {
            fetch,
            acks,
            lock_duration_ms,
            ..Default::default()
        }
    }

    /// The member and its session epoch, checked (a ShareFetch at epoch 0 opens a session):
    /// Err((code, message)) answers the whole request.
    fn check_session(&mut self, args: &ShareSessionArgs) -> Result<(), (ErrorCode, String)> {
        if !self.members.contains_key(&args.member_id) {
            return Err((
                ErrorCode::UnknownMemberId,
                format!(
                    "Member {} is not a member of share group {}.",
                    args.member_id, self.id
                ),
            ));
        }
        match (args.epoch, self.sessions.get(&args.member_id)) {
            (0, _) if !args.fetch => {
                return Err((
                    ErrorCode::InvalidShareSessionEpoch,
                    "A ShareAcknowledge cannot open a share session.".to_string(),
                ))
            }
            (0, _) => {
                self.sessions
                    .insert(args.member_id.clone(), Session::default());
            }
            (_, None) => {
                return Err((
                    ErrorCode::ShareSessionNotFound,
                    format!("No share session for member {}.", args.member_id),
                ))
            }
            (LEAVE_EPOCH, Some(_)) => {}
            (e, Some(s)) if e != s.next_epoch => {
                return Err((
                    ErrorCode::InvalidShareSessionEpoch,
                    format!("The share session epoch is {}, not {e}.", s.next_epoch),
                ))
            }
            (_, Some(_)) => {}
        }
        Ok(())
    }

    /// Notes that `member_id`'s fetch looks for records of `keys` at `now` (see [`waiters`]);
    /// a member not in the group is not put in line.
    pub fn look(&mut self, member_id: &str, keys: &[ShareKey], now: i64) {
        if self.members.contains_key(member_id) {
            self.waiters.look(member_id, keys, now);
        }
    }

    /// Where each of `keys` should be fetched from for `member_id`.
    pub fn plan(&self, keys: &[ShareKey]) -> Vec<(ShareKey, FetchFrom)> {
        let earliest = self.auto_offset_reset == AutoOffsetReset::Earliest;
        keys.iter()
            .map(|key| {
                let from = match self.partitions.get(key) {
                    None => FetchFrom::Init { earliest },
                    Some(p) => p
                        .next_fetch_offset()
                        .map_or(FetchFrom::Nothing, FetchFrom::At),
                };
                (*key, from)
            })
            .collect()
    }

    /// Acquires the fetched records of `parts` for `member_id`, up to `max_records` in all.
    /// A member not in the group (fenced meanwhile) acquires nothing, nor does it from a
    /// share-partition another member's fetch has waited on longer ([`waiters`]).
    pub fn acquire(
        &mut self,
        member_id: &str,
        max_records: usize,
        parts: Vec<ShareAcquirePart>,
        now: i64,
    ) -> Vec<(ShareKey, Vec<Acquired>)> {
        let Some(member) = self.members.get(member_id).map(|m| m.id.clone()) else {
            return Vec::new();
        };
        let settings = self.config.partition;
        let mut left = max_records;
        let mut out = Vec::new();
        for part in parts {
            if self.waiters.behind(member_id, &part.key, now) {
                continue;
            }
            let p = match self.partitions.entry(part.key) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => match part.init {
                    Some(start) => e.insert(SharePartition::new(start, settings)),
                    None => continue,
                },
            };
            p.advance_to_log_start(part.log_start);
            let got = p.acquire(&member, &part.batches, left, now);
            left -= got
                .iter()
                .map(|a| (a.last - a.first + 1) as usize)
                .sum::<usize>();
            if !got.is_empty() {
                out.push((part.key, got));
            }
        }
        if !out.is_empty() {
            self.waiters.done(member_id);
        }
        out
    }

    /// The share-partitions' start offsets (DescribeShareGroupOffsets); `None`: no state.
    pub fn start_offset(&self, key: &ShareKey) -> Option<Offset> {
        self.partitions.get(key).map(|p| p.start())
    }

    /// Sets a share-partition's start (AlterShareGroupOffsets; the group must be empty).
    pub fn set_start_offset(&mut self, key: ShareKey, offset: Offset) {
        let settings = self.config.partition;
        self.partitions
            .entry(key)
            .and_modify(|p| p.reset(offset))
            .or_insert_with(|| SharePartition::new(offset, settings));
    }

    /// Forgets a topic's share-partitions (DeleteShareGroupOffsets; the group must be empty).
    pub fn delete_topic_state(&mut self, topic: Uuid) -> bool {
        let before = self.partitions.len();
        self.partitions.retain(|(t, _), _| *t != topic);
        before != self.partitions.len()
    }

    /// The share-partitions whose start moved (or that were forgotten: `None`) since the last
    /// take: what is to be written ([`durable`]). Taking marks them written.
    pub fn take_moved(&mut self) -> Vec<(ShareKey, Option<Durable>)> {
        let mut out: Vec<(ShareKey, Option<Durable>)> = self
            .partitions
            .iter()
            .map(|(k, p)| (*k, Durable::of(p)))
            .filter(|(k, d)| self.persisted.get(k) != Some(d))
            .map(|(k, d)| (k, Some(d)))
            .collect();
        out.extend(
            self.persisted
                .keys()
                .filter(|k| !self.partitions.contains_key(k))
                .map(|k| (*k, None)),
        );
        for (k, state) in &out {
            match state {
                Some(d) => self.persisted.insert(*k, d.clone()),
                None => self.persisted.remove(k),
            };
        }
        out.sort_by_key(|(k, _)| *k);
        out
    }

    /// A write of [`Self::take_moved`]'s partitions failed: they are written again next time.
    pub fn unmark(&mut self, keys: &[ShareKey]) {
        for k in keys {
            self.persisted.remove(k);
            if !self.partitions.contains_key(k) {
                // A forgotten partition's tombstone: remember it as written at an impossible
                // start, so the next take writes the tombstone again.
                let never = Durable {
                    start: Offset(-1),
                    done: String::new(),
                };
                self.persisted.insert(*k, never);
            }
        }
    }

    /// A share-partition's state as the log holds it (a restart, a new coordinator).
    pub fn restore(&mut self, key: ShareKey, state: Durable) {
        let p = SharePartition::restored(state.start, &state.done, self.config.partition);
        self.persisted.insert(key, Durable::of(&p));
        self.partitions.insert(key, p);
    }

    /// Every share-partition written to the log (their tombstones when the group is deleted).
    pub fn persisted_keys(&self) -> Vec<ShareKey> {
        self.persisted.keys().copied().collect()
    }

    /// The share-partitions with state.
    pub fn partition_keys(&self) -> Vec<ShareKey> {
        let mut keys: Vec<ShareKey> = self.partitions.keys().copied().collect();
        keys.sort();
        keys
    }

    /// One share-partition's state (tests, the admin listener).
    pub fn partition(&self, key: &ShareKey) -> Option<&SharePartition> {
        self.partitions.get(key)
    }
}

/// What is written of a share-partition: its start and the done runs past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durable {
    /// SPSO.
    pub start: Offset,
    /// [`SharePartition::done_runs`].
    pub done: String,
}

impl Durable {
    /// `p`'s state to write.
    pub fn of(p: &SharePartition) -> Durable {
        Durable {
            start: p.start(),
            done: p.done_runs(),
        }
    }
}

/// A share session's epoch after `epoch` (wrapping past i32::MAX to 1, as Kafka's).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

fn unknown_member(group: &str, member: &str) -> ShareHeartbeatResult {
    ShareHeartbeatResult::error(
        ErrorCode::UnknownMemberId,
        format!("Member {member} is not a member of share group {group}."),
    )
}

/// The `simple` assignor: per topic, its subscribers in member-id order share its partitions
/// round-robin. With at least as many subscribers as partitions every subscriber gets one
/// partition (and a partition several subscribers); with fewer each partition goes to one
/// subscriber. So every partition has a member and every subscriber a partition, as KIP-932
/// asks of it.
fn assign(
    members: &BTreeMap<String, ShareMember>,
    subscribed: &BTreeMap<String, (Uuid, i32)>,
) -> BTreeMap<String, TopicIdPartitions> {
    let mut out: BTreeMap<String, BTreeMap<Uuid, Vec<i32>>> = BTreeMap::new();
    for (name, (id, count)) in subscribed {
        let count = (*count).max(0);
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.topic_names.iter().any(|t| t == name))
            .map(|(id, _)| id)
            .collect();
        if subscribers.is_empty() || count == 0 {
            continue;
        }
        let n = subscribers.len();
        if n >= count as usize {
            for (i, member) in subscribers.iter().enumerate() {
                let p = (i % count as usize) as i32;
                out.entry((*member).clone())
                    .or_default()
                    .entry(*id)
                    .or_default()
                    .push(p);
            }
        } else {
            for p in 0..count {
                let member = subscribers[p as usize % n];
                out.entry(member.clone())
                    .or_default()
                    .entry(*id)
                    .or_default()
                    .push(p);
            }
        }
    }
    out.into_iter()
        .map(|(m, topics)| (m, topics.into_iter().collect()))
        .collect()
}

#[cfg(test)]
mod tests;
