//! The share groups (KIP-932) of one shard's coordinator: their membership, share sessions and
//! share-partitions live beside the classic and consumer groups of the same ids' space (a group
//! id is one kind at a time). Each share-partition's start is written to the group's offsets
//! log before the request that moved it is answered (`share::durable`); the rest is kept in
//! memory.

use rill_protocol::ErrorCode;

use super::GroupCoordinator;
use crate::group::journal::Journal;
use crate::group::ops::share::ShareKey;
use crate::group::ops::share::{ShareGroupView, ShareHeartbeatArgs, ShareHeartbeatResult};
use crate::group::ops::{GroupListing, GroupOp, GroupReply};
use crate::group::share::{durable, AutoOffsetReset, ShareGroup};

impl<J: Journal> GroupCoordinator<J> {
    /// The share groups' operations.
    pub(super) fn share_op(&self, group_id: &str, op: GroupOp, now: i64) -> GroupReply {
        match op {
            GroupOp::ShareHeartbeat(args) => {
                GroupReply::ShareHeartbeat(self.share_heartbeat(group_id, *args, now))
            }
            GroupOp::ShareDescribe => GroupReply::ShareDescribe(self.share_describe(group_id)),
            GroupOp::ShareSession(args) => {
                let mut shares = self.share_groups.borrow_mut();
                GroupReply::ShareSession(match shares.get_mut(group_id) {
                    Some(g) => g.session(*args),
                    None => crate::group::ops::share::ShareSessionResult {
                        error_code: ErrorCode::GroupIdNotFound,
                        error_message: Some(format!("Group {group_id} is not a share group.")),
                        ..Default::default()
                    },
                })
            }
            GroupOp::SharePlan(member, keys) => {
                match self.share_groups.borrow_mut().get_mut(group_id) {
                    Some(g) => {
                        g.look(&member, &keys, now);
                        GroupReply::SharePlan(ErrorCode::None, g.plan(&keys))
                    }
                    None => GroupReply::SharePlan(ErrorCode::GroupIdNotFound, Vec::new()),
                }
            }
            GroupOp::ShareAcquire(member, max_records, parts) => {
                let mut shares = self.share_groups.borrow_mut();
                GroupReply::ShareAcquire(match shares.get_mut(group_id) {
                    Some(g) => g.acquire(&member, max_records, parts, now),
                    None => Vec::new(),
                })
            }
            GroupOp::ShareSetReset(reset) => {
                GroupReply::ShareSetReset(self.set_reset(group_id, reset))
            }
            GroupOp::ShareOffsets(keys) => self.share_offsets(group_id, keys),
            GroupOp::ShareAlterOffsets(starts) => {
                if let Err(code) = self.alter_creates(group_id) {
                    return GroupReply::ShareOffsetsChanged(code);
                }
                GroupReply::ShareOffsetsChanged(self.change_offsets(group_id, |g| {
                    for (key, offset) in starts {
                        g.set_start_offset(key, offset);
                    }
                }))
            }
            GroupOp::ShareDeleteOffsets(topics) => {
                GroupReply::ShareOffsetsChanged(self.change_offsets(group_id, |g| {
                    for topic in topics {
                        g.delete_topic_state(topic);
                    }
                }))
            }
            other => unreachable!("not a share group operation: {other:?}"),
        }
    }

    /// ShareGroupHeartbeat: a classic or consumer group of that id is not a share group
    /// (GROUP_ID_NOT_FOUND, as Kafka); the first join creates the group.
    fn share_heartbeat(
        &self,
        group_id: &str,
        args: ShareHeartbeatArgs,
        now: i64,
    ) -> ShareHeartbeatResult {
        let other_kind = self.consumer_groups.borrow().contains_key(group_id)
            || self.groups.borrow().contains_key(group_id);
        if other_kind {
            return ShareHeartbeatResult::error(
                ErrorCode::GroupIdNotFound,
                format!("Group {group_id} is not a share group."),
            );
        }
        let mut shares = self.share_groups.borrow_mut();
        if !shares.contains_key(group_id) {
            if args.member_epoch != 0 {
                // As for consumer groups (COMPATIBILITY C26): a group a restart forgot tells
                // its members to join again rather than GROUP_ID_NOT_FOUND.
                return ShareHeartbeatResult::error(
                    ErrorCode::UnknownMemberId,
                    format!("Group {group_id} has no member {}.", args.member_id),
                );
            }
            if let Err(code) = self.create_share_group(&mut shares, group_id) {
                return ShareHeartbeatResult::error(code, "rill.shard.groups.max reached");
            }
        }
        let result = shares
            .get_mut(group_id)
            .expect("inserted")
            .heartbeat(args, now);
        if result.error_code == ErrorCode::GroupMaxSizeReached {
            crate::admin::shard::hooks::bound_hit(crate::admin::bound_hits::Bound::GroupMaxSize);
        }
        result
    }

    /// DescribeShareGroupOffsets of one group: each share-partition's start (`None`: no state).
    fn share_offsets(&self, group_id: &str, keys: Option<Vec<ShareKey>>) -> GroupReply {
        match self.share_groups.borrow().get(group_id) {
            None if self.groups.borrow().contains_key(group_id)
                || self.consumer_groups.borrow().contains_key(group_id) =>
            {
                GroupReply::ShareOffsets(ErrorCode::GroupIdNotFound, Vec::new())
            }
            // No group of that id yet: Kafka describes the partitions asked, without starts.
            None => GroupReply::ShareOffsets(
                ErrorCode::None,
                keys.unwrap_or_default()
                    .into_iter()
                    .map(|k| (k, None))
                    .collect(),
            ),
            Some(g) => {
                let keys = keys.unwrap_or_else(|| g.partition_keys());
                let starts = keys.into_iter().map(|k| (k, g.start_offset(&k))).collect();
                GroupReply::ShareOffsets(ErrorCode::None, starts)
            }
        }
    }

    /// A new, empty share group `group_id` in `shares` (with its `share.auto.offset.reset`, if
    /// set before); GROUP_MAX_SIZE_REACHED past `rill.shard.groups.max`.
    fn create_share_group(
        &self,
        shares: &mut std::collections::HashMap<String, ShareGroup>,
        group_id: &str,
    ) -> Result<(), ErrorCode> {
        let others = self.groups.borrow().len() + self.consumer_groups.borrow().len();
        if others + shares.len() >= self.config.shard_groups_max {
            crate::admin::shard::hooks::bound_hit(crate::admin::bound_hits::Bound::ShardGroups);
            return Err(ErrorCode::GroupMaxSizeReached);
        }
        let mut group = ShareGroup::new(group_id, self.config.share);
        if let Some(reset) = self.share_resets.borrow().get(group_id) {
            group.auto_offset_reset = *reset;
        }
        shares.insert(group_id.to_string(), group);
        Ok(())
    }

    /// AlterShareGroupOffsets of an id no group has yet creates the (empty) share group, as
    /// Kafka does, so that an admin can seed its start offsets before its first consumer.
    fn alter_creates(&self, group_id: &str) -> Result<(), ErrorCode> {
        let other_kind = self.consumer_groups.borrow().contains_key(group_id)
            || self.groups.borrow().contains_key(group_id);
        let mut shares = self.share_groups.borrow_mut();
        if other_kind || shares.contains_key(group_id) {
            return Ok(());
        }
        self.create_share_group(&mut shares, group_id)
    }

    /// Sets a group's `share.auto.offset.reset` (`latest` is the default and is not kept).
    fn set_reset(&self, group_id: &str, reset: AutoOffsetReset) -> ErrorCode {
        if let Some(g) = self.share_groups.borrow_mut().get_mut(group_id) {
            g.auto_offset_reset = reset;
        }
        let mut resets = self.share_resets.borrow_mut();
        if reset == AutoOffsetReset::default() {
            resets.remove(group_id);
            return ErrorCode::None;
        }
        if !resets.contains_key(group_id) && resets.len() >= self.config.shard_groups_max {
            crate::admin::shard::hooks::bound_hit(crate::admin::bound_hits::Bound::ShardGroups);
            return ErrorCode::GroupMaxSizeReached;
        }
        resets.insert(group_id.to_string(), reset);
        ErrorCode::None
    }

    /// Runs `change` on an empty share group (NON_EMPTY_GROUP while it has members, as Kafka:
    /// a member's in-flight records would lose their meaning).
    fn change_offsets(&self, group_id: &str, change: impl FnOnce(&mut ShareGroup)) -> ErrorCode {
        match self.share_groups.borrow_mut().get_mut(group_id) {
            None => ErrorCode::GroupIdNotFound,
            Some(g) if g.has_members() => ErrorCode::NonEmptyGroup,
            Some(g) => {
                change(g);
                ErrorCode::None
            }
        }
    }

    /// ShareGroupDescribe of one group.
    fn share_describe(&self, group_id: &str) -> ShareGroupView {
        if let Some(g) = self.share_groups.borrow().get(group_id) {
            return g.describe();
        }
        let other_kind = self.consumer_groups.borrow().contains_key(group_id)
            || self.groups.borrow().contains_key(group_id);
        let message = if other_kind {
            format!("Group {group_id} is not a share group.")
        } else {
            format!("Group {group_id} not found.")
        };
        ShareGroupView {
            error_code: ErrorCode::GroupIdNotFound,
            error_message: Some(message),
            ..Default::default()
        }
    }

    /// Whether `group_id` is a share group here (other kinds' operations refuse it).
    pub(super) fn is_share_group(&self, group_id: &str) -> bool {
        self.share_groups.borrow().contains_key(group_id)
    }

    /// Fences share group members past their session and expires record locks.
    pub fn tick_share(&self) {
        let now = self.now().0;
        for g in self.share_groups.borrow_mut().values_mut() {
            g.tick(now);
        }
    }

    /// The share groups as ListGroups shows them.
    pub(super) fn share_listings(&self) -> Vec<GroupListing> {
        self.share_groups
            .borrow()
            .values()
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: "share".to_string(),
                state: g.state_name().to_string(),
                group_type: "share",
            })
            .collect()
    }

    /// DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; `None`: not one.
    /// Its written starts get tombstones first.
    pub(super) async fn delete_share_group(&self, group_id: &str) -> Option<ErrorCode> {
        let keys = {
            let shares = self.share_groups.borrow();
            let g = shares.get(group_id)?;
            if g.has_members() {
                return Some(ErrorCode::NonEmptyGroup);
            }
            g.persisted_keys()
        };
        let now = self.now().0;
        let tombstones: Vec<_> = keys
            .into_iter()
            .filter_map(|k| durable::record(group_id, k, None, now))
            .collect();
        if !tombstones.is_empty() {
            if let Err(code) = self.journal.append(group_id, tombstones).await {
                return Some(code);
            }
        }
        self.share_groups.borrow_mut().remove(group_id);
        Some(ErrorCode::None)
    }

    /// Share groups' starts replayed from the log: each group is restored without members.
    pub(super) fn restore_share(&self, starts: durable::Starts) {
        let mut shares = self.share_groups.borrow_mut();
        for (group_id, key, state) in starts {
            shares
                .entry(group_id.clone())
                .or_insert_with(|| ShareGroup::new(&group_id, self.config.share))
                .restore(key, state);
        }
    }

    /// A share operation that may move share-partition starts (acknowledgements, acquisitions,
    /// AlterShareGroupOffsets, DeleteShareGroupOffsets): the moved starts are written before it
    /// is answered; if that fails, its acknowledgements are answered with the error (the
    /// starts are written again with the next change).
    pub(super) async fn share_written(&self, group_id: &str, op: GroupOp, now: i64) -> GroupReply {
        let mut reply = self.share_op(group_id, op, now);
        let moved = match self.share_groups.borrow_mut().get_mut(group_id) {
            Some(g) => g.take_moved(),
            None => return reply,
        };
        let wall = self.now().0;
        let records: Vec<_> = moved
            .iter()
            .filter_map(|(k, state)| durable::record(group_id, *k, state.as_ref(), wall))
            .collect();
        if records.is_empty() {
            return reply;
        }
        if let Err(code) = self.journal.append(group_id, records).await {
            tracing::warn!(
                group = group_id,
                ?code,
                "writing share-partition starts failed"
            );
            let keys: Vec<ShareKey> = moved.iter().map(|(k, _)| *k).collect();
            if let Some(g) = self.share_groups.borrow_mut().get_mut(group_id) {
                g.unmark(&keys);
            }
            match &mut reply {
                GroupReply::ShareSession(r) => {
                    for (_, outcome) in r.acks.iter_mut().filter(|(_, o)| o.is_ok()) {
                        *outcome = code;
                    }
                }
                GroupReply::ShareOffsetsChanged(c) => *c = code,
                _ => {}
            }
        }
        reply
    }
}
