//! One shard's group coordinator: the groups whose offsets partition this shard owns, each
//! driven by its [`Group`] state machine, committed offsets made durable through a [`Journal`].
//!
//! No `RefCell` borrow is held across an `.await`: the state machine answers through oneshots,
//! which are awaited after the borrow ends; a commit is validated, written to the journal, then
//! applied to the map (so OffsetFetch never returns what a crash could lose).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use rill_engine::io::Clock;
use rill_protocol::ErrorCode;
use rill_types::limits::Field;
use rill_types::{PartitionIndex, TimestampMs, TopicPartitionRef};

use super::consumer::ConsumerGroup;
use super::journal::Journal;
use super::metadata_record::GroupMetadata;
use super::offsets::{CommittedOffset, OffsetKey, OffsetRecord};
use super::ops::share::{ShareGroupView, ShareHeartbeatResult, ShareSessionResult};
use super::ops::{ConsumerGroupView, ConsumerHeartbeatArgs, ConsumerHeartbeatResult};
use super::ops::{GroupDescription, GroupListing, GroupOp, GroupReply, MemberRef, TopicPartitions};
use super::state::{Group, GroupState};
use super::GroupConfig;
use crate::admin::bound_hits::Bound;
use crate::admin::shard::hooks;

/// How often [`GroupCoordinator::tick`] should run (session-expiry granularity).
pub const TICK_MS: u64 = 100;

/// The groups of one shard.
pub struct GroupCoordinator<J: Journal> {
    groups: RefCell<HashMap<String, Group>>,
    /// KIP-848 consumer groups by id (their committed offsets live in `groups`, as a classic
    /// group's do: one offsets map per group id, whatever its protocol).
    consumer_groups: RefCell<HashMap<String, ConsumerGroup>>,
    /// KIP-932 share groups by id (`coordinator_share`).
    share_groups: RefCell<HashMap<String, super::share::ShareGroup>>,
    /// Groups' `share.auto.offset.reset` when set (not `latest`), whether or not the share
    /// group exists yet (IncrementalAlterConfigs may come first); bounded as groups are.
    share_resets: RefCell<HashMap<String, super::share::AutoOffsetReset>>,
    journal: J,
    clock: Rc<dyn Clock>,
    config: GroupConfig,
    /// When [`Self::tick`] last forgot the groups left with nothing.
    last_cleanup_ms: Cell<TimestampMs>,
}

impl<J: Journal> GroupCoordinator<J> {
    /// A coordinator over `journal`, with groups rebuilt from `live` committed offsets.
    pub fn new(
        journal: J,
        clock: Rc<dyn Clock>,
        config: GroupConfig,
        live: Vec<(OffsetKey, CommittedOffset)>,
    ) -> Self {
        let (live, share_starts) = super::share::durable::split(live);
        let mut groups = groups_of(live, config);
        for group in groups.values_mut() {
            group.set_writes_membership(journal.writes_membership());
        }
        let coordinator = GroupCoordinator {
            groups: RefCell::new(groups),
            consumer_groups: RefCell::new(HashMap::new()),
            share_groups: RefCell::new(HashMap::new()),
            share_resets: RefCell::new(HashMap::new()),
            journal,
            last_cleanup_ms: Cell::new(clock.now()),
            clock,
            config,
        };
        coordinator.restore_share(share_starts);
        coordinator
    }

    /// Replaces offsets partition `partition`'s groups with those rebuilt from `live` (this
    /// broker just became its coordinator, `crate::internal_topics::replicated`).
    /// `groups` are their written memberships, restored with sessions starting now.
    pub fn load_partition(
        &self,
        partition: PartitionIndex,
        live: Vec<(OffsetKey, CommittedOffset)>,
        groups: Vec<(String, GroupMetadata)>,
    ) {
        self.unload_partition(partition);
        let (live, share_starts) = super::share::durable::split(live);
        self.restore_share(share_starts);
        let mut loaded = groups_of(live, self.config);
        let now = self.now();
        for (id, record) in groups {
            let group = loaded.entry(id).or_insert_with_key(|id| self.new_group(id));
            group.restore(record, now);
        }
        for group in loaded.values_mut() {
            group.set_writes_membership(self.journal.writes_membership());
        }
        debug_assert!(loaded
            .keys()
            .all(|g| super::offsets_partition(g) == partition));
        self.groups.borrow_mut().extend(loaded);
    }

    /// Restores offsets partition `partition`'s KIP-848 consumer groups from their latest
    /// records (after [`Self::load_partition`]), sessions starting now.
    pub fn load_consumer_groups(
        &self,
        partition: PartitionIndex,
        records: Vec<super::consumer::records::RawRecord>,
    ) {
        let now = self.now();
        let mut consumer = self.consumer_groups.borrow_mut();
        for mut group in super::consumer::records::restore(records, self.config.consumer) {
            if super::offsets_partition(&group.id) != partition {
                continue;
            }
            group.restart_sessions(now);
            consumer.insert(group.id.clone(), group);
        }
    }

    /// Drops offsets partition `partition`'s groups (this broker no longer coordinates it):
    /// parked joins and syncs are answered NOT_COORDINATOR, so members look for the new one.
    pub fn unload_partition(&self, partition: PartitionIndex) {
        let mut groups = self.groups.borrow_mut();
        groups.retain(|id, group| {
            let stays = super::offsets_partition(id) != partition;
            if !stays {
                group.fail_waiters(ErrorCode::NotCoordinator);
            }
            stays
        });
        drop(groups);
        self.consumer_groups
            .borrow_mut()
            .retain(|id, _| super::offsets_partition(id) != partition);
        self.share_groups
            .borrow_mut()
            .retain(|id, _| super::offsets_partition(id) != partition);
    }

    /// The journal (shutdown closes it).
    pub fn journal(&self) -> &J {
        &self.journal
    }

    fn now(&self) -> TimestampMs {
        self.clock.now()
    }

    /// Run `op` on `group_id` (which this shard coordinates).
    pub async fn handle(&self, group_id: &str, op: GroupOp) -> GroupReply {
        crate::test_hooks::maybe_panic_in_group(group_id);
        // The limits table's row (an empty id: INVALID_GROUP_ID); List and Fetch take any.
        let any_id = matches!(op, GroupOp::Fetch(_) | GroupOp::CheckFetcher(..));
        if !any_id && !matches!(op, GroupOp::List) {
            if let Err(e) = Field::GroupId.check(group_id) {
                return refused(&op, e.code);
            }
            if group_id.starts_with(super::share::durable::STATE_PREFIX) {
                return refused(&op, ErrorCode::InvalidGroupId);
            }
        }
        if !matches!(op, GroupOp::List) {
            if let Err(code) = self.journal.ready(group_id) {
                return GroupReply::Unavailable(code);
            }
        }
        let now = self.now();
        match op {
            GroupOp::Join(args) => self.join(group_id, args, now).await,
            GroupOp::Sync(args) => self.sync(group_id, args, now).await,
            GroupOp::Heartbeat(who) => GroupReply::Heartbeat(
                self.with_group(group_id, false, |g| g.heartbeat(&who, now))
                    .unwrap_or(ErrorCode::UnknownMemberId),
            ),
            GroupOp::Leave(members) => self.leave(group_id, members, now).await,
            GroupOp::Commit(who, offsets) => self.commit(group_id, who, offsets, now).await,
            GroupOp::Fetch(topics) => self.fetch(group_id, topics),
            GroupOp::DeleteOffsets(topics) => self.delete_offsets(group_id, topics).await,
            GroupOp::Describe => GroupReply::Describe(self.describe(group_id)),
            GroupOp::Delete => GroupReply::Delete(self.delete_group(group_id).await),
            GroupOp::List => GroupReply::List(self.list()),
            GroupOp::TxnCommit {
                producer_id,
                member,
                offsets,
            } => {
                self.txn_commit(group_id, producer_id, member, offsets, now)
                    .await
            }
            GroupOp::TxnEnd {
                producer_id,
                commit,
            } => self.txn_end(group_id, producer_id, commit).await,
            GroupOp::PendingTxn(topics) => self.pending_txn(group_id, topics),
            GroupOp::ConsumerHeartbeat(args) => {
                let mut result = self.consumer_heartbeat(group_id, *args, now);
                if let Err(code) = self.write_consumer(group_id).await {
                    result = ConsumerHeartbeatResult::error(code, "the group could not be written");
                }
                GroupReply::ConsumerHeartbeat(result)
            }
            op => self.other_op(group_id, op, now).await,
        }
    }

    /// JoinGroup: the session timeout's bounds first, then the group (created if new).
    async fn join(
        &self,
        group_id: &str,
        args: super::ops::JoinArgs,
        now: TimestampMs,
    ) -> GroupReply {
        let bounds = self.config.session_timeout_ms_min..=self.config.session_timeout_ms_max;
        if !bounds.contains(&args.session_timeout_ms) {
            // Checked before the group is looked at, as Kafka's coordinator does.
            let code = ErrorCode::InvalidSessionTimeout;
            return GroupReply::Join(super::ops::JoinResult::error(code, &args.member_id));
        }
        if let Some(refused) = self.classic_join_refused(group_id, &args.member_id).await {
            return GroupReply::Join(refused);
        }
        if !self.may_create(group_id) {
            let refused = ErrorCode::GroupMaxSizeReached;
            return GroupReply::Join(super::ops::JoinResult::error(refused, ""));
        }
        let rx = self.with_group(group_id, true, |g| g.join(args, now));
        let result = rx
            .expect("created")
            .await
            .unwrap_or_else(|_| super::ops::JoinResult::error(ErrorCode::UnknownMemberId, ""));
        if result.error_code == ErrorCode::GroupMaxSizeReached {
            hooks::bound_hit(Bound::GroupMaxSize);
        }
        GroupReply::Join(result)
    }

    /// The KIP-848 consumer groups' and the share groups' operations.
    async fn other_op(&self, group_id: &str, op: GroupOp, now: TimestampMs) -> GroupReply {
        match op {
            GroupOp::ShareSession(_)
            | GroupOp::ShareAcquire(..)
            | GroupOp::ShareAlterOffsets(_)
            | GroupOp::ShareDeleteOffsets(_) => self.share_written(group_id, op, now.0).await,
            op => self.consumer_op(group_id, op),
        }
    }

    /// The KIP-848 consumer groups' operations.
    fn consumer_op(&self, group_id: &str, op: GroupOp) -> GroupReply {
        match op {
            GroupOp::ConsumerHeartbeat(_) => unreachable!("answered in handle"),
            GroupOp::ConsumerDescribe => {
                GroupReply::ConsumerDescribe(self.consumer_describe(group_id))
            }
            GroupOp::CheckFetcher(member_id, epoch) => {
                GroupReply::CheckFetcher(match self.consumer_groups.borrow().get(group_id) {
                    Some(g) => g.validate_member(&member_id, epoch),
                    None => ErrorCode::None,
                })
            }
            other => self.share_op(group_id, other, self.now().0),
        }
    }

    /// A classic JoinGroup against a consumer group: refused while it has members, as Kafka
    /// does without online migration (INCONSISTENT_GROUP_PROTOCOL, as for a share group); an empty consumer group
    /// becomes a classic one (its offsets stay; a cluster writes its records' tombstones, so
    /// that a new coordinator does not restore it).
    async fn classic_join_refused(
        &self,
        group_id: &str,
        member_id: &str,
    ) -> Option<super::ops::JoinResult> {
        if self.is_share_group(group_id) {
            let code = ErrorCode::InconsistentGroupProtocol;
            return Some(super::ops::JoinResult::error(code, member_id));
        }
        {
            let mut consumer = self.consumer_groups.borrow_mut();
            if consumer.get(group_id)?.has_members() {
                return Some(super::ops::JoinResult::error(
                    ErrorCode::InconsistentGroupProtocol,
                    member_id,
                ));
            }
            consumer.remove(group_id);
        }
        if self.journal.writes_membership() {
            let tombstones = super::consumer::records::encode_deleted(group_id);
            if let Err(code) = self.journal.append_consumer(group_id, tombstones).await {
                return Some(super::ops::JoinResult::error(code, member_id));
            }
        }
        None
    }

    /// ConsumerGroupHeartbeat: a classic group with members is not taken over (Kafka without
    /// online migration answers GROUP_ID_NOT_FOUND); an empty one becomes a consumer group.
    fn consumer_heartbeat(
        &self,
        group_id: &str,
        args: ConsumerHeartbeatArgs,
        now: TimestampMs,
    ) -> ConsumerHeartbeatResult {
        if self.is_share_group(group_id) {
            return ConsumerHeartbeatResult::error(
                ErrorCode::GroupIdNotFound,
                format!("Group {group_id} is not a consumer group."),
            );
        }
        let classic_in_use = self
            .groups
            .borrow()
            .get(group_id)
            .is_some_and(|g| g.has_members() || g.state() != GroupState::Empty);
        if classic_in_use {
            return ConsumerHeartbeatResult::error(
                ErrorCode::GroupIdNotFound,
                format!("Group {group_id} is not a consumer group."),
            );
        }
        let mut consumer = self.consumer_groups.borrow_mut();
        if !consumer.contains_key(group_id) {
            if args.member_epoch != 0 {
                // Kafka answers GROUP_ID_NOT_FOUND, which librdkafka takes as fatal; a group
                // unknown here may be one a single node forgot in a restart (it keeps no
                // membership), so its members are told to join again instead.
                return ConsumerHeartbeatResult::error(
                    ErrorCode::UnknownMemberId,
                    format!("Group {group_id} has no member {}.", args.member_id),
                );
            }
            let exists = self.groups.borrow().contains_key(group_id);
            if !exists && !self.may_create_with(consumer.len(), group_id) {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::GroupMaxSizeReached,
                    "rill.shard.groups.max reached",
                );
            }
            consumer.insert(
                group_id.to_string(),
                ConsumerGroup::new(group_id, self.config.consumer),
            );
        }
        let group = consumer.get_mut(group_id).expect("inserted");
        let result = group.heartbeat(args, now);
        if result.error_code == ErrorCode::GroupMaxSizeReached {
            hooks::bound_hit(Bound::GroupMaxSize);
        }
        result
    }

    /// Writes what changed in consumer group `group_id` (a journal that writes membership:
    /// a cluster's), before the heartbeat that changed it is answered.
    pub async fn write_consumer(&self, group_id: &str) -> Result<(), ErrorCode> {
        let records = {
            let mut consumer = self.consumer_groups.borrow_mut();
            let Some(group) = consumer.get_mut(group_id) else {
                return Ok(());
            };
            match group.take_write() {
                Some(removed) if self.journal.writes_membership() => {
                    super::consumer::records::encode(group, &removed)
                }
                _ => return Ok(()),
            }
        };
        self.journal.append_consumer(group_id, records).await
    }

    /// Consumer groups whose members a tick fenced (their records are to be written).
    pub fn fenced_consumer_groups(&self) -> Vec<String> {
        let now = self.now();
        let mut consumer = self.consumer_groups.borrow_mut();
        consumer
            .iter_mut()
            .filter_map(|(id, g)| g.tick(now).then(|| id.clone()))
            .collect()
    }

    /// ConsumerGroupDescribe of one group.
    fn consumer_describe(&self, group_id: &str) -> ConsumerGroupView {
        if let Some(g) = self.consumer_groups.borrow().get(group_id) {
            return g.describe();
        }
        let message = if self.groups.borrow().contains_key(group_id) {
            format!("Group {group_id} is not a consumer group.")
        } else {
            format!("Group {group_id} not found.")
        };
        ConsumerGroupView {
            error_code: ErrorCode::GroupIdNotFound,
            error_message: Some(message),
            ..Default::default()
        }
    }

    /// SyncGroup: the leader's sync that completes a rebalance is written (a cluster's
    /// coordinator) before any member gets its assignment.
    async fn sync(
        &self,
        group_id: &str,
        args: super::ops::SyncArgs,
        now: TimestampMs,
    ) -> GroupReply {
        let rx = self.with_group(group_id, false, |g| (g.sync(args, now), g.take_write()));
        let rx = match rx {
            Some((rx, Some(record))) => {
                let generation = record.generation;
                let written = self.journal.append_group(group_id, Some(record)).await;
                let now = self.now();
                self.with_group(group_id, false, |g| g.written(generation, written, now));
                Some(rx)
            }
            other => other.map(|(rx, _)| rx),
        };
        let result = match rx {
            Some(rx) => rx.await.ok(),
            None => None,
        };
        GroupReply::Sync(
            result.unwrap_or_else(|| super::ops::SyncResult::error(ErrorCode::UnknownMemberId)),
        )
    }

    /// LeaveGroup: a group its last member left is written Empty.
    async fn leave(
        &self,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
        now: TimestampMs,
    ) -> GroupReply {
        let left = self.with_group(group_id, false, |g| {
            (g.leave(&members, now), g.take_write())
        });
        let (errors, emptied) = left.map_or((None, None), |(e, w)| (Some(e), w));
        if let Some(record) = emptied {
            // Best effort: if lost, a new coordinator's restored members expire instead.
            let _ = self.journal.append_group(group_id, Some(record)).await;
        }
        let errors = errors.unwrap_or_else(|| vec![ErrorCode::UnknownMemberId; members.len()]);
        GroupReply::Leave(ErrorCode::None, errors)
    }

    /// Run `f` on the group (creating it if asked); `None` if it does not exist.
    pub(super) fn with_group<T>(
        &self,
        group_id: &str,
        create: bool,
        f: impl FnOnce(&mut Group) -> T,
    ) -> Option<T> {
        let mut groups = self.groups.borrow_mut();
        if create && !groups.contains_key(group_id) {
            groups.insert(group_id.to_string(), self.new_group(group_id));
        }
        groups.get_mut(group_id).map(f)
    }

    fn new_group(&self, group_id: &str) -> Group {
        let mut group = new_group(group_id, self.config);
        group.set_writes_membership(self.journal.writes_membership());
        group
    }

    /// Whether `group_id` exists or one more group fits `rill.shard.groups.max` (counted as a
    /// bite when it does not).
    pub(super) fn may_create(&self, group_id: &str) -> bool {
        let consumer = self.consumer_groups.borrow().len();
        self.may_create_with(consumer, group_id)
    }

    /// [`Self::may_create`] with the consumer groups' count given (their map may be borrowed).
    fn may_create_with(&self, consumer_groups: usize, group_id: &str) -> bool {
        let full = |groups: &HashMap<String, Group>| {
            !groups.contains_key(group_id)
                && groups.len() + consumer_groups >= self.config.shard_groups_max
        };
        if full(&self.groups.borrow()) {
            // Groups left with nothing wait for the cleanup; at the bound they make room now,
            // so that ids invented by a client never crowd out a real group.
            self.forget_disposable();
        }
        let groups = self.groups.borrow();
        if !full(&groups) {
            return true;
        }
        tracing::debug!(
            group = group_id,
            groups = groups.len(),
            "new group refused: rill.shard.groups.max reached"
        );
        hooks::bound_hit(Bound::ShardGroups);
        false
    }

    /// How a KIP-848 group takes a commit of `offsets` by `who` (`ConsumerGroup::validate_commit`);
    /// `None` if `group_id` is not a KIP-848 group.
    pub(super) fn validate_consumer_commit(
        &self,
        group_id: &str,
        who: &MemberRef,
        offsets: &[(String, i32, CommittedOffset)],
    ) -> Option<ErrorCode> {
        self.consumer_groups.borrow().get(group_id).map(|g| {
            let partitions = offsets
                .iter()
                .map(|(t, p, _)| TopicPartitionRef::new(t, PartitionIndex(*p)));
            g.validate_commit(&who.member_id, who.generation_id, partitions)
        })
    }

    async fn commit(
        &self,
        group_id: &str,
        who: MemberRef,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now: TimestampMs,
    ) -> GroupReply {
        // A commit outside any generation (manual assignment) may create the group.
        if let Some(code) = self.validate_consumer_commit(group_id, &who, &offsets) {
            if !code.is_ok() {
                return GroupReply::Commit(vec![code; offsets.len()]);
            }
            return self
                .write_offsets(group_id, offsets, now, |tp| {
                    OffsetKey::committed(group_id, tp)
                })
                .await;
        }
        let simple = who.generation_id < 0;
        if simple && !self.may_create(group_id) {
            return GroupReply::Commit(vec![ErrorCode::GroupMaxSizeReached; offsets.len()]);
        }
        let allowed = self
            .with_group(group_id, simple, |g| g.validate_commit(&who, now))
            .unwrap_or(Err(ErrorCode::IllegalGeneration));
        if let Err(code) = allowed {
            return GroupReply::Commit(vec![code; offsets.len()]);
        }
        self.write_offsets(group_id, offsets, now, |tp| {
            OffsetKey::committed(group_id, tp)
        })
        .await
    }

    /// Writes offsets under the keys `key` gives them, durable in the journal before they apply:
    /// the one loop behind OffsetCommit and TxnOffsetCommit (too-large metadata fails its entry).
    pub(super) async fn write_offsets(
        &self,
        group_id: &str,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now: TimestampMs,
        key: impl Fn(TopicPartitionRef<'_>) -> OffsetKey,
    ) -> GroupReply {
        let mut errors = Vec::with_capacity(offsets.len());
        let mut records = Vec::new();
        for (topic, partition, mut value) in offsets {
            let metadata = value.metadata.as_deref().unwrap_or("");
            if let Err(e) = Field::OffsetMetadata.check(metadata) {
                errors.push(e.code); // OFFSET_METADATA_TOO_LARGE
                continue;
            }
            errors.push(ErrorCode::None);
            value.commit_time_ms = now;
            records.push(OffsetRecord {
                key: key(TopicPartitionRef::new(&topic, PartitionIndex(partition))),
                value: Some(value),
            });
        }
        if let Err(code) = self.journal.append(group_id, records.clone()).await {
            return GroupReply::Commit(
                errors
                    .iter()
                    .map(|e| if e.is_ok() { code } else { *e })
                    .collect(),
            );
        }
        self.apply(group_id, records);
        GroupReply::Commit(errors)
    }

    /// Apply durable records to the in-memory groups.
    pub(super) fn apply(&self, group_id: &str, records: Vec<OffsetRecord>) {
        let mut groups = self.groups.borrow_mut();
        let group = groups
            .entry(group_id.to_string())
            .or_insert_with(|| self.new_group(group_id));
        for record in records {
            super::txn_offsets::apply_record(group, record);
        }
    }

    fn fetch(&self, group_id: &str, topics: Option<Vec<TopicPartitions>>) -> GroupReply {
        let groups = self.groups.borrow();
        let group = groups.get(group_id);
        let found =
            |t: &str, p: i32| group.and_then(|g| g.offsets.get(&(t.to_string(), p)).cloned());
        let out = match topics {
            Some(topics) => topics
                .into_iter()
                .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                .map(|(t, p)| {
                    let v = found(&t, p);
                    (t, p, v)
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|((t, p), v)| (t.clone(), *p, Some(v.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        };
        GroupReply::Fetch(ErrorCode::None, out)
    }

    async fn delete_offsets(&self, group_id: &str, topics: Vec<TopicPartitions>) -> GroupReply {
        let count: usize = topics.iter().map(|(_, ps)| ps.len()).sum();
        let subscribed = {
            let groups = self.groups.borrow();
            match groups.get(group_id) {
                None => {
                    return GroupReply::DeleteOffsets(
                        ErrorCode::GroupIdNotFound,
                        vec![ErrorCode::None; count],
                    )
                }
                Some(g) if g.state() == GroupState::Dead => {
                    return GroupReply::DeleteOffsets(
                        ErrorCode::GroupIdNotFound,
                        vec![ErrorCode::None; count],
                    )
                }
                Some(g) if !g.has_members() => Some(Vec::new()),
                Some(g) if g.protocol_type() != "consumer" => {
                    // Members of another protocol: Kafka refuses while the group is in use.
                    return GroupReply::DeleteOffsets(
                        ErrorCode::NonEmptyGroup,
                        vec![ErrorCode::None; count],
                    );
                }
                // `None`: subscriptions that cannot be read, which Kafka takes as every topic.
                Some(g) => g.subscribed_topics(),
            }
        };
        let mut errors = Vec::with_capacity(count);
        let mut records = Vec::new();
        for (topic, partitions) in topics {
            let in_use = subscribed.as_ref().is_none_or(|s| s.contains(&topic));
            for partition in partitions {
                if in_use {
                    errors.push(ErrorCode::GroupSubscribedToTopic);
                    continue;
                }
                errors.push(ErrorCode::None);
                records.push(OffsetRecord {
                    key: OffsetKey::committed(
                        group_id,
                        TopicPartitionRef::new(&topic, PartitionIndex(partition)),
                    ),
                    value: None,
                });
            }
        }
        if let Err(code) = self.journal.append(group_id, records.clone()).await {
            return GroupReply::DeleteOffsets(code, errors);
        }
        self.apply(group_id, records);
        GroupReply::DeleteOffsets(ErrorCode::None, errors)
    }

    fn describe(&self, group_id: &str) -> GroupDescription {
        if self.consumer_groups.borrow().contains_key(group_id) || self.is_share_group(group_id) {
            // Kafka's DescribeGroups answers only classic groups (KIP-1043).
            return GroupDescription {
                error_code: ErrorCode::GroupIdNotFound,
                state: GroupState::Dead.name().to_string(),
                ..Default::default()
            };
        }
        match self.groups.borrow().get(group_id) {
            Some(g) => g.describe(),
            None => GroupDescription {
                error_code: ErrorCode::None,
                state: GroupState::Dead.name().to_string(),
                ..Default::default()
            },
        }
    }

    async fn delete_group(&self, group_id: &str) -> ErrorCode {
        if let Some(code) = self.delete_share_group(group_id).await {
            return code;
        }
        let was_consumer = {
            let mut consumer = self.consumer_groups.borrow_mut();
            match consumer.get(group_id) {
                Some(g) if g.has_members() => return ErrorCode::NonEmptyGroup,
                Some(_) => consumer.remove(group_id).is_some(),
                None => false,
            }
        };
        if was_consumer && self.journal.writes_membership() {
            let tombstones = super::consumer::records::encode_deleted(group_id);
            if let Err(code) = self.journal.append_consumer(group_id, tombstones).await {
                return code;
            }
        }
        let records = {
            let groups = self.groups.borrow();
            let Some(group) = groups.get(group_id) else {
                return if was_consumer {
                    ErrorCode::None
                } else {
                    ErrorCode::GroupIdNotFound
                };
            };
            if group.state() == GroupState::Dead {
                return ErrorCode::GroupIdNotFound;
            }
            // Offsets pending in an open transaction keep the group too: its end writes them.
            let in_txn = !group.pending_txn.is_empty();
            if group.has_members() || group.state() != GroupState::Empty || in_txn {
                return ErrorCode::NonEmptyGroup;
            }
            group
                .offsets
                .keys()
                .map(|(topic, partition)| OffsetRecord {
                    key: OffsetKey::committed(
                        group_id,
                        TopicPartitionRef::new(topic, PartitionIndex(*partition)),
                    ),
                    value: None,
                })
                .collect::<Vec<_>>()
        };
        if let Err(code) = self.journal.append(group_id, records).await {
            return code;
        }
        if self.journal.writes_membership() {
            if let Err(code) = self.journal.append_group(group_id, None).await {
                return code;
            }
        }
        let mut groups = self.groups.borrow_mut();
        // A member may have joined while the tombstones were written: then keep the group.
        if groups.get(group_id).is_some_and(|g| !g.has_members()) {
            if let Some(mut g) = groups.remove(group_id) {
                g.mark_dead();
            }
        }
        ErrorCode::None
    }

    /// Every group on this shard.
    pub fn list(&self) -> Vec<GroupListing> {
        let mut out: Vec<GroupListing> = self
            .groups
            .borrow()
            .values()
            .filter(|g| !self.consumer_groups.borrow().contains_key(&g.id))
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type().to_string(),
                state: g.state().name().to_string(),
                group_type: "classic",
            })
            .collect();
        out.extend(
            self.consumer_groups
                .borrow()
                .values()
                .map(|g| GroupListing {
                    group_id: g.id.clone(),
                    protocol_type: "consumer".to_string(),
                    state: g.state_name().to_string(),
                    group_type: "consumer",
                }),
        );
        out.extend(self.share_listings());
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Every group on this shard with its state, members and committed offsets (the admin
    /// listener's metrics and status page).
    pub fn snapshot(&self) -> Vec<crate::admin::state::GroupSnapshot> {
        let groups = self.groups.borrow();
        let snapshot = |g: &Group| crate::admin::state::GroupSnapshot {
            group: g.id.clone(),
            state: g.state().name().to_string(),
            members: g.member_ids().len(),
            protocol_type: g.protocol_type().to_string(),
            committed: g
                .offsets
                .iter()
                .map(|(k, v)| (k.clone(), v.offset))
                .collect(),
        };
        groups.values().map(snapshot).collect()
    }

    /// Shutdown: answer every parked JoinGroup/SyncGroup now (COORDINATOR_NOT_AVAILABLE) so that
    /// connections drain at once instead of waiting out a rebalance timeout.
    pub fn release_waiters(&self) {
        for group in self.groups.borrow_mut().values_mut() {
            group.fail_waiters(ErrorCode::CoordinatorNotAvailable);
        }
    }

    /// Expire sessions and rebalance deadlines (call every [`TICK_MS`]). Returns the groups
    /// this left without members, each with its Empty record for [`Self::write_emptied`] (a
    /// cluster's coordinator writes it, as Kafka does, so that a new coordinator does not
    /// restore members whose sessions ended here).
    #[must_use = "the emptied groups' records are to be written"]
    pub fn tick(&self) -> Vec<(String, GroupMetadata)> {
        let now = self.now();
        let mut groups = self.groups.borrow_mut();
        let mut emptied = Vec::new();
        for (id, group) in groups.iter_mut() {
            group.tick(now);
            if let Some(record) = group.take_write() {
                emptied.push((id.clone(), record));
            }
        }
        drop(groups);
        if now - self.last_cleanup_ms.get() >= self.config.cleanup_interval_ms {
            self.last_cleanup_ms.set(now);
            self.forget_disposable();
        }
        emptied
    }

    /// Kafka's group cleanup (every `offsets.retention.check.interval.ms`): groups whose
    /// members all left and that hold no offsets are forgotten (their Empty record was written
    /// when they emptied); until then they stay, Empty and listed, as in Kafka.
    fn forget_disposable(&self) {
        let mut groups = self.groups.borrow_mut();
        groups.retain(|_, g| !g.is_disposable());
        let mut consumer = self.consumer_groups.borrow_mut();
        // An empty consumer group is kept while it has committed offsets (Kafka lists it Empty).
        consumer.retain(|id, g| g.has_members() || groups.contains_key(id));
    }

    /// Writes a group [`Self::tick`] emptied. Best effort, as LeaveGroup's: if lost, a new
    /// coordinator's restored members expire there instead. Run apart from the tick: an
    /// acks=all write may wait on the ISR, and the timers must not.
    pub async fn write_emptied(&self, group_id: &str, record: GroupMetadata) {
        if let Err(code) = self.journal.append_group(group_id, Some(record)).await {
            tracing::warn!(group = group_id, ?code, "writing the emptied group failed");
        }
    }
}

/// Groups rebuilt from live committed (and pending transactional) offsets.
fn groups_of(
    live: Vec<(OffsetKey, CommittedOffset)>,
    config: GroupConfig,
) -> HashMap<String, Group> {
    let mut groups: HashMap<String, Group> = HashMap::new();
    for (key, value) in live {
        let group = groups
            .entry(key.group.clone())
            .or_insert_with(|| new_group(&key.group, config));
        let record = OffsetRecord {
            key,
            value: Some(value),
        };
        super::txn_offsets::apply_record(group, record);
    }
    groups
}

/// A new, empty group with the configured delay and maximum size.
fn new_group(group_id: &str, config: GroupConfig) -> Group {
    let mut group = Group::new(group_id, config.initial_rebalance_delay_ms);
    group.set_max_size(config.max_size);
    group
}

/// `op` refused with `code` for its group id, in the reply shape `op` expects.
fn refused(op: &GroupOp, code: ErrorCode) -> GroupReply {
    match op {
        GroupOp::Join(args) => {
            GroupReply::Join(super::ops::JoinResult::error(code, &args.member_id))
        }
        GroupOp::Sync(_) => GroupReply::Sync(super::ops::SyncResult::error(code)),
        GroupOp::Heartbeat(_) => GroupReply::Heartbeat(code),
        GroupOp::Leave(m) => GroupReply::Leave(code, vec![code; m.len()]),
        GroupOp::Commit(_, o) => GroupReply::Commit(vec![code; o.len()]),
        GroupOp::DeleteOffsets(t) => {
            let n = t.iter().map(|(_, p)| p.len()).sum();
            GroupReply::DeleteOffsets(code, vec![ErrorCode::None; n])
        }
        GroupOp::Describe => GroupReply::Describe(GroupDescription {
            error_code: code,
            ..Default::default()
        }),
        GroupOp::Delete => GroupReply::Delete(code),
        GroupOp::TxnCommit { offsets, .. } => GroupReply::Commit(vec![code; offsets.len()]),
        GroupOp::TxnEnd { .. } => GroupReply::TxnEnd(code),
        GroupOp::PendingTxn(_) => GroupReply::PendingTxn(Vec::new()),
        GroupOp::ConsumerHeartbeat(_) => {
            GroupReply::ConsumerHeartbeat(ConsumerHeartbeatResult::error(code, "invalid group id"))
        }
        GroupOp::ConsumerDescribe => GroupReply::ConsumerDescribe(ConsumerGroupView {
            error_code: code,
            ..Default::default()
        }),
        GroupOp::ShareHeartbeat(_) => {
            GroupReply::ShareHeartbeat(ShareHeartbeatResult::error(code, "invalid group id"))
        }
        GroupOp::ShareDescribe => GroupReply::ShareDescribe(ShareGroupView {
            error_code: code,
            ..Default::default()
        }),
        GroupOp::ShareSession(_) => GroupReply::ShareSession(ShareSessionResult {
            error_code: code,
            ..Default::default()
        }),
        GroupOp::SharePlan(..) => GroupReply::SharePlan(code, Vec::new()),
        GroupOp::ShareAcquire(..) => GroupReply::ShareAcquire(Vec::new()),
        GroupOp::ShareSetReset(_) => GroupReply::ShareSetReset(code),
        GroupOp::ShareOffsets(_) => GroupReply::ShareOffsets(code, Vec::new()),
        GroupOp::ShareAlterOffsets(_) | GroupOp::ShareDeleteOffsets(_) => {
            GroupReply::ShareOffsetsChanged(code)
        }
        GroupOp::Fetch(_) | GroupOp::List | GroupOp::CheckFetcher(..) => {
            unreachable!("allowed with an empty id")
        }
    }
}

#[path = "coordinator_share.rs"]
mod share;

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
