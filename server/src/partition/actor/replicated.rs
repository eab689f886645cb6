//! The partition actor's part in replication (`crate::replication`): following the role the
//! metadata image gives, serving followers' fetches and moving the high watermark on a leader,
//! appending and truncating on a follower, and answering acks=all once the ISR holds a batch.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use crate::channel::local::oneshot;
use bytes::BytesMut;
use rill_metadata::image::MetadataImage;
use rill_metadata::request::{AlterPartition, ControllerRequest};
use rill_metadata::types::NodeId;
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;
use rill_types::{DurationMs, LeaderEpoch, Offset, TimestampMs};

use super::{Actor, ActorMsg};
use crate::partition::ops::{PartitionOp, PartitionReply};
use crate::replication::follower::{fetch_position, LogPosition};
use crate::replication::leader::LeaderState;
use crate::replication::role::{role_of, Role};
use rill_engine::io::Storage;
use rill_engine::{FlushPolicy, PartitionLog};
use uuid::Uuid;

/// An acks=all append (or marker) answered once durable here, and on a replicated leader
/// once the ISR holds it: where its answer goes, the answer, and how long it may wait for the
/// ISR before REQUEST_TIMED_OUT (the Produce request's `timeout_ms`, as Kafka's purgatory).
pub(super) type DurableWaiter = (oneshot::Sender<PartitionReply>, PartitionReply, Duration);
/// Maintenance tick of a replicated partition (ISR checks, acks=all timeouts).
pub(super) const REPLICATED_TICK_MS: u64 = 100;

/// This partition's part in replication.
pub(super) enum Replication {
    /// Not replicated (one replica, or no cluster).
    Off,
    /// Leading: followers' progress and the acks=all produces waiting for the ISR.
    Leader {
        state: LeaderState,
        pending: Vec<PendingAck>,
        /// Set while an AlterPartition is in flight (cleared by its answer).
        altering: Rc<Cell<bool>>,
    },
    /// Following `leader` at `epoch`; the shard's fetcher for that leader pulls for it until
    /// `stop` is set.
    Follower {
        epoch: LeaderEpoch,
        leader: NodeId,
        stop: Rc<Cell<bool>>,
    },
    /// A replica waiting for a leader.
    Idle,
    /// Just opened in a cluster: no role taken from the image yet.
    Opened,
}

/// The high watermark a replicated log last wrote to its checkpoint file (Kafka's
/// `replication-offset-checkpoint`, here one small file per partition), and when.
#[derive(Default)]
pub(super) struct HwCheckpoint {
    written: Option<Offset>,
    at_ms: TimestampMs,
}

/// The newest leader epoch this replica took a role at, with its topic's id. Epochs never go
/// back within a topic: the controller only ever moves a partition's epoch up, and the image
/// never goes back. A topic deleted and created again under the same name starts again at 0,
/// which its new id tells apart (the old actor may see the new topic before it is deleted).
#[derive(Default)]
pub(super) struct EpochFloor(Option<(Uuid, LeaderEpoch)>);

impl EpochFloor {
    /// A role at `epoch` of the topic `topic_id`; a lower epoch of the same topic would mean
    /// following a deposed leader (or leading after one was elected): data would diverge.
    pub(super) fn note(&mut self, topic_id: Uuid, epoch: LeaderEpoch) {
        if let Some((id, floor)) = self.0 {
            assert!(
                id != topic_id || epoch >= floor,
                "leader epochs a replica follows never go back: {} after {}",
                epoch.0,
                floor.0
            );
        }
        self.0 = Some((topic_id, epoch));
    }
}

/// An acks=all produce (or marker) appended and durable here, waiting for the high watermark.
pub(super) struct PendingAck {
    /// The high watermark that answers it (the log end after its group).
    end: Offset,
    deadline_ms: TimestampMs,
    reply: oneshot::Sender<PartitionReply>,
    answer: PartitionReply,
}

impl<S: Storage + 'static> Actor<S> {
    fn node_id(&self) -> Option<NodeId> {
        self.setup.cluster.as_ref().map(|c| c.node_id())
    }

    /// Whether this replica leads a replicated partition.
    pub(super) fn leads_replicated(&self) -> bool {
        matches!(self.replication, Replication::Leader { .. })
    }

    /// Appends and markers are refused unless this replica leads (or the partition is not
    /// replicated); acks=all also needs `min.insync.replicas` in the ISR. A one-replica
    /// partition of a cluster has an ISR of one, so acks=all there needs `min.insync.replicas`
    /// of at most 1, as in Kafka (a single node's produce handler checks this with a message).
    pub(super) fn check_leader_append(&self, acks_all: bool) -> Result<(), ErrorCode> {
        match &self.replication {
            Replication::Off => {
                let in_cluster = self.setup.cluster.is_some();
                if acks_all && in_cluster && self.setup.min_insync_replicas > 1 {
                    return Err(ErrorCode::NotEnoughReplicas);
                }
                Ok(())
            }
            Replication::Leader { state, .. } => {
                let min_isr = self.setup.min_insync_replicas.max(1) as usize;
                if acks_all && state.role.isr.len() < min_isr {
                    return Err(ErrorCode::NotEnoughReplicas);
                }
                Ok(())
            }
            Replication::Follower { .. } | Replication::Idle | Replication::Opened => {
                Err(ErrorCode::NotLeaderOrFollower)
            }
        }
    }

    /// Follows the role the metadata image gives this replica now.
    pub(super) async fn sync_role(&mut self) {
        let Some(view) = self.setup.cluster.clone() else {
            return;
        };
        let image = view.image();
        let role = role_of(&image, view.node_id(), self.setup.tp.borrowed());
        match (&mut self.replication, &role) {
            (Replication::Off, Role::Unreplicated) | (Replication::Idle, Role::Idle) => {}
            (Replication::Opened, Role::Unreplicated) => self.replication = Replication::Off,
            (
                Replication::Leader {
                    state, altering, ..
                },
                Role::Leader(now),
            ) if state.role.epoch == now.epoch => {
                if state.role != *now {
                    state.role = now.clone();
                    altering.set(false);
                    self.advance_high_watermark();
                    self.publish();
                }
            }
            (
                Replication::Follower { epoch, leader, .. },
                Role::Follower {
                    epoch: e,
                    leader: l,
                },
            ) if epoch == e && leader == l => {}
            // Every change of epoch comes here: only here is the epoch checked (not per message).
            _ => {
                self.note_epoch(&image, &role);
                self.become_role(role).await;
            }
        }
    }

    /// Asserts the epoch of `role` (from `image`) is not older than the last one taken.
    fn note_epoch(&mut self, image: &MetadataImage, role: &Role) {
        let epoch = match role {
            Role::Leader(leader) => leader.epoch,
            Role::Follower { epoch, .. } => *epoch,
            Role::Unreplicated | Role::Idle => return,
        };
        if let Some(topic) = image.topics.get(&*self.setup.tp.topic) {
            self.epoch_floor.note(topic.id, epoch);
        }
    }

    async fn become_role(&mut self, role: Role) {
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        tracing::info!(topic, partition, ?role, "replica role");
        let old = std::mem::replace(&mut self.replication, Replication::Idle);
        let was_unreplicated = matches!(old, Replication::Off);
        match old {
            Replication::Leader { pending, .. } => {
                for ack in pending {
                    let _ = ack
                        .reply
                        .send(PartitionReply::Error(ErrorCode::NotLeaderOrFollower));
                }
            }
            Replication::Follower { stop, .. } => stop.set(true),
            Replication::Off | Replication::Idle | Replication::Opened => {}
        }
        // A log opened now exposes what its checkpoint says was replicated before the
        // restart (a crash may have cut below it: no further than its recovered end), and
        // nothing more until replication says so; without a checkpoint, nothing. One that
        // served as the only replica until now (a reassignment adds replicas) holds exactly
        // what was acknowledged: its high watermark stands.
        let hw = if self.log().is_replicated() || was_unreplicated {
            self.log().high_watermark()
        } else {
            self.checkpointed_high_watermark().await
        };
        assert!(
            hw <= self.log().log_end_offset(),
            "a replica taking a role exposes at most its own log"
        );
        let now = self.setup.clock.now();
        self.replication = match role {
            Role::Unreplicated => {
                self.replication = Replication::Off;
                if self.log().is_replicated() && !self.reopen_unreplicated().await {
                    return;
                }
                Replication::Off
            }
            Role::Leader(role) => {
                self.log().lead(role.epoch, hw);
                Replication::Leader {
                    state: LeaderState::new(role, now),
                    pending: Vec::new(),
                    altering: Rc::new(Cell::new(false)),
                }
            }
            Role::Follower { epoch, leader } => {
                self.log().follow(hw);
                self.start_following(epoch, leader)
            }
            Role::Idle => {
                if !self.log().is_replicated() {
                    self.log().follow(hw);
                }
                Replication::Idle
            }
        };
        self.advance_high_watermark();
        self.publish();
    }

    /// The high watermark this log's checkpoint holds, within its log; its log start
    /// without one (or if it cannot be read).
    async fn checkpointed_high_watermark(&mut self) -> Offset {
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        let log = self.log();
        let start = log.log_start_offset();
        match log.checkpointed_high_watermark().await {
            Ok(Some(hw)) => {
                tracing::info!(
                    topic,
                    partition,
                    high_watermark = hw.0,
                    "high watermark from its checkpoint"
                );
                hw
            }
            Ok(None) => start,
            Err(e) => {
                tracing::warn!(topic, partition, error = %e, "reading the high watermark checkpoint failed");
                start
            }
        }
    }

    /// Writes a replicated log's high watermark to its checkpoint file if it moved since the
    /// last one, at most every `replica.high.watermark.checkpoint.interval.ms` unless `now`
    /// (a clean close): a restart then resumes from it instead of exposing nothing.
    pub(super) async fn checkpoint_high_watermark(&mut self, now: bool) {
        let Some(view) = self.setup.cluster.clone() else {
            return;
        };
        let at_ms = self.setup.clock.now();
        let due = now
            || at_ms - self.hw_checkpoint.at_ms
                >= DurationMs(view.config().hw_checkpoint_interval_ms as i64);
        let (hw, replicated) = (self.log().high_watermark(), self.log().is_replicated());
        if !due || !replicated || self.hw_checkpoint.written == Some(hw) {
            return;
        }
        let written = self.log().checkpoint_high_watermark().await;
        self.hw_checkpoint.at_ms = at_ms;
        match written {
            Ok(()) => self.hw_checkpoint.written = Some(hw),
            Err(e) => {
                let (topic, partition) = (&self.setup.tp.topic, self.setup.tp.partition.0);
                tracing::warn!(topic, partition, error = %e, "writing the high watermark checkpoint failed");
            }
        }
    }

    /// A follower of `leader` at `epoch`: it joins the shard's fetcher for that leader.
    fn start_following(&self, epoch: LeaderEpoch, leader: NodeId) -> Replication {
        let stop = Rc::new(Cell::new(false));
        let fetcher = crate::replication::fetcher::FetcherSetup {
            view: self
                .setup
                .cluster
                .clone()
                .expect("a follower is in a cluster"),
            mailbox: self.setup.mailbox.clone().expect("the actor's own mailbox"),
            tp: self.setup.tp.clone(),
            epoch,
            leader,
            stop: stop.clone(),
        };
        crate::replication::fetcher::follow(fetcher);
        Replication::Follower {
            epoch,
            leader,
            stop,
        }
    }

    /// Down to this one replica (a reassignment): what it holds is all there is, so its high
    /// watermark follows its own log again, as a fresh open's does. Reopens the log; `false`
    /// if that failed (the log is gone: the actor stops).
    async fn reopen_unreplicated(&mut self) -> bool {
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        self.cancel_clean().await;
        let log = self.log.take().expect("log is open while the actor serves");
        if let Err(e) = log.close().await {
            tracing::warn!(topic, partition, error = %e, "closing to reopen as the only replica");
        }
        match self.open_again(Offset(0)).await {
            Ok(log) => self.log = Some(log),
            Err(e) => {
                tracing::error!(topic, partition, error = %e, "reopening as the only replica failed");
                return false;
            }
        }
        self.publish_files();
        true
    }

    /// A log opened again (`Actor::open_again`) takes this replica's part again: stamping as
    /// leader, copying as follower, exposing at most `high_watermark`.
    pub(super) fn resume_role(&self, log: &mut PartitionLog<S>, high_watermark: Offset) {
        match &self.replication {
            Replication::Leader { state, .. } => log.lead(state.role.epoch, high_watermark),
            Replication::Follower { .. } | Replication::Idle => log.follow(high_watermark),
            Replication::Off | Replication::Opened => {}
        }
    }

    /// On a leader: the high watermark from the ISR's log ends (it never moves back), then the
    /// acks=all produces it answers, and those that waited too long.
    pub(super) fn advance_high_watermark(&mut self) {
        let me = self.node_id();
        let every_append = self.setup.config.flush == FlushPolicy::EveryAppend;
        let min_isr = self.setup.min_insync_replicas.max(1) as usize;
        let now = self.setup.clock.now();
        let Replication::Leader { state, pending, .. } = &mut self.replication else {
            return;
        };
        let log = self
            .log
            .as_mut()
            .expect("log is open while the actor serves");
        let own_end = if every_append {
            log.durable_offset()
        } else {
            log.log_end_offset()
        };
        let me = me.expect("a leader is in a cluster");
        let before = log.high_watermark();
        let hw = state.high_watermark(me, own_end, log.log_start_offset());
        if hw > before {
            log.set_high_watermark(hw);
        }
        let hw = log.high_watermark();
        // A follower that reports less than before (it restarted and lost what it had not
        // flushed) lowers the ISR's least end, not what consumers were shown.
        assert!(hw >= before, "a leader's high watermark never moves back");
        assert!(
            log.log_start_offset() <= hw && hw <= log.log_end_offset(),
            "log start <= high watermark <= log end"
        );
        let enough = state.role.isr.len() >= min_isr;
        pending.retain_mut(|ack| {
            let answer = if ack.end <= hw {
                if enough {
                    std::mem::replace(&mut ack.answer, PartitionReply::Waited)
                } else {
                    PartitionReply::Error(ErrorCode::NotEnoughReplicasAfterAppend)
                }
            } else if now >= ack.deadline_ms {
                PartitionReply::Error(ErrorCode::RequestTimedOut)
            } else {
                return true;
            };
            let (reply, _) = oneshot::channel();
            let reply = std::mem::replace(&mut ack.reply, reply);
            let _ = reply.send(answer);
            false
        });
    }

    /// acks=all answers after the group's flush: on a replicated leader they wait for the
    /// high watermark to pass the group's end; elsewhere they go out now.
    pub(super) fn answer_durable(&mut self, waiters: Vec<DurableWaiter>) {
        let Replication::Leader { pending, .. } = &mut self.replication else {
            for (reply, answer, _) in waiters {
                let _ = reply.send(answer);
            }
            return;
        };
        let (end, durable) = self.log.as_ref().map_or((Offset(0), Offset(0)), |l| {
            (l.log_end_offset(), l.durable_offset())
        });
        let now_ms = self.setup.clock.now();
        for (reply, answer, timeout) in waiters {
            if matches!(answer, PartitionReply::Error(_)) {
                let _ = reply.send(answer);
                continue;
            }
            // The group's flush succeeded (a failed one turned every answer into an error).
            assert!(
                end <= durable,
                "an acks=all produce waits for the ISR only once durable here"
            );
            // Kept in offset order, the high watermark answers a prefix of them: in order.
            assert!(
                pending.last().is_none_or(|last| last.end <= end),
                "acks=all waiters are answered in offset order"
            );
            let timeout = DurationMs(timeout.as_millis().try_into().unwrap_or(i64::MAX));
            let deadline_ms = now_ms.saturating_add(timeout);
            pending.push(PendingAck {
                end,
                deadline_ms,
                reply,
                answer,
            });
        }
        self.advance_high_watermark();
    }

    /// On a leader: asks the controller for the ISR the followers' progress calls for (one
    /// request at a time).
    pub(super) fn maybe_alter_isr(&mut self) {
        let Some(view) = self.setup.cluster.clone() else {
            return;
        };
        let now = self.setup.clock.now();
        let lag_ms = DurationMs(self.setup.replica_lag_time_max_ms as i64);
        let hw = self.log.as_ref().map_or(Offset(0), |l| l.high_watermark());
        let Replication::Leader {
            state, altering, ..
        } = &mut self.replication
        else {
            return;
        };
        if altering.get() {
            return;
        }
        let me = view.node_id();
        let image = view.image();
        let live = |n: NodeId| image.live_broker(n).is_some();
        let Some(new_isr) = state.wanted_isr(me, now, lag_ms, hw, live) else {
            return;
        };
        let Some(broker_epoch) = image.live_broker(me).map(|b| b.epoch) else {
            return;
        };
        let Ok(partition) = u32::try_from(self.setup.tp.partition.0) else {
            return;
        };
        let request = ControllerRequest::AlterPartition(AlterPartition {
            node_id: me,
            broker_epoch,
            topic_id: state.role.topic_id,
            partition,
            leader_epoch: state.role.epoch,
            partition_epoch: state.role.partition_epoch,
            new_isr: new_isr.clone(),
        });
        altering.set(true);
        let altering = altering.clone();
        let topic = self.setup.tp.topic.clone();
        tracing::info!(topic, partition, from = ?state.role.isr, to = ?new_isr, "asking for an ISR change");
        glommio::spawn_local(async move {
            let answer = view.request(request, glommio::timer::sleep).await;
            tracing::info!(topic, partition, ?answer, "ISR change answered");
            // The image brings the new ISR; a refusal is retried on a later tick.
            glommio::timer::sleep(std::time::Duration::from_millis(200)).await;
            altering.set(false);
        })
        .detach();
    }

    /// A follower's fetch, on the leader.
    pub(super) async fn replica_fetch(
        &mut self,
        node: NodeId,
        from: Offset,
        max_bytes: usize,
        current_leader_epoch: LeaderEpoch,
        last_fetched_epoch: Option<LeaderEpoch>,
    ) -> PartitionReply {
        let now = self.setup.clock.now();
        let Replication::Leader { state, .. } = &mut self.replication else {
            return PartitionReply::Error(ErrorCode::NotLeaderOrFollower);
        };
        let epoch = state.role.epoch;
        if current_leader_epoch.0 >= 0 && current_leader_epoch > epoch {
            return PartitionReply::Error(ErrorCode::UnknownLeaderEpoch);
        }
        if current_leader_epoch.0 >= 0 && current_leader_epoch < epoch {
            return PartitionReply::Error(ErrorCode::FencedLeaderEpoch);
        }
        if !state.role.replicas.contains(&node) {
            return PartitionReply::Error(ErrorCode::NotLeaderOrFollower);
        }
        let log = self
            .log
            .as_mut()
            .expect("log is open while the actor serves");
        let log_end = log.log_end_offset();
        // KIP-320: the follower's last epoch must end here where its log does.
        let diverging = match last_fetched_epoch {
            Some(last) => match log.end_offset_for_epoch(last) {
                Some((found, end)) if found != last || end < from => Some((found, end)),
                Some(_) => None,
                None => Some((LeaderEpoch(-1), log.log_start_offset())),
            },
            None if from > log_end => {
                Some((log.latest_epoch().unwrap_or(LeaderEpoch(-1)), log_end))
            }
            None => None,
        };
        // Below the log start (DeleteRecords or retention passed the follower's end) or past
        // the end: Kafka's OFFSET_OUT_OF_RANGE, with the positions a follower resets to.
        if diverging.is_none() && (from > log_end || from < log.log_start_offset()) {
            return PartitionReply::ReplicaOutOfRange(log.positions());
        }
        if let Some(diverging) = diverging {
            debug_assert!(
                diverging.1 <= log_end,
                "a diverging epoch ends within the leader's log"
            );
            return PartitionReply::ReplicaRead {
                positions: log.positions(),
                chunks: Vec::new(),
                diverging: Some(diverging),
            };
        }
        assert!(
            log.log_start_offset() <= from && from <= log_end,
            "a follower's fetch offset is within the leader's log (the rest was refused above)"
        );
        state.on_fetch(node, from, log_end, now);
        // 0 bytes: the follower's position only (a Fetch whose response limit is spent).
        let chunks = if from < log_end && max_bytes > 0 {
            match log.read_for_replica(from, max_bytes).await {
                Ok(read) => read.chunks,
                Err(e) => return PartitionReply::Error(e.kafka_error_code()),
            }
        } else {
            Vec::new()
        };
        self.advance_high_watermark();
        self.maybe_alter_isr();
        self.publish();
        PartitionReply::ReplicaRead {
            positions: self.positions(),
            chunks,
            diverging: None,
        }
    }

    fn follows_at(&self, epoch: LeaderEpoch) -> bool {
        matches!(self.replication, Replication::Follower { epoch: e, .. } if e == epoch)
    }

    /// On a follower: the leader's batches, appended at their offsets, flushed as the topic's
    /// policy says (before the next fetch reports the new log end), and the leader's high
    /// watermark. A batch refused part-way still has the ones before it flushed first: the next
    /// fetch reports them, and the leader counts what a follower reports as held (acks=all).
    pub(super) async fn replica_append(
        &mut self,
        epoch: LeaderEpoch,
        records: bytes::Bytes,
        leader_high_watermark: Offset,
    ) -> PartitionReply {
        if !self.follows_at(epoch) {
            return PartitionReply::Error(ErrorCode::FencedLeaderEpoch);
        }
        let now = self.setup.clock.now();
        let mut appended = false;
        let mut refused = None;
        for view in rill_protocol::record::batches(records) {
            let Ok(view) = view else {
                break; // a partial batch at the end (never sent by rill leaders)
            };
            if self.starts_inside(view.base_offset(), view.last_offset()) {
                // An empty log reset to a leader's log start inside a batch (DeleteRecords
                // moves it there): the log starts at the batch instead, as Kafka's follower
                // does; the log start follows the leader's again after this append.
                let why = "the leader's log start is inside its first batch: starting at the batch";
                if let Err(reply) = self.reset_log(view.base_offset(), why).await {
                    refused = Some(reply);
                    break;
                }
            }
            let batch = match ValidatedBatch::from_leader(BytesMut::from(view.as_bytes())) {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(topic = self.setup.tp.topic, error = %e, "a leader sent an invalid batch");
                    refused = Some(PartitionReply::Error(ErrorCode::CorruptMessage));
                    break;
                }
            };
            let end = self.log().log_end_offset();
            let info = match self.log().append_replica(batch, now).await {
                Ok(info) => info,
                Err(e) => {
                    tracing::warn!(topic = self.setup.tp.topic, partition = self.setup.tp.partition.0, error = %e, "replica append refused");
                    refused = Some(PartitionReply::Error(e.kafka_error_code()));
                    break;
                }
            };
            // Below the log end the engine refuses it; past it is a compaction's gap.
            assert!(
                info.base_offset == view.base_offset()
                    && info.base_offset >= end
                    && self.log().log_end_offset() == info.last_offset.plus(1),
                "a follower copies a batch at the leader's offsets, at or past its log end"
            );
            appended = true;
        }
        if appended
            && !self.log().is_failed()
            && (self.setup.config.flush == FlushPolicy::EveryAppend || self.log().flush_due(now))
        {
            if let Err(e) = self.timed_flush().await {
                return PartitionReply::Error(e.kafka_error_code());
            }
        }
        if let Some(reply) = refused {
            return reply;
        }
        let hw = leader_high_watermark.min(self.log().log_end_offset());
        if hw > self.log().high_watermark() {
            self.log().set_high_watermark(hw);
        }
        self.publish();
        PartitionReply::ReplicaAppended
    }

    /// On a follower: the leader's log start moved (DeleteRecords): move this one too, as far
    /// as this replica's high watermark (the rest on a later fetch).
    async fn follow_log_start(&mut self, leader_log_start: Offset) {
        let start = leader_log_start.min(self.log().high_watermark());
        if start <= self.log().log_start_offset() {
            return;
        }
        let moved = self.move_log_start(start, "log start follows the leader's");
        if let Err(e) = moved.await {
            let (topic, partition) = (&self.setup.tp.topic, self.setup.tp.partition.0);
            tracing::warn!(topic, partition, error = %e, "moving the log start failed");
        }
    }

    /// Whether this log is empty and ends inside the batch `base..=last`.
    fn starts_inside(&mut self, base: Offset, last: Offset) -> bool {
        let log = self.log();
        let end = log.log_end_offset();
        end == log.log_start_offset() && base < end && last >= end
    }

    /// On a follower: the leader's log starts past this one's end (it answered
    /// OFFSET_OUT_OF_RANGE): nothing here is of use, so the log is emptied to start there
    /// (Kafka's truncateFullyAndStartAt) and the fetcher copies from the leader's log start.
    pub(super) async fn reset_to_leader_start(
        &mut self,
        epoch: LeaderEpoch,
        leader_log_start: Offset,
    ) -> PartitionReply {
        if !self.follows_at(epoch) {
            return PartitionReply::Error(ErrorCode::FencedLeaderEpoch);
        }
        if self.log().log_end_offset() >= leader_log_start {
            return PartitionReply::ReplicaAppended; // not below it (any more)
        }
        let why = "log ends below the leader's log start: emptying it to start there";
        match self.reset_log(leader_log_start, why).await {
            Ok(()) => PartitionReply::ReplicaAppended,
            Err(reply) => reply,
        }
    }

    /// Empties the log to start at `start` (logging `why`), then reopens it. `Err` with the
    /// reply to give if that failed; if reopening failed the log is gone (later messages are
    /// refused).
    async fn reset_log(&mut self, start: Offset, why: &str) -> Result<(), PartitionReply> {
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        let end = self.log().log_end_offset();
        tracing::warn!(topic, partition, end = end.0, start = start.0, "{why}");
        let emptied = self
            .cut_and_reopen(start, |log| log.truncate_fully_and_start_at(start))
            .await;
        match emptied {
            Ok(()) if self.log().log_end_offset() == start => Ok(()),
            _ => Err(PartitionReply::Error(ErrorCode::KafkaStorageError)),
        }
    }

    /// Takes the log out, `cut`s it (truncation closes the log) and reopens it exposing at most
    /// `high_watermark`. `Err` if it could not be reopened: the log is gone.
    async fn cut_and_reopen<F, Fut>(&mut self, high_watermark: Offset, cut: F) -> Result<(), ()>
    where
        F: FnOnce(PartitionLog<S>) -> Fut,
        Fut: std::future::Future<Output = Result<(), rill_engine::EngineError>>,
    {
        // Every caller checked `follows_at` first: what a leader exposed is never cut.
        assert!(
            matches!(self.replication, Replication::Follower { .. }),
            "only a follower cuts its log (KIP-101/320): a leader never truncates"
        );
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        self.cancel_clean().await;
        let log = self.log.take().expect("log is open while the actor serves");
        self.hw_checkpoint.written = None; // a cut removes a checkpoint past it
        if let Err(e) = cut(log).await {
            tracing::error!(topic, partition, error = %e, "cutting the log failed; reopening");
        }
        match self.open_again(high_watermark).await {
            Ok(log) => {
                self.log = Some(log);
                self.publish();
                self.publish_files();
                Ok(())
            }
            Err(e) => {
                tracing::error!(topic, partition, error = %e, "reopening a cut log failed");
                Err(())
            }
        }
    }

    /// On a follower: the offset its next Fetch asks from, which the leader counts as held
    /// here ([`fetch_position`]: durable, under the default flush policy), and the epoch of
    /// its last batch. A failed log answers KAFKA_STORAGE_ERROR and fetches no more.
    pub(super) fn follower_position(&mut self) -> PartitionReply {
        let every_append = self.setup.config.flush == FlushPolicy::EveryAppend;
        let log = self.log();
        let position = LogPosition {
            log_end: log.log_end_offset(),
            durable: log.durable_offset(),
            failed: log.is_failed(),
        };
        debug_assert!(
            !every_append || position.failed || position.durable == position.log_end,
            "a follower flushes its replica appends before it fetches again"
        );
        match fetch_position(position, every_append) {
            Ok(log_end) => PartitionReply::FollowerPosition {
                log_end,
                last_epoch: log.latest_epoch(),
            },
            Err(code) => PartitionReply::Error(code),
        }
    }

    /// On a follower: cut the log where the leader's says it diverges (KIP-320), then reopen
    /// it. Returns `Err` if the log could not be reopened (the actor then stops).
    pub(super) async fn truncate_divergent(
        &mut self,
        epoch: LeaderEpoch,
        diverging_epoch: LeaderEpoch,
        leader_end: Offset,
    ) -> Result<PartitionReply, ()> {
        if !self.follows_at(epoch) {
            return Ok(PartitionReply::Error(ErrorCode::FencedLeaderEpoch));
        }
        let log = self.log();
        let own_end = match log.end_offset_for_epoch(diverging_epoch) {
            Some((found, end)) if found == diverging_epoch => end,
            Some((_, end)) => end,
            None => log.log_start_offset(),
        };
        let cut = leader_end.min(own_end).max(log.log_start_offset());
        if cut >= log.log_end_offset() {
            return Ok(PartitionReply::ReplicaAppended);
        }
        // A follower may cut below its own high watermark, as Kafka's does (KIP-101): the
        // leader that won is the judge, and its ISR may have lost unflushed batches it had
        // reported (a crash). What this follower exposes comes down to the cut.
        let hw = log.high_watermark().min(cut);
        let end = log.log_end_offset();
        let (topic, partition) = (self.setup.tp.topic.clone(), self.setup.tp.partition.0);
        tracing::warn!(
            topic,
            partition,
            cut = cut.0,
            end = end.0,
            "cutting a divergent tail"
        );
        self.cut_and_reopen(hw, |log| log.truncate_to(cut)).await?;
        assert!(
            self.log().high_watermark() <= cut,
            "a cut log exposes nothing past the cut"
        );
        Ok(PartitionReply::ReplicaAppended)
    }

    /// Where `epoch` ended here (OffsetForLeaderEpoch).
    pub(super) fn end_offset_for_epoch(&mut self, epoch: LeaderEpoch) -> PartitionReply {
        let log = self.log();
        let found = if log.is_replicated() || log.latest_epoch().is_some() {
            log.end_offset_for_epoch(epoch)
        } else {
            None
        };
        PartitionReply::EpochEnd(found, self.positions())
    }

    /// Fail a message that came while the actor had no log.
    pub(super) fn refuse(msg: ActorMsg) {
        let _ = msg
            .reply
            .send(PartitionReply::Error(ErrorCode::KafkaStorageError));
    }

    /// Routes a replication op; `Err` if the log was lost (see [`Self::truncate_divergent`]).
    pub(super) async fn serve_replication(
        &mut self,
        op: PartitionOp,
    ) -> Result<PartitionReply, ()> {
        Ok(match op {
            PartitionOp::ReplicaFetch {
                replica,
                from,
                max_bytes,
                current_leader_epoch,
                last_fetched_epoch,
            } => {
                self.replica_fetch(
                    replica,
                    from,
                    max_bytes,
                    current_leader_epoch,
                    last_fetched_epoch,
                )
                .await
            }
            PartitionOp::FollowerPosition => self.follower_position(),
            PartitionOp::ReplicaAppend {
                epoch,
                records,
                leader_high_watermark,
                leader_log_start,
            } => {
                let reply = self
                    .replica_append(epoch, records, leader_high_watermark)
                    .await;
                if matches!(reply, PartitionReply::ReplicaAppended) {
                    self.follow_log_start(leader_log_start).await;
                }
                reply
            }
            PartitionOp::Truncate {
                epoch,
                diverging_epoch,
                end_offset,
            } => {
                return self
                    .truncate_divergent(epoch, diverging_epoch, end_offset)
                    .await
            }
            PartitionOp::ResetToLeaderStart {
                epoch,
                leader_log_start,
            } => self.reset_to_leader_start(epoch, leader_log_start).await,
            PartitionOp::EndOffsetForEpoch { epoch } => self.end_offset_for_epoch(epoch),
            _ => unreachable!("not a replication op"),
        })
    }
}

/// Whether `op` is one of replication's.
pub(super) fn is_replication_op(op: &PartitionOp) -> bool {
    matches!(
        op,
        PartitionOp::ReplicaFetch { .. }
            | PartitionOp::FollowerPosition
            | PartitionOp::ReplicaAppend { .. }
            | PartitionOp::Truncate { .. }
            | PartitionOp::ResetToLeaderStart { .. }
            | PartitionOp::EndOffsetForEpoch { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_move_up_or_stay_within_a_topic() {
        let mut floor = EpochFloor::default();
        let topic = Uuid::from_u128(1);
        floor.note(topic, LeaderEpoch(0));
        floor.note(topic, LeaderEpoch(0)); // leader fenced, then back at the same epoch
        floor.note(topic, LeaderEpoch(3));
        // Deleted and created again under the same name: a new id, epochs from 0 again.
        floor.note(Uuid::from_u128(2), LeaderEpoch(0));
    }

    #[test]
    #[should_panic(expected = "leader epochs a replica follows never go back: 2 after 3")]
    fn an_older_epoch_of_the_same_topic_is_a_bug() {
        let mut floor = EpochFloor::default();
        let topic = Uuid::from_u128(1);
        floor.note(topic, LeaderEpoch(3));
        floor.note(topic, LeaderEpoch(2));
    }
}
