//! A group's membership written to and restored from the offsets log (a cluster's coordinator,
//! `super::super::metadata_record`): a completed rebalance is answered once written; a new
//! coordinator restores the last written generation and members, their sessions restarting at
//! load time.

use bytes::Bytes;
use rill_protocol::ErrorCode;
use rill_types::TimestampMs;

use super::{answer, Group, GroupMetadata, GroupState, Member, SyncResult};
use crate::group::metadata_record::MemberMetadata;

impl Group {
    /// Write each completed rebalance ([`Group::take_write`]) before answering its SyncGroups.
    pub fn set_writes_membership(&mut self, on: bool) {
        self.writes_membership = on;
    }

    /// The record to write now: a completed rebalance's (then reported with [`Group::written`])
    /// or, once the last member left, the Empty group's.
    pub fn take_write(&mut self) -> Option<GroupMetadata> {
        self.to_write.take()
    }

    /// `generation`'s record was written (Ok: the group is Stable and its members get their
    /// assignments) or not (Err: they get the error and the group rebalances, as Kafka does).
    pub fn written(&mut self, generation: i32, result: Result<(), ErrorCode>, now_ms: TimestampMs) {
        if self.writing != Some(generation) || self.state != GroupState::CompletingRebalance {
            return; // A newer rebalance or a deletion took over.
        }
        self.writing = None;
        match result {
            Ok(()) => self.become_stable(),
            Err(code) => {
                for member in self.members.values_mut() {
                    member.assignment = Bytes::new();
                    if let Some(tx) = member.awaiting_sync.take() {
                        answer(tx, SyncResult::error(code));
                    }
                }
                self.prepare_rebalance(now_ms);
            }
        }
    }

    /// The record of the current generation, stamped `now_ms`.
    pub fn metadata(&self, now_ms: TimestampMs) -> GroupMetadata {
        let protocol = self.protocol_name.clone();
        let members = self.members.values().map(|m| MemberMetadata {
            member_id: m.id.clone(),
            group_instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            subscription: m.metadata_for(protocol.as_deref().unwrap_or("")),
            assignment: m.assignment.clone(),
        });
        GroupMetadata {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol_name: protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: now_ms,
            members: members.collect(),
        }
    }

    /// Installs a written record (a new coordinator loading): Stable with its generation and
    /// members (sessions start at `now_ms`), or Empty at its generation when it has none.
    pub fn restore(&mut self, record: GroupMetadata, now_ms: TimestampMs) {
        debug_assert!(self.members.is_empty(), "restored into a fresh group");
        self.generation = record.generation;
        self.protocol_type = (!record.protocol_type.is_empty()).then_some(record.protocol_type);
        self.deadline_ms = None;
        self.writing = None;
        self.to_write = None;
        if record.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.leader = None;
            return;
        }
        let protocol = record.protocol_name.clone().unwrap_or_default();
        for m in record.members {
            if let Some(instance) = &m.group_instance_id {
                self.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            let member = Member {
                id: m.member_id.clone(),
                instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols: vec![(protocol.clone(), m.subscription)],
                assignment: m.assignment,
                last_heartbeat_ms: now_ms,
                join_seq: self.next_join_seq,
                awaiting_join: None,
                awaiting_sync: None,
            };
            self.next_join_seq += 1;
            self.members.insert(m.member_id, member);
        }
        self.protocol_name = record.protocol_name;
        self.leader = record.leader;
        self.state = GroupState::Stable;
    }
}
