//! One consumer group's state machine (Kafka's classic group protocol), pure: no runtime, no
//! I/O. Callers pass the time; answers that must wait (JoinGroup until the rebalance completes,
//! a follower's SyncGroup until the leader's) are delivered through oneshot channels.
//!
//! ```text
//! Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//!   ▲                 ▲        ▲                                      │ leader's SyncGroup
//!   └─ last member ───┘        └──── join / leave / session expiry ───┴──▶ Stable
//! ```
//!
//! The rebalance that leaves Empty is held for `group.initial.rebalance.delay.ms` (Kafka's
//! InitialDelayedJoin): consumers started together then get one generation, instead of the first
//! taking every partition and a second generation moving half of them away mid-consumption.

use std::collections::{BTreeMap, HashMap};

use crate::channel::local::oneshot;
use bytes::Bytes;

use super::metadata_record::GroupMetadata;
use super::offsets::CommittedOffset;
use super::ops::{
    GroupDescription, JoinArgs, JoinResult, JoinedMember, MemberDescription, MemberRef, SyncArgs,
    SyncResult,
};
use rill_protocol::ErrorCode;
use rill_types::{DurationMs, ProducerId, TimestampMs};

/// Where a group is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members (perhaps committed offsets).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// Kafka's name for the state (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// One member.
#[derive(Debug)]
pub struct Member {
    /// Member id.
    pub id: String,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    /// (assignor, metadata) in preference order.
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    last_heartbeat_ms: TimestampMs,
    /// Order of first join: the earliest remaining member becomes leader.
    join_seq: u64,
    awaiting_join: Option<oneshot::Sender<JoinResult>>,
    awaiting_sync: Option<oneshot::Sender<SyncResult>>,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn session_expired(&self, now_ms: TimestampMs) -> bool {
        self.awaiting_join.is_none()
            && self.awaiting_sync.is_none()
            && now_ms > self.last_heartbeat_ms + DurationMs::from(self.session_timeout_ms)
    }
}

/// The wait of a rebalance that left Empty (Kafka's InitialDelayedJoin): it completes when a wait
/// passes with no new member, or when the rebalance timeout is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InitialDelay {
    /// The current wait ends then.
    until_ms: TimestampMs,
    /// What the rebalance timeout leaves for waits after the current one.
    remaining_ms: DurationMs,
    /// A member joined during the current wait: wait once more.
    member_added: bool,
}

/// One group: membership, generation, and committed offsets.
#[derive(Debug)]
pub struct Group {
    /// Group id.
    pub id: String,
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with the time they expire.
    pending: HashMap<String, TimestampMs>,
    /// instance id → member id.
    static_members: HashMap<String, String>,
    /// PreparingRebalance: join completes by then; CompletingRebalance: the leader must sync.
    deadline_ms: Option<TimestampMs>,
    /// `group.initial.rebalance.delay.ms` (0: no delay).
    initial_rebalance_delay_ms: DurationMs,
    /// Set while a rebalance that left Empty is held for more members.
    initial_delay: Option<InitialDelay>,
    next_join_seq: u64,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Offsets committed inside open transactions (TxnOffsetCommit), by producer: visible
    /// (moved to `offsets`) when the transaction commits, dropped when it aborts.
    pub pending_txn: BTreeMap<ProducerId, BTreeMap<(String, i32), CommittedOffset>>,
    /// A completed rebalance is written (a cluster's coordinator) before it is answered.
    writes_membership: bool,
    /// The generation whose assignment is being written: members' syncs wait for it.
    writing: Option<i32>,
    /// That generation's record, until the coordinator takes it to write.
    to_write: Option<GroupMetadata>,
    /// `group.max.size`: members, and member ids pending their rejoin.
    max_size: usize,
}

/// A join answer sent now.
fn answer<T>(tx: oneshot::Sender<T>, value: T) {
    // The asker may have gone (connection closed): nothing to do then.
    let _ = tx.send(value);
}

impl Group {
    /// A new, empty group whose first rebalance waits `initial_rebalance_delay_ms` for members
    /// (`group.initial.rebalance.delay.ms`; 0 completes it as soon as every member joined).
    pub fn new(id: &str, initial_rebalance_delay_ms: i32) -> Self {
        assert!(initial_rebalance_delay_ms >= 0, "a delay is never negative");
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            static_members: HashMap::new(),
            deadline_ms: None,
            initial_rebalance_delay_ms: DurationMs::from(initial_rebalance_delay_ms),
            initial_delay: None,
            next_join_seq: 0,
            offsets: BTreeMap::new(),
            pending_txn: BTreeMap::new(),
            writes_membership: false,
            writing: None,
            to_write: None,
            max_size: usize::MAX,
        }
    }

    /// Bounds the group to `max_size` members (`group.max.size`), and as many member ids
    /// handed out pending their rejoin.
    pub fn set_max_size(&mut self, max_size: usize) {
        assert!(max_size > 0, "a group holds a member");
        self.max_size = max_size;
    }

    /// Current state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// Current generation.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// The group's protocol type ("" when it has none).
    pub fn protocol_type(&self) -> &str {
        self.protocol_type.as_deref().unwrap_or("")
    }

    /// Whether the group has live members.
    pub fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    /// Nothing left to keep: no members, no member ids handed out, no committed offsets.
    pub fn is_disposable(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending.is_empty()
            && self.offsets.is_empty()
            && self.pending_txn.is_empty()
    }

    /// Member ids (tests, descriptions).
    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// Mark deleted (DeleteGroups): nothing may use it any more.
    pub fn mark_dead(&mut self) {
        self.state = GroupState::Dead;
    }

    // ---------------------------------------------------------------- JoinGroup

    /// Handle JoinGroup. The answer arrives when the rebalance completes (or at once).
    pub fn join(&mut self, args: JoinArgs, now_ms: TimestampMs) -> oneshot::Receiver<JoinResult> {
        let (tx, rx) = oneshot::channel();
        if let Err(code) = self.validate_join(&args) {
            answer(tx, JoinResult::error(code, &args.member_id));
            return rx;
        }
        if !self.accepts_joining(&args) {
            // Kafka removes the member it refuses (a pending id too) and answers no id.
            self.pending.remove(&args.member_id);
            self.remove_member(&args.member_id, now_ms);
            answer(tx, JoinResult::error(ErrorCode::GroupMaxSizeReached, ""));
            return rx;
        }
        if args.member_id.is_empty() {
            self.join_new(args, tx, now_ms);
        } else {
            self.join_known(args, tx, now_ms);
        }
        self.maybe_complete_join(now_ms);
        rx
    }

    /// Whether `group.max.size` lets this join in (Kafka's `acceptJoiningMember`): an Empty
    /// group takes anyone; while rebalancing, a member already waiting, or anyone while fewer
    /// than the maximum wait (the group may be past it after the maximum was lowered, and the
    /// last to rejoin are left out); otherwise a member, or anyone while the group is below its
    /// maximum. A new member that must come back with its id also needs a pending place free.
    fn accepts_joining(&self, args: &JoinArgs) -> bool {
        let new_pending = args.member_id.is_empty()
            && args.require_known_member_id
            && args.group_instance_id.is_none();
        if new_pending && self.pending.len() >= self.max_size {
            return false;
        }
        let member = self.members.get(&args.member_id);
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                member.is_some_and(|m| m.awaiting_join.is_some())
                    || self.awaiting_join() < self.max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.is_some() || self.members.len() < self.max_size
            }
        }
    }

    /// Members waiting for the rebalance's JoinGroup answer.
    fn awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    fn validate_join(&self, args: &JoinArgs) -> Result<(), ErrorCode> {
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        // The session timeout's bounds are the coordinator's (`GroupConfig`), checked first.
        debug_assert!(
            args.session_timeout_ms >= 0,
            "the coordinator bounds sessions"
        );
        if args.protocol_type.is_empty() || args.protocols.is_empty() {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        if self.members.is_empty() {
            return Ok(());
        }
        // Kafka's supportsProtocols: against every current member, the joiner's own current
        // protocols included (a sole member cannot switch type or protocol by rejoining).
        if self.protocol_type.as_deref() != Some(args.protocol_type.as_str()) {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        let common = args.protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        });
        if common {
            Ok(())
        } else {
            Err(ErrorCode::InconsistentGroupProtocol)
        }
    }

    fn new_member_id(&self, args: &JoinArgs) -> String {
        let prefix = args
            .group_instance_id
            .as_deref()
            .unwrap_or(args.client_id.as_str());
        // Cut to fit a record string (rill_types::limits): a 32 KiB client id is legal.
        rill_types::limits::member_id(prefix, &uuid::Uuid::new_v4().to_string())
    }

    fn join_new(&mut self, args: JoinArgs, tx: oneshot::Sender<JoinResult>, now_ms: TimestampMs) {
        if let Some(instance) = &args.group_instance_id {
            if let Some(old_id) = self.static_members.get(instance).cloned() {
                self.replace_static_member(&old_id, args, tx, now_ms);
                return;
            }
        }
        let member_id = self.new_member_id(&args);
        if args.require_known_member_id && args.group_instance_id.is_none() {
            let expires = now_ms + DurationMs::from(args.session_timeout_ms);
            self.pending.insert(member_id.clone(), expires);
            answer(
                tx,
                JoinResult::error(ErrorCode::MemberIdRequired, &member_id),
            );
            return;
        }
        self.add_member(member_id, args, tx, now_ms);
    }

    fn add_member(
        &mut self,
        member_id: String,
        args: JoinArgs,
        tx: oneshot::Sender<JoinResult>,
        now_ms: TimestampMs,
    ) {
        self.pending.remove(&member_id);
        if let Some(instance) = &args.group_instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(args.protocol_type.clone());
        }
        let member = Member {
            id: member_id.clone(),
            instance_id: args.group_instance_id,
            client_id: args.client_id,
            client_host: args.client_host,
            session_timeout_ms: args.session_timeout_ms,
            rebalance_timeout_ms: args.rebalance_timeout_ms.max(args.session_timeout_ms),
            protocols: args.protocols,
            assignment: Bytes::new(),
            last_heartbeat_ms: now_ms,
            join_seq: self.next_join_seq,
            awaiting_join: Some(tx),
            awaiting_sync: None,
        };
        self.next_join_seq += 1;
        self.members.insert(member_id, member);
        if let Some(delay) = &mut self.initial_delay {
            delay.member_added = true;
        }
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now_ms);
        }
    }

    fn join_known(&mut self, args: JoinArgs, tx: oneshot::Sender<JoinResult>, now_ms: TimestampMs) {
        if self.pending.contains_key(&args.member_id) {
            let id = args.member_id.clone();
            self.add_member(id, args, tx, now_ms);
            return;
        }
        if let Err(code) = self.check_member(&args.member_id, args.group_instance_id.as_deref()) {
            answer(tx, JoinResult::error(code, &args.member_id));
            return;
        }
        let state = self.state;
        let is_leader = self.leader.as_deref() == Some(args.member_id.as_str());
        let member = self.members.get_mut(&args.member_id).expect("checked");
        member.last_heartbeat_ms = now_ms;
        let unchanged = member.protocols == args.protocols;
        member.protocols = args.protocols;
        member.session_timeout_ms = args.session_timeout_ms;
        member.rebalance_timeout_ms = args.rebalance_timeout_ms.max(args.session_timeout_ms);
        match state {
            GroupState::PreparingRebalance => member.awaiting_join = Some(tx),
            GroupState::CompletingRebalance | GroupState::Stable
                if unchanged && !(state == GroupState::Stable && is_leader) =>
            {
                let result = self.join_result(&args.member_id, true);
                answer(tx, result);
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.awaiting_join = Some(tx);
                self.prepare_rebalance(now_ms);
            }
            GroupState::Empty | GroupState::Dead => answer(
                tx,
                JoinResult::error(ErrorCode::UnknownMemberId, &args.member_id),
            ),
        }
    }

    /// A static member rejoined without its member id (restarted): it takes its old place under
    /// a new id, and the old id is fenced.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        args: JoinArgs,
        tx: oneshot::Sender<JoinResult>,
        now_ms: TimestampMs,
    ) {
        let new_id = self.new_member_id(&args);
        let mut member = self
            .members
            .remove(old_id)
            .expect("static map is consistent");
        if let Some(old) = member.awaiting_join.take() {
            answer(old, JoinResult::error(ErrorCode::FencedInstanceId, old_id));
        }
        if let Some(old) = member.awaiting_sync.take() {
            answer(old, SyncResult::error(ErrorCode::FencedInstanceId));
        }
        let unchanged = member.protocols == args.protocols;
        member.id = new_id.clone();
        member.protocols = args.protocols;
        member.client_id = args.client_id;
        member.client_host = args.client_host;
        member.session_timeout_ms = args.session_timeout_ms;
        member.rebalance_timeout_ms = args.rebalance_timeout_ms.max(args.session_timeout_ms);
        member.last_heartbeat_ms = now_ms;
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        let instance = member.instance_id.clone().expect("static member");
        self.static_members.insert(instance, new_id.clone());
        let stable = self.state == GroupState::Stable;
        if !(stable && unchanged) {
            member.awaiting_join = Some(tx);
            self.members.insert(new_id, member);
            if self.state != GroupState::PreparingRebalance {
                self.prepare_rebalance(now_ms);
            }
            return;
        }
        self.members.insert(new_id.clone(), member);
        // Same subscription, stable group: keep the assignment, no rebalance. The leader gets
        // no member list so that it does not compute a new assignment.
        let result = self.join_result(&new_id, false);
        answer(tx, result);
    }

    /// The member exists and its instance id (if any) still maps to it.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(current) if current != member_id => return Err(ErrorCode::FencedInstanceId),
                None if self.members.contains_key(member_id) => {
                    return Err(ErrorCode::FencedInstanceId)
                }
                _ => {}
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ErrorCode::UnknownMemberId)
        }
    }

    fn join_result(&self, member_id: &str, with_members_for_leader: bool) -> JoinResult {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if with_members_for_leader && leader == member_id {
            let mut all: Vec<&Member> = self.members.values().collect();
            all.sort_by_key(|m| m.join_seq);
            all.into_iter()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            error_code: ErrorCode::None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader,
            member_id: member_id.to_string(),
            members,
        }
    }

    fn prepare_rebalance(&mut self, now_ms: TimestampMs) {
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                if let Some(tx) = member.awaiting_sync.take() {
                    answer(tx, SyncResult::error(ErrorCode::RebalanceInProgress));
                }
            }
        }
        let timeout = DurationMs::from(
            self.members
                .values()
                .map(|m| m.rebalance_timeout_ms)
                .max()
                .unwrap_or(0),
        );
        self.initial_delay = None;
        if self.state == GroupState::Empty && self.initial_rebalance_delay_ms > DurationMs::ZERO {
            // Never longer than the rebalance timeout, in all.
            let wait = self.initial_rebalance_delay_ms.min(timeout);
            self.initial_delay = Some(InitialDelay {
                until_ms: now_ms + wait,
                remaining_ms: timeout - wait,
                member_added: false,
            });
        }
        self.state = GroupState::PreparingRebalance;
        self.deadline_ms = Some(now_ms + timeout);
    }

    /// While a rebalance that left Empty is held: whether it still waits at `now_ms` (a wait
    /// that saw a new member is followed by another, within what the timeout leaves).
    fn initial_delay_holds(&mut self, now_ms: TimestampMs) -> bool {
        let Some(delay) = self.initial_delay else {
            return false;
        };
        if self.members.is_empty() && self.pending.is_empty() {
            // Everyone left: nobody to wait for, back to Empty now.
            self.initial_delay = None;
            return false;
        }
        if now_ms < delay.until_ms {
            return true;
        }
        if delay.member_added && delay.remaining_ms > DurationMs::ZERO {
            let wait = self.initial_rebalance_delay_ms.min(delay.remaining_ms);
            self.initial_delay = Some(InitialDelay {
                until_ms: now_ms + wait,
                remaining_ms: delay.remaining_ms - wait,
                member_added: false,
            });
            return true;
        }
        self.initial_delay = None;
        // The delay is over: complete with whoever joined (as Kafka does, not waiting for the
        // members that were handed an id and never came back).
        self.deadline_ms = Some(now_ms);
        false
    }

    fn maybe_complete_join(&mut self, now_ms: TimestampMs) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if self.initial_delay_holds(now_ms) {
            return;
        }
        let all_joined =
            self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some());
        let timed_out = self.deadline_ms.is_some_and(|d| now_ms >= d);
        if all_joined || timed_out {
            self.complete_join(now_ms);
        }
    }

    fn complete_join(&mut self, now_ms: TimestampMs) {
        let missing: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in missing {
            self.drop_member(&id);
        }
        self.pending.clear();
        self.generation += 1;
        self.writing = None;
        self.to_write = None;
        if self.members.is_empty() {
            // The protocol type stays, as Kafka's (ListGroups and DescribeGroups show an emptied
            // consumer group as "consumer"); the next member to join an empty group sets it anew.
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.leader = None;
            self.deadline_ms = None;
            if self.writes_membership {
                // Written too (as Kafka does), so a new coordinator restores no departed members.
                self.to_write = Some(self.metadata(now_ms));
            }
            return;
        }
        self.protocol_name = Some(self.select_protocol());
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            let first = self.members.values().min_by_key(|m| m.join_seq);
            self.leader = first.map(|m| m.id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        let timeout = self.members.values().map(|m| m.rebalance_timeout_ms).max();
        self.deadline_ms = Some(now_ms + DurationMs::from(timeout.unwrap_or(0)));
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result(&id, true);
            let member = self.members.get_mut(&id).expect("listed");
            member.assignment = Bytes::new();
            member.last_heartbeat_ms = now_ms;
            if let Some(tx) = member.awaiting_join.take() {
                answer(tx, result);
            }
        }
    }

    /// The protocol every member supports that most members prefer.
    fn select_protocol(&self) -> String {
        let mut votes: Vec<(String, usize)> = Vec::new();
        let first = self.members.values().next().expect("non-empty");
        for (name, _) in &first.protocols {
            if self
                .members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            {
                votes.push((name.clone(), 0));
            }
        }
        for member in self.members.values() {
            let choice = member
                .protocols
                .iter()
                .find(|(n, _)| votes.iter().any(|(v, _)| v == n));
            if let Some((name, _)) = choice {
                if let Some(v) = votes.iter_mut().find(|(v, _)| v == name) {
                    v.1 += 1;
                }
            }
        }
        // max_by_key keeps the last of equals; reverse so ties go to the earlier candidate.
        votes
            .into_iter()
            .rev()
            .max_by_key(|(_, n)| *n)
            .map(|(name, _)| name)
            .unwrap_or_default()
    }

    /// Remove a member without triggering anything (callers decide).
    fn drop_member(&mut self, member_id: &str) -> Option<Member> {
        let mut member = self.members.remove(member_id)?;
        if let Some(instance) = &member.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if let Some(tx) = member.awaiting_join.take() {
            answer(tx, JoinResult::error(ErrorCode::UnknownMemberId, member_id));
        }
        if let Some(tx) = member.awaiting_sync.take() {
            answer(tx, SyncResult::error(ErrorCode::UnknownMemberId));
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
        Some(member)
    }

    /// Remove a member and rebalance the rest (LeaveGroup, session expiry).
    fn remove_member(&mut self, member_id: &str, now_ms: TimestampMs) {
        if self.drop_member(member_id).is_none() {
            return;
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now_ms);
                // With no members left the rebalance completes at once (to Empty).
                self.maybe_complete_join(now_ms);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now_ms),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ---------------------------------------------------------------- SyncGroup

    /// Handle SyncGroup. A follower's answer waits for the leader's assignment.
    pub fn sync(&mut self, args: SyncArgs, now_ms: TimestampMs) -> oneshot::Receiver<SyncResult> {
        let (tx, rx) = oneshot::channel();
        match self.validate_sync(&args) {
            Err(code) => answer(tx, SyncResult::error(code)),
            Ok(()) => self.sync_valid(args, tx, now_ms),
        }
        rx
    }

    fn validate_sync(&self, args: &SyncArgs) -> Result<(), ErrorCode> {
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        self.check_member(&args.member_id, args.group_instance_id.as_deref())?;
        if args.generation_id != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        let mismatch = |given: &Option<String>, ours: &Option<String>| {
            given.is_some() && ours.is_some() && given != ours
        };
        if mismatch(&args.protocol_type, &self.protocol_type)
            || mismatch(&args.protocol_name, &self.protocol_name)
        {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::PreparingRebalance => Err(ErrorCode::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => Err(ErrorCode::UnknownMemberId),
            _ => Ok(()),
        }
    }

    fn sync_valid(&mut self, args: SyncArgs, tx: oneshot::Sender<SyncResult>, now_ms: TimestampMs) {
        let member = self.members.get_mut(&args.member_id).expect("validated");
        member.last_heartbeat_ms = now_ms;
        if self.state == GroupState::Stable {
            let result = self.sync_result(&args.member_id);
            answer(tx, result);
            return;
        }
        member.awaiting_sync = Some(tx);
        if self.writing.is_some() || self.leader.as_deref() != Some(args.member_id.as_str()) {
            return;
        }
        let mut assignments: HashMap<String, Bytes> = args.assignments.into_iter().collect();
        for member in self.members.values_mut() {
            member.assignment = assignments.remove(&member.id).unwrap_or_default();
        }
        if self.writes_membership {
            self.writing = Some(self.generation);
            self.to_write = Some(self.metadata(now_ms));
            return;
        }
        self.become_stable();
    }

    /// CompletingRebalance → Stable: every parked SyncGroup gets its assignment.
    fn become_stable(&mut self) {
        self.state = GroupState::Stable;
        self.deadline_ms = None;
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.sync_result(&id);
            if let Some(tx) = self
                .members
                .get_mut(&id)
                .and_then(|m| m.awaiting_sync.take())
            {
                answer(tx, result);
            }
        }
    }

    fn sync_result(&self, member_id: &str) -> SyncResult {
        SyncResult {
            error_code: ErrorCode::None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self.members[member_id].assignment.clone(),
        }
    }

    // ---------------------------------------------------------------- Heartbeat, LeaveGroup

    /// Handle Heartbeat: keeps the session alive; REBALANCE_IN_PROGRESS asks the member to rejoin.
    pub fn heartbeat(&mut self, args: &MemberRef, now_ms: TimestampMs) -> ErrorCode {
        match self.state {
            GroupState::Dead => return ErrorCode::CoordinatorNotAvailable,
            GroupState::Empty => return ErrorCode::UnknownMemberId,
            _ => {}
        }
        if let Err(code) = self.check_member(&args.member_id, args.group_instance_id.as_deref()) {
            return code;
        }
        if args.generation_id != self.generation {
            return ErrorCode::IllegalGeneration;
        }
        let member = self.members.get_mut(&args.member_id).expect("checked");
        member.last_heartbeat_ms = now_ms;
        match self.state {
            GroupState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            _ => ErrorCode::None,
        }
    }

    /// Handle LeaveGroup for each (member id, instance id); one error per member.
    pub fn leave(
        &mut self,
        members: &[(String, Option<String>)],
        now_ms: TimestampMs,
    ) -> Vec<ErrorCode> {
        members
            .iter()
            .map(|(member_id, instance)| self.leave_one(member_id, instance.as_deref(), now_ms))
            .collect()
    }

    fn leave_one(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        now_ms: TimestampMs,
    ) -> ErrorCode {
        if self.state == GroupState::Dead {
            return ErrorCode::CoordinatorNotAvailable;
        }
        let target = match instance {
            Some(instance) => match self.static_members.get(instance) {
                None => return ErrorCode::UnknownMemberId,
                Some(current) if !member_id.is_empty() && current != member_id => {
                    return ErrorCode::FencedInstanceId
                }
                Some(current) => current.clone(),
            },
            None => member_id.to_string(),
        };
        if self.pending.remove(&target).is_some() {
            self.maybe_complete_join(now_ms);
            return ErrorCode::None;
        }
        if !self.members.contains_key(&target) {
            return ErrorCode::UnknownMemberId;
        }
        self.remove_member(&target, now_ms);
        ErrorCode::None
    }

    /// Answer every parked JoinGroup/SyncGroup with `code` (the coordinator is going away; the
    /// members find it again and rejoin).
    pub fn fail_waiters(&mut self, code: ErrorCode) {
        for member in self.members.values_mut() {
            if let Some(tx) = member.awaiting_join.take() {
                answer(tx, JoinResult::error(code, &member.id));
            }
            if let Some(tx) = member.awaiting_sync.take() {
                answer(tx, SyncResult::error(code));
            }
        }
    }

    // ---------------------------------------------------------------- time

    /// Expire sessions, pending member ids and rebalance deadlines. Returns whether anything
    /// changed (tests).
    pub fn tick(&mut self, now_ms: TimestampMs) -> bool {
        let before = (
            self.state,
            self.generation,
            self.members.len(),
            self.pending.len(),
        );
        self.pending.retain(|_, expires| *expires > now_ms);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_expired(now_ms))
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            tracing::info!(
                group = self.id,
                member = id,
                "session expired; removing member"
            );
            self.remove_member(&id, now_ms);
        }
        let due = self.deadline_ms.is_some_and(|d| now_ms >= d);
        match self.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(now_ms),
            GroupState::CompletingRebalance if due => {
                // The leader never sent its assignment: drop whoever did not sync, start over.
                let idle: Vec<String> = self
                    .members
                    .values()
                    .filter(|m| m.awaiting_sync.is_none())
                    .map(|m| m.id.clone())
                    .collect();
                for id in idle {
                    self.drop_member(&id);
                }
                self.prepare_rebalance(now_ms);
                self.maybe_complete_join(now_ms);
            }
            _ => {}
        }
        before
            != (
                self.state,
                self.generation,
                self.members.len(),
                self.pending.len(),
            )
    }

    // ---------------------------------------------------------------- offsets and admin

    /// May this (generation, member) commit offsets now? Simple commits (generation < 0, no
    /// member id) are allowed only while the group has no members.
    pub fn validate_commit(
        &mut self,
        who: &MemberRef,
        now_ms: TimestampMs,
    ) -> Result<(), ErrorCode> {
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if who.generation_id < 0 && self.members.is_empty() {
            return Ok(());
        }
        self.check_member(&who.member_id, who.group_instance_id.as_deref())?;
        if self.state == GroupState::CompletingRebalance {
            return Err(ErrorCode::RebalanceInProgress);
        }
        if who.generation_id != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        if let Some(m) = self.members.get_mut(&who.member_id) {
            m.last_heartbeat_ms = now_ms;
        }
        Ok(())
    }

    /// Topics the members subscribed to (consumer protocol), for OffsetDelete's check.
    pub fn subscribed_topics(&self) -> Option<Vec<String>> {
        use rill_protocol::kafka_protocol::messages::ConsumerProtocolSubscription;
        use rill_protocol::kafka_protocol::protocol::Decodable;
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.clone()?;
        let mut topics = Vec::new();
        for member in self.members.values() {
            let mut meta = member.metadata_for(&protocol);
            if meta.len() < 2 {
                return None;
            }
            // The consumer protocol's metadata: an i16 version, then the subscription.
            let version = bytes::Buf::get_i16(&mut meta).clamp(0, 3);
            // The client's bytes: every length is checked before the codec allocates for it
            // (a topics count of 2^30 made it abort the broker).
            let spec = rill_protocol::schema::consumer_subscription_spec();
            rill_protocol::length_guard::check_message(spec, version, &meta).ok()?;
            let sub = ConsumerProtocolSubscription::decode(&mut meta, version).ok()?;
            topics.extend(sub.topics.into_iter().map(|t| t.to_string()));
        }
        Some(topics)
    }

    /// DescribeGroups view.
    pub fn describe(&self) -> GroupDescription {
        let stable = self.state == GroupState::Stable;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = self
            .members
            .values()
            .map(|m| MemberDescription {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata_for(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            error_code: ErrorCode::None,
            state: self.state.name().to_string(),
            protocol_type: self.protocol_type().to_string(),
            protocol_data: if stable { protocol } else { String::new() },
            members,
        }
    }
}

#[path = "state_membership.rs"]
mod membership;

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
