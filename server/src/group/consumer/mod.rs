//! One KIP-848 consumer group (`group.protocol=consumer`): runtime-free, handed the time.
//!
//! The group epoch counts changes of membership, subscriptions and subscribed topics' partition
//! counts; each change recomputes the target assignment with a server-side [`Assignor`] (the
//! target's epoch is the group epoch it was computed at). Each member then reconciles toward
//! its target one heartbeat at a time, as Kafka's `CurrentAssignmentBuilder` does:
//!
//! - a member that owns partitions its target lacks is told to give them up first and keeps its
//!   epoch (UNREVOKED_PARTITIONS) until a heartbeat shows it no longer owns them;
//! - it then moves to the target epoch with the target's partitions that no other member still
//!   owns; those another member still holds come on a later heartbeat, once released
//!   (UNRELEASED_PARTITIONS). So a partition is never owned by two members at once.
//!
//! Members are fenced (removed) when no heartbeat comes within the session timeout, or when they
//! do not revoke within their rebalance timeout. A static member (`group.instance.id`) that
//! leaves with epoch -2 keeps its assignment for its session; one that joins with the same
//! instance id takes over the assignment without a rebalance.

pub mod assignor;
pub mod records;

use std::collections::{BTreeMap, BTreeSet};

use rill_protocol::ErrorCode;
use rill_types::{DurationMs, PartitionIndex, TimestampMs, TopicPartitionRef};
use uuid::Uuid;

pub use super::settings::ConsumerConfig;
pub use assignor::{Assignment, Assignor};

use super::ops::{
    ConsumerGroupView, ConsumerHeartbeatArgs, ConsumerHeartbeatResult, ConsumerMemberView,
    TopicIdPartitions, TopicInfo,
};

/// Epoch a member sends to leave.
pub const LEAVE_EPOCH: i32 = -1;
/// Epoch a static member sends to leave for a while (it keeps its partitions for its session).
pub const STATIC_LEAVE_EPOCH: i32 = -2;
/// Longest subscribed regex accepted (a bound on the compiled program, see [`compile_regex`]).
pub const REGEX_BYTES_MAX: usize = 1024;

impl ConsumerConfig {
    /// The configured assignor called `name`.
    fn assignor(&self, name: &str) -> Option<Assignor> {
        let wanted = Assignor::from_name(name)?;
        self.assignors
            .iter()
            .flatten()
            .copied()
            .find(|a| *a == wanted)
    }

    /// The default assignor (the first configured).
    fn default_assignor(&self) -> Assignor {
        self.assignors[0].unwrap_or(Assignor::Uniform)
    }
}

/// Where a member is in reconciling toward its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// It owns its target.
    Stable,
    /// It must first give up partitions its target lacks.
    UnrevokedPartitions,
    /// Partitions of its target are still owned by others.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's byte for this state in ConsumerGroupCurrentMemberAssignmentValue.
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 1,
            MemberState::UnrevokedPartitions => 2,
            MemberState::UnreleasedPartitions => 3,
        }
    }

    /// The state a [`Self::code`] names (unknown codes read as UNREVOKED: the safe side).
    pub fn from_code(code: i8) -> Self {
        match code {
            1 => MemberState::Stable,
            3 => MemberState::UnreleasedPartitions,
            _ => MemberState::UnrevokedPartitions,
        }
    }
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    /// Member id.
    pub id: String,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// How long it may take to revoke.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub topic_names: Vec<String>,
    /// Subscribed regex as sent.
    pub regex: Option<String>,
    compiled: Option<regex::Regex>,
    /// Its `group.remote.assignor`.
    pub server_assignor: Option<String>,
    /// Its epoch ([`STATIC_LEAVE_EPOCH`] while a static member is away).
    pub epoch: i32,
    /// Its epoch before the last bump (a heartbeat whose answer was lost carries it).
    pub previous_epoch: i32,
    /// Reconciliation state.
    pub state: MemberState,
    /// What it owns.
    pub assigned: Assignment,
    /// What it was told to give up and has not yet.
    pub pending_revocation: Assignment,
    /// The epoch at which it was given each partition it owns or has yet to revoke (Kafka's
    /// assignment epochs): a commit at an older member epoch is accepted for a partition it
    /// has held since then. Not written: a member restored from the journal counts as given
    /// what it holds at the epoch it was restored with; a partition missing here counts as
    /// given at the member's current epoch, the strict rule.
    assigned_at: BTreeMap<(Uuid, PartitionIndex), i32>,
    /// Fenced after this (ms) without a heartbeat.
    session_deadline_ms: TimestampMs,
    /// Fenced after this (ms) if still UNREVOKED.
    revocation_deadline_ms: Option<TimestampMs>,
}

impl ConsumerMember {
    fn new(id: &str, args: &ConsumerHeartbeatArgs) -> Self {
        ConsumerMember {
            id: id.to_string(),
            instance_id: args.instance_id.clone(),
            rack_id: None,
            client_id: args.client_id.clone(),
            client_host: args.client_host.clone(),
            rebalance_timeout_ms: args.rebalance_timeout_ms.max(0),
            topic_names: Vec::new(),
            regex: None,
            compiled: None,
            server_assignor: None,
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            assigned_at: BTreeMap::new(),
            session_deadline_ms: TimestampMs(0),
            revocation_deadline_ms: None,
        }
    }

    /// The epoch it was given `topic`-`partition` at, if it owns it or has yet to revoke it.
    fn assignment_epoch(&self, topic: &Uuid, partition: PartitionIndex) -> Option<i32> {
        let holds = |a: &Assignment| a.get(topic).is_some_and(|s| s.contains(&partition));
        (holds(&self.assigned) || holds(&self.pending_revocation)).then(|| {
            let at = self.assigned_at.get(&(*topic, partition)).copied();
            at.unwrap_or(self.epoch)
        })
    }

    /// Whether it subscribes to `topic`.
    fn subscribes(&self, topic: &str) -> bool {
        self.topic_names.iter().any(|t| t == topic)
            || self.compiled.as_ref().is_some_and(|r| r.is_match(topic))
    }

    /// Sets the regex (`None` or "" clears it); Err for one that does not compile.
    pub fn set_regex(&mut self, regex: Option<String>) -> Result<(), String> {
        let regex = regex.filter(|r| !r.is_empty());
        self.compiled = regex.as_deref().map(compile_regex).transpose()?;
        self.regex = regex;
        Ok(())
    }
}

/// A subscribed regex compiled as Kafka applies it: to whole topic names, with the compiled
/// program bounded (a hostile pattern gets INVALID_REGULAR_EXPRESSION, not the heap).
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > REGEX_BYTES_MAX {
        return Err(format!("regex longer than {REGEX_BYTES_MAX} bytes"));
    }
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
        .map_err(|e| e.to_string())
}

/// One consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    /// Group id.
    pub id: String,
    /// The group epoch.
    pub epoch: i32,
    /// The epoch the target assignment was computed at.
    pub assignment_epoch: i32,
    /// Members by id.
    pub members: BTreeMap<String, ConsumerMember>,
    /// Each member's target.
    pub target: BTreeMap<String, Assignment>,
    /// Subscribed topics: name → (id, partitions), as of the last epoch bump.
    pub subscribed: BTreeMap<String, (Uuid, i32)>,
    /// The assignor the target was computed with.
    pub assignor: Assignor,
    config: ConsumerConfig,
    /// Records to write (members changed since the last take).
    dirty: bool,
    /// Members removed since the last take (their records get tombstones).
    removed: Vec<String>,
}

impl ConsumerGroup {
    /// An empty group.
    pub fn new(id: &str, config: ConsumerConfig) -> Self {
        ConsumerGroup {
            id: id.to_string(),
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscribed: BTreeMap::new(),
            assignor: config.default_assignor(),
            config,
            dirty: false,
            removed: Vec::new(),
        }
    }

    /// Kafka's group state name.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Whether it has members (a static member away for its session counts).
    pub fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    /// If something changed since the last take, the members removed meanwhile: the group is
    /// to be written ([`records::encode`]).
    pub fn take_write(&mut self) -> Option<Vec<String>> {
        std::mem::take(&mut self.dirty).then(|| std::mem::take(&mut self.removed))
    }

    /// Topics the members subscribe to (OffsetDelete's check).
    pub fn subscribed_topics(&self) -> Vec<String> {
        self.subscribed.keys().cloned().collect()
    }

    /// Handle one ConsumerGroupHeartbeat (structurally checked by the handler).
    pub fn heartbeat(
        &mut self,
        args: ConsumerHeartbeatArgs,
        now_ms: TimestampMs,
    ) -> ConsumerHeartbeatResult {
        if args.member_epoch == LEAVE_EPOCH || args.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(&args, now_ms);
        }
        let (member_id, new) = match self.admit(&args, now_ms) {
            Ok(admitted) => admitted,
            Err(refused) => return refused,
        };
        let changed = match self.update_member(&member_id, &args, now_ms) {
            Ok(changed) => new || changed,
            Err(refused) => {
                if new {
                    self.members.remove(&member_id);
                }
                return refused;
            }
        };
        let subscribed = self.resolve_subscriptions(&args.topics);
        if changed || subscribed != self.subscribed {
            self.subscribed = subscribed;
            self.bump();
        }
        if self.epoch > self.assignment_epoch {
            self.compute_target();
        }
        let before = self.members[&member_id].assigned.clone();
        let before_epoch = self.members[&member_id].epoch;
        self.reconcile(&member_id, args.owned.as_ref(), now_ms);
        let member = &self.members[&member_id];
        if member.assigned != before || member.epoch != before_epoch {
            self.dirty = true;
        }
        let full = args.rebalance_timeout_ms != -1
            && (args.subscribed_topic_names.is_some() || args.subscribed_topic_regex.is_some())
            && args.owned.is_some();
        let send = args.member_epoch == 0 || full || member.assigned != before;
        ConsumerHeartbeatResult {
            error_code: ErrorCode::None,
            error_message: None,
            member_id: Some(member_id.clone()),
            member_epoch: member.epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            assignment: send.then(|| to_wire(&member.assigned)),
        }
    }

    /// Takes the heartbeat's non-null fields into the member and starts its session anew.
    /// Ok: whether its subscription changed (the group epoch is to bump).
    fn update_member(
        &mut self,
        member_id: &str,
        args: &ConsumerHeartbeatArgs,
        now_ms: TimestampMs,
    ) -> Result<bool, ConsumerHeartbeatResult> {
        let mut changed = false;
        let member = self.members.get_mut(member_id).expect("admitted");
        member.session_deadline_ms = now_ms + DurationMs::from(self.config.session_timeout_ms);
        if let Some(names) = &args.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            changed |= member.topic_names != names;
            member.topic_names = names;
        }
        if let Some(regex) = &args.subscribed_topic_regex {
            let regex = Some(regex.clone()).filter(|r| !r.is_empty());
            if member.regex != regex {
                if let Err(e) = member.set_regex(regex) {
                    let message = format!("invalid regular expression: {e}");
                    return Err(ConsumerHeartbeatResult::error(
                        ErrorCode::InvalidRegularExpression,
                        message,
                    ));
                }
                changed = true;
            }
        }
        if let Some(assignor) = &args.server_assignor {
            let assignor = Some(assignor.clone()).filter(|a| !a.is_empty());
            changed |= member.server_assignor != assignor;
            member.server_assignor = assignor;
        }
        if args.rebalance_timeout_ms >= 0 {
            member.rebalance_timeout_ms = args.rebalance_timeout_ms;
        }
        if args.rack_id.is_some() {
            member.rack_id = args.rack_id.clone();
        }
        member.client_id = args.client_id.clone();
        member.client_host = args.client_host.clone();
        Ok(changed)
    }

    /// A joining member (epoch 0) is added or takes over its static identity; a known one's
    /// epoch is checked. Ok: the member's id, and whether it is new (the group epoch is to
    /// bump, once with whatever else the heartbeat changes).
    fn admit(
        &mut self,
        args: &ConsumerHeartbeatArgs,
        now_ms: TimestampMs,
    ) -> Result<(String, bool), ConsumerHeartbeatResult> {
        if args.member_epoch != 0 {
            let Some(member) = self.members.get(&args.member_id) else {
                return Err(ConsumerHeartbeatResult::error(
                    ErrorCode::UnknownMemberId,
                    format!("member {} is not in group {}", args.member_id, self.id),
                ));
            };
            if !epoch_is_valid(member, args.member_epoch, args.owned.as_ref()) {
                return Err(ConsumerHeartbeatResult::error(
                    ErrorCode::FencedMemberEpoch,
                    format!(
                        "member epoch {} is not the member's ({})",
                        args.member_epoch, member.epoch
                    ),
                ));
            }
            return Ok((args.member_id.clone(), false));
        }
        let member_id = if args.member_id.is_empty() {
            Uuid::new_v4().to_string() // v0: the coordinator names the member
        } else {
            args.member_id.clone()
        };
        if let Some(instance) = &args.instance_id {
            let holder = self
                .members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(instance))
                .map(|m| (m.id.clone(), m.epoch));
            if let Some((old_id, old_epoch)) = holder {
                if old_epoch != STATIC_LEAVE_EPOCH && old_id != member_id {
                    return Err(ConsumerHeartbeatResult::error(
                        ErrorCode::UnreleasedInstanceId,
                        format!("static member {instance} is still in use by {old_id}"),
                    ));
                }
                // The static member comes back: a new id, the same assignment, no rebalance.
                let mut member = self.members.remove(&old_id).expect("found");
                let target = self.target.remove(&old_id).unwrap_or_default();
                member.id = member_id.clone();
                self.removed.push(old_id.clone());
                if old_epoch == STATIC_LEAVE_EPOCH {
                    member.epoch = member.previous_epoch;
                }
                member.client_id = args.client_id.clone();
                member.client_host = args.client_host.clone();
                self.members.insert(member_id.clone(), member);
                self.target.insert(member_id.clone(), target);
                self.dirty = true;
                return Ok((member_id, false));
            }
        }
        if self.members.contains_key(&member_id) {
            // A known member joining again gave up what it owned: it starts over.
            self.remove(&member_id);
        }
        if self.members.len() >= self.config.max_size {
            return Err(ConsumerHeartbeatResult::error(
                ErrorCode::GroupMaxSizeReached,
                format!("group {} has {} members", self.id, self.members.len()),
            ));
        }
        let mut member = ConsumerMember::new(&member_id, args);
        member.session_deadline_ms = now_ms + DurationMs::from(self.config.session_timeout_ms);
        self.members.insert(member_id.clone(), member);
        Ok((member_id, true))
    }

    fn leave(
        &mut self,
        args: &ConsumerHeartbeatArgs,
        now_ms: TimestampMs,
    ) -> ConsumerHeartbeatResult {
        let found = self.members.contains_key(&args.member_id)
            || (args.member_epoch == STATIC_LEAVE_EPOCH
                && args.instance_id.as_ref().is_some_and(|i| {
                    self.members
                        .values()
                        .any(|m| m.instance_id.as_ref() == Some(i))
                }));
        if !found {
            return ConsumerHeartbeatResult::error(
                ErrorCode::UnknownMemberId,
                format!("member {} is not in group {}", args.member_id, self.id),
            );
        }
        let static_member = self
            .members
            .get(&args.member_id)
            .is_some_and(|m| m.instance_id.is_some());
        if args.member_epoch == STATIC_LEAVE_EPOCH && static_member {
            let timeout = DurationMs::from(self.config.session_timeout_ms);
            let member = self.members.get_mut(&args.member_id).expect("found");
            if member.epoch != STATIC_LEAVE_EPOCH {
                member.previous_epoch = member.epoch;
            }
            member.epoch = STATIC_LEAVE_EPOCH;
            member.session_deadline_ms = now_ms + timeout;
            self.dirty = true;
        } else {
            self.remove(&args.member_id);
        }
        ConsumerHeartbeatResult {
            member_id: Some(args.member_id.clone()),
            member_epoch: args.member_epoch,
            heartbeat_interval_ms: 0,
            ..Default::default()
        }
    }

    /// Removes a member (left, fenced, or expired): its partitions are free, the epoch bumps.
    pub fn remove(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.removed.push(member_id.to_string());
            self.bump();
        }
    }

    fn bump(&mut self) {
        self.epoch += 1;
        self.dirty = true;
    }

    /// Name → (id, partitions) of every topic some member subscribes to that exists.
    fn resolve_subscriptions(&self, topics: &[TopicInfo]) -> BTreeMap<String, (Uuid, i32)> {
        topics
            .iter()
            .filter(|t| self.members.values().any(|m| m.subscribes(&t.name)))
            .map(|t| (t.name.clone(), (t.id, t.partitions)))
            .collect()
    }

    /// The assignor the members prefer most (ties and none: the configured default).
    fn choose_assignor(&self) -> Assignor {
        let mut votes: BTreeMap<&'static str, (usize, Assignor)> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m
                .server_assignor
                .as_deref()
                .and_then(|n| self.config.assignor(n))
            {
                votes.entry(a.name()).or_insert((0, a)).0 += 1;
            }
        }
        let default = self.config.default_assignor();
        let best = votes.values().map(|(n, _)| *n).max().unwrap_or(0);
        if votes.get(default.name()).is_some_and(|(n, _)| *n == best) || best == 0 {
            return default;
        }
        votes.values().find(|(n, _)| *n == best).expect("a max").1
    }

    fn compute_target(&mut self) {
        self.assignor = self.choose_assignor();
        let topics: BTreeMap<Uuid, i32> = self.subscribed.values().copied().collect();
        let members: BTreeMap<String, BTreeSet<Uuid>> = self
            .members
            .values()
            .map(|m| {
                let ids = self
                    .subscribed
                    .iter()
                    .filter(|(name, _)| m.subscribes(name))
                    .map(|(_, (id, _))| *id)
                    .collect();
                (m.id.clone(), ids)
            })
            .collect();
        self.target = self.assignor.assign(&members, &topics, &self.target);
        self.assignment_epoch = self.epoch;
    }

    /// Whether a member other than `member_id` owns (or has yet to revoke) `topic`-`partition`.
    fn owned_by_other(&self, member_id: &str, topic: &Uuid, partition: PartitionIndex) -> bool {
        self.members.values().any(|m| {
            m.id != member_id
                && (m
                    .assigned
                    .get(topic)
                    .is_some_and(|s| s.contains(&partition))
                    || m.pending_revocation
                        .get(topic)
                        .is_some_and(|s| s.contains(&partition)))
        })
    }

    /// One step of the member toward its target (Kafka's `CurrentAssignmentBuilder`).
    fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&TopicIdPartitions>,
        now_ms: TimestampMs,
    ) {
        let target_epoch = self.assignment_epoch;
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let member = &self.members[member_id];
        match member.state {
            MemberState::UnrevokedPartitions => {
                let still_owned = owned.is_none_or(|o| intersects(o, &member.pending_revocation));
                if still_owned {
                    return;
                }
            }
            MemberState::Stable if member.epoch == target_epoch => return,
            MemberState::Stable | MemberState::UnreleasedPartitions => {}
        }
        let keep = intersection(&member.assigned, &target);
        let revoke = difference(&member.assigned, &target);
        if !revoke.is_empty() {
            let deadline = now_ms + DurationMs::from(member.rebalance_timeout_ms);
            let member = self.members.get_mut(member_id).expect("a member");
            member.assigned = keep;
            member.pending_revocation = revoke;
            member.state = MemberState::UnrevokedPartitions;
            member.revocation_deadline_ms = Some(deadline);
            self.dirty = true;
            return;
        }
        let mut assigned = keep;
        let mut unreleased = false;
        let mut given = Vec::new();
        for (topic, parts) in &target {
            for &p in parts {
                if assigned.get(topic).is_some_and(|s| s.contains(&p)) {
                    continue;
                }
                if self.owned_by_other(member_id, topic, p) {
                    unreleased = true;
                } else {
                    assigned.entry(*topic).or_default().insert(p);
                    given.push((*topic, p));
                }
            }
        }
        let member = self.members.get_mut(member_id).expect("a member");
        if member.epoch != target_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = target_epoch;
        }
        member.assigned = assigned;
        member.pending_revocation.clear();
        member.revocation_deadline_ms = None;
        for key in given {
            member.assigned_at.insert(key, target_epoch);
        }
        let owned = &member.assigned;
        member
            .assigned_at
            .retain(|(t, p), _| owned.get(t).is_some_and(|s| s.contains(p)));
        member.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
    }

    /// Fences members whose session ended or who did not revoke in time. Returns whether any
    /// was (the group changed).
    pub fn tick(&mut self, now_ms: TimestampMs) -> bool {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                now_ms > m.session_deadline_ms
                    || m.revocation_deadline_ms.is_some_and(|d| now_ms > d)
            })
            .map(|m| m.id.clone())
            .collect();
        for id in &expired {
            tracing::info!(group = self.id, member = id, "consumer group member fenced");
            self.remove(id);
        }
        !expired.is_empty()
    }

    /// Restarts every session from `now_ms` (a new coordinator loaded the group).
    pub fn restart_sessions(&mut self, now_ms: TimestampMs) {
        let timeout = DurationMs::from(self.config.session_timeout_ms);
        for m in self.members.values_mut() {
            m.session_deadline_ms = now_ms + timeout;
            if m.state == MemberState::UnrevokedPartitions {
                m.revocation_deadline_ms = Some(now_ms + DurationMs::from(m.rebalance_timeout_ms));
            }
        }
    }

    /// OffsetCommit/OffsetFetch (v9+) by a member: NONE, UNKNOWN_MEMBER_ID or
    /// STALE_MEMBER_EPOCH, as Kafka's `ConsumerGroup.validateOffsetCommit`. A commit with a
    /// negative epoch while the group has no members (an admin's) passes.
    pub fn validate_member(&self, member_id: &str, epoch: i32) -> ErrorCode {
        if epoch < 0 && self.members.is_empty() {
            return ErrorCode::None;
        }
        match self.members.get(member_id) {
            None => ErrorCode::UnknownMemberId,
            Some(m) if m.epoch != epoch => ErrorCode::StaleMemberEpoch,
            Some(_) => ErrorCode::None,
        }
    }

    /// OffsetCommit (v9+) by a member, as Kafka 4.4's `ConsumerGroup.validateOffsetCommit`: its
    /// current epoch commits anything; an older epoch commits only partitions it has held
    /// (owned, or yet to revoke) since that epoch or before, else the whole commit is
    /// STALE_MEMBER_EPOCH. So a commit sent just before a rebalance bumped the member's epoch
    /// still lands for the partitions it keeps. A newer epoch, or an unknown member, fails.
    pub fn validate_commit<'a>(
        &self,
        member_id: &str,
        epoch: i32,
        partitions: impl IntoIterator<Item = TopicPartitionRef<'a>>,
    ) -> ErrorCode {
        let code = self.validate_member(member_id, epoch);
        if code != ErrorCode::StaleMemberEpoch {
            return code;
        }
        let member = &self.members[member_id];
        if epoch > member.epoch {
            return code;
        }
        let held_since = |tp: TopicPartitionRef<'_>| {
            let id = self.subscribed.get(tp.topic).map(|(id, _)| id);
            id.and_then(|id| member.assignment_epoch(id, tp.partition))
                .is_some_and(|at| at <= epoch)
        };
        if partitions.into_iter().all(held_since) {
            ErrorCode::None
        } else {
            ErrorCode::StaleMemberEpoch
        }
    }

    /// ConsumerGroupDescribe's view.
    pub fn describe(&self) -> ConsumerGroupView {
        ConsumerGroupView {
            error_code: ErrorCode::None,
            error_message: None,
            state: self.state_name().to_string(),
            group_epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.assignor.name().to_string(),
            members: self
                .members
                .values()
                .map(|m| ConsumerMemberView {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.topic_names.clone(),
                    subscribed_topic_regex: m.regex.clone(),
                    assignment: to_wire(&m.assigned),
                    target_assignment: to_wire(
                        &self.target.get(&m.id).cloned().unwrap_or_default(),
                    ),
                })
                .collect(),
        }
    }

    /// Adds a member as a journal restores it (sessions start at [`Self::restart_sessions`]).
    pub fn restore_member(&mut self, member: ConsumerMember) {
        self.members.insert(member.id.clone(), member);
    }

    /// A member with its persisted fields (the journal's records), its session not started.
    #[allow(clippy::too_many_arguments)]
    pub fn restored_member(
        id: String,
        instance_id: Option<String>,
        rack_id: Option<String>,
        client_id: String,
        client_host: String,
        topic_names: Vec<String>,
        regex: Option<String>,
        server_assignor: Option<String>,
        rebalance_timeout_ms: i32,
    ) -> ConsumerMember {
        let mut m = ConsumerMember::new(
            &id,
            &ConsumerHeartbeatArgs {
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                ..Default::default()
            },
        );
        m.rack_id = rack_id;
        m.topic_names = topic_names;
        m.server_assignor = server_assignor;
        // A regex that compiled when written compiles now; one that does not is dropped.
        if m.set_regex(regex).is_err() {
            m.regex = None;
        }
        m
    }
}

/// Kafka's `throwIfMemberEpochIsInvalid`: the member's epoch, or its previous epoch when what it
/// says it owns is within what it was assigned (the answer that bumped it was lost).
fn epoch_is_valid(
    member: &ConsumerMember,
    received: i32,
    owned: Option<&TopicIdPartitions>,
) -> bool {
    if received == member.epoch {
        return true;
    }
    received == member.previous_epoch
        && received < member.epoch
        && owned.is_some_and(|o| {
            o.iter().all(|(t, ps)| {
                ps.iter().all(|p| {
                    member
                        .assigned
                        .get(t)
                        .is_some_and(|s| s.contains(&PartitionIndex(*p)))
                })
            })
        })
}

fn intersects(owned: &TopicIdPartitions, set: &Assignment) -> bool {
    owned.iter().any(|(t, ps)| {
        set.get(t)
            .is_some_and(|s| ps.iter().any(|p| s.contains(&PartitionIndex(*p))))
    })
}

fn intersection(a: &Assignment, b: &Assignment) -> Assignment {
    a.iter()
        .filter_map(|(t, ps)| {
            let other = b.get(t)?;
            let both: BTreeSet<PartitionIndex> = ps.intersection(other).copied().collect();
            (!both.is_empty()).then_some((*t, both))
        })
        .collect()
}

fn difference(a: &Assignment, b: &Assignment) -> Assignment {
    a.iter()
        .filter_map(|(t, ps)| {
            let rest: BTreeSet<PartitionIndex> = match b.get(t) {
                Some(other) => ps.difference(other).copied().collect(),
                None => ps.clone(),
            };
            (!rest.is_empty()).then_some((*t, rest))
        })
        .collect()
}

/// An assignment as the wire carries it.
pub fn to_wire(a: &Assignment) -> TopicIdPartitions {
    a.iter()
        .map(|(t, ps)| (*t, ps.iter().map(|p| p.0).collect()))
        .collect()
}

/// An assignment from the wire (duplicates fold).
pub fn from_wire(w: &TopicIdPartitions) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in w {
        if !ps.is_empty() {
            out.entry(*t)
                .or_default()
                .extend(ps.iter().copied().map(PartitionIndex));
        }
    }
    out
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
