//! One controller voter: raft-rs's `RawNode` over the durable [`RaftStore`], the applied
//! [`MetadataImage`], and the [`Controller`] that decides while this node leads. No I/O of its
//! own beyond the store's files, no clock, no sockets: the caller feeds it
//!
//! | call                | when                                                        |
//! |---------------------|-------------------------------------------------------------|
//! | [`QuorumNode::tick`]   | every `tick_ms` (raft timers; session expiry when leading) |
//! | [`QuorumNode::step`]   | a raft message arrived from another voter                  |
//! | [`QuorumNode::submit`] | a broker's request arrived                                 |
//! | [`QuorumNode::poll`]   | after any of the above: persist, apply, collect the output |
//!
//! and sends what [`Output`] holds: raft messages to voters, answers to requests, a new image
//! for the brokers of this process. The order inside `poll` is raft-rs's: a leader sends before
//! it persists (Raft thesis 10.2.1); a follower's messages (votes, acknowledgements) leave only
//! after the entries and HardState they acknowledge are synced.
//!
//! A request whose records were proposed is answered when its entry applies: with the outcome
//! if the entry at that index is still ours (same term), otherwise `NotController` (the entry
//! was overwritten by a new leader; the broker retries where it is told).

use std::collections::BTreeMap;
use std::sync::Arc;

use raft::eraftpb::{EntryType, Message, MessageType, Snapshot};
use raft::{ProgressState, RawNode, SnapshotStatus, StateRole};

use crate::controller::{Controller, ControllerConfig, Decision, ReplyPlan};
use crate::files::MetaFiles;
use crate::image::MetadataImage;
use crate::record::{EntryPayload, MetadataRecord, PayloadError};
use crate::request::{ControllerRequest, ControllerResponse};
use crate::store::{RaftStore, Recovery, StoreError};
use crate::types::{LogIndex, NodeId};

/// Requests proposed and not yet applied, at most (more are refused until some apply).
pub const PENDING_MAX: usize = 4096;
/// A snapshot sent to a follower that has not confirmed it after this long counts as lost, and
/// is sent again (raft-rs otherwise waits for the transport's report forever).
pub const SNAPSHOT_RETRY_MS: u64 = 3000;
/// Largest append message raft-rs builds (entries are batched up to this).
const MESSAGE_BYTES_MAX: u64 = 1 << 20;

/// A voter's settings.
#[derive(Clone, Debug)]
pub struct QuorumConfig {
    /// This node.
    pub node_id: NodeId,
    /// Every voter (`controller.quorum.voters`), this node included.
    pub voters: Vec<NodeId>,
    /// Ticks without a leader before a follower campaigns (randomized up to twice this).
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_ticks: usize,
    /// Fixed election timeout in ticks instead of a random one (deterministic simulations).
    pub fixed_election_ticks: Option<usize>,
    /// Take a snapshot and compact the log after this many applied entries.
    pub snapshot_every_entries: u64,
    /// The controller's settings.
    pub controller: ControllerConfig,
    /// Seed of the controller's random choices.
    pub seed: u64,
}

/// What the caller must do after [`QuorumNode::poll`].
#[derive(Debug)]
pub struct Output<T> {
    /// Send each to the voter named by `to` (a raft id: [`NodeId::from_raft_id`]).
    pub messages: Vec<Message>,
    /// Answer each request.
    pub replies: Vec<(T, ControllerResponse)>,
    /// The applied image changed: publish it.
    pub image: Option<Arc<MetadataImage>>,
}

impl<T> Default for Output<T> {
    fn default() -> Self {
        Self {
            messages: Vec::new(),
            replies: Vec::new(),
            image: None,
        }
    }
}

/// Why the node must stop (its durable state cannot be trusted or extended).
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// The metadata log failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A committed entry or snapshot cannot be read (a newer Rill wrote it, or damage).
    #[error("committed metadata at index {index}: {source}")]
    Payload {
        /// Where.
        index: u64,
        /// Why.
        source: PayloadError,
    },
    /// raft-rs refused the configuration or state.
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
}

struct Pending<T> {
    term: u64,
    ticket: T,
    plan: ReplyPlan,
}

/// One voter (see the module doc).
pub struct QuorumNode<F: MetaFiles, T> {
    raw: RawNode<RaftStore<F>>,
    config: QuorumConfig,
    image: Arc<MetadataImage>,
    controller: Controller,
    pending: BTreeMap<u64, Pending<T>>,
    /// Index of the controller's own last proposal, until it applies.
    tick_inflight: Option<u64>,
    role: StateRole,
    leader: Option<NodeId>,
    now_ms: u64,
    /// When a snapshot was last sent to each follower (raft id), while leading.
    snapshots_sent: BTreeMap<u64, u64>,
}

impl<F: MetaFiles, T> QuorumNode<F, T> {
    /// Recover the log in `files` (or start one) and rebuild the image from its snapshot; the
    /// committed entries after it are applied again by the first [`Self::poll`].
    pub fn open(config: QuorumConfig, files: F) -> Result<(Self, Recovery), QuorumError> {
        assert!(
            config.voters.contains(&config.node_id),
            "a voter is among the voters"
        );
        assert!(config.heartbeat_ticks >= 1 && config.election_ticks > config.heartbeat_ticks);
        let voters: Vec<u64> = config.voters.iter().map(|v| v.raft_id()).collect();
        let (store, recovery) = RaftStore::open(files, &voters)?;
        let image = image_from_snapshot(store.latest_snapshot())?;
        let applied = image.applied_index.0;
        let raft_config = raft::Config {
            id: config.node_id.raft_id(),
            election_tick: config.election_ticks,
            heartbeat_tick: config.heartbeat_ticks,
            min_election_tick: config.fixed_election_ticks.unwrap_or(0),
            max_election_tick: config.fixed_election_ticks.map_or(0, |t| t + 1),
            applied,
            max_size_per_msg: MESSAGE_BYTES_MAX,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        raft_config.validate()?;
        let raw = RawNode::new(
            &raft_config,
            store,
            &crate::raft_log::logger(config.node_id),
        )?;
        let controller = Controller::new(config.controller.clone(), config.seed);
        let node = Self {
            raw,
            config,
            image: Arc::new(image),
            controller,
            pending: BTreeMap::new(),
            tick_inflight: None,
            role: StateRole::Follower,
            leader: None,
            now_ms: 0,
            snapshots_sent: BTreeMap::new(),
        };
        Ok((node, recovery))
    }

    /// The applied image.
    pub fn image(&self) -> &Arc<MetadataImage> {
        &self.image
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.config.node_id
    }

    /// The active controller as far as this node knows.
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }

    /// This node is the active controller.
    pub fn is_leader(&self) -> bool {
        self.role == StateRole::Leader
    }

    /// Raft's current term.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// raft-rs's view, for test failure messages.
    #[cfg(test)]
    pub fn debug_state(&self) -> String {
        let log = &self.raw.raft.raft_log;
        let progress: Vec<String> = self
            .raw
            .raft
            .prs()
            .iter()
            .map(|(id, p)| format!("{id}:{:?}/m{}/n{}", p.state, p.matched, p.next_idx))
            .collect();
        format!(
            "committed {} persisted {} applied {} last {} first {} snap {} prs [{}]",
            log.committed,
            log.persisted,
            log.applied,
            log.last_index(),
            log.first_index(),
            self.raw.store().latest_snapshot().get_metadata().index,
            progress.join(" ")
        )
    }

    /// Advance raft's clock one tick; while leading, let the controller decide on its own.
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        self.raw.tick();
        self.retry_lost_snapshots();
        if self.is_leader() && self.tick_inflight.is_none() {
            let records = self.controller.tick(&self.image, now_ms);
            if !records.is_empty() {
                if let Ok(index) = self.propose(records) {
                    self.tick_inflight = Some(index);
                }
            }
        }
    }

    /// Followers stuck waiting for a snapshot sent long ago: report it lost so it is sent again.
    fn retry_lost_snapshots(&mut self) {
        if !self.is_leader() {
            self.snapshots_sent.clear();
            return;
        }
        let now = self.now_ms;
        let lost: Vec<u64> = self
            .snapshots_sent
            .iter()
            .filter(|(_, sent)| now.saturating_sub(**sent) >= SNAPSHOT_RETRY_MS)
            .map(|(id, _)| *id)
            .collect();
        for id in lost {
            self.snapshots_sent.remove(&id);
            let waiting = self
                .raw
                .raft
                .prs()
                .get(id)
                .is_some_and(|p| p.state == ProgressState::Snapshot);
            if waiting {
                tracing::info!(to = ?NodeId::from_raft_id(id), "metadata snapshot unconfirmed: resending");
                self.raw.report_snapshot(id, SnapshotStatus::Failure);
            }
        }
    }

    /// The transport could not deliver to `node`: raft-rs probes it again instead of streaming.
    pub fn report_unreachable(&mut self, node: NodeId) {
        self.raw.report_unreachable(node.raft_id());
    }

    /// A raft message from another voter.
    pub fn step(&mut self, message: Message) {
        if message.to != self.config.node_id.raft_id() {
            return;
        }
        if let Err(e) = self.raw.step(message) {
            tracing::debug!(error = %e, "raft message ignored");
        }
    }

    /// A broker's request: answered now (`Some`), or after its records apply (in a later
    /// [`Output`]).
    pub fn submit(
        &mut self,
        ticket: T,
        request: &ControllerRequest,
        now_ms: u64,
    ) -> Option<(T, ControllerResponse)> {
        self.now_ms = now_ms;
        if !self.is_leader() {
            let leader = self.leader.filter(|l| *l != self.config.node_id);
            return Some((ticket, ControllerResponse::NotController { leader }));
        }
        if self.pending.len() >= PENDING_MAX {
            let busy = ControllerResponse::error(
                rill_types::ErrorCode::RequestTimedOut,
                "the controller has too many requests in flight",
            );
            return Some((ticket, busy));
        }
        match self.controller.decide(&self.image, request, now_ms) {
            Decision::Reply(response) => Some((ticket, response)),
            Decision::Propose { records, plan } => match self.propose(records) {
                Ok(index) => {
                    let term = self.raw.raft.term;
                    self.pending.insert(index, Pending { term, ticket, plan });
                    None
                }
                Err(()) => Some((ticket, ControllerResponse::NotController { leader: None })),
            },
        }
    }

    /// Propose one entry; its index.
    fn propose(&mut self, records: Vec<MetadataRecord>) -> Result<u64, ()> {
        // raft-rs's own state, not the last soft state seen: a leader that was paused (SIGSTOP)
        // may have stepped down while handling the messages that woke it, and a follower's
        // proposal is forwarded to the leader without an entry here (and Ok).
        if self.raw.raft.state != StateRole::Leader {
            tracing::debug!("proposal refused: no longer the raft leader");
            return Err(());
        }
        let data = EntryPayload::new(records).encode();
        let before = self.raw.raft.raft_log.last_index();
        if let Err(e) = self.raw.propose(Vec::new(), data) {
            tracing::debug!(error = %e, "proposal dropped");
            return Err(());
        }
        let index = self.raw.raft.raft_log.last_index();
        assert_eq!(index, before + 1, "one proposal is one entry");
        Ok(index)
    }

    /// Persist, apply and collect everything raft-rs has ready (see the module doc).
    pub fn poll(&mut self) -> Result<Output<T>, QuorumError> {
        let mut out = Output::default();
        let applied_before = self.image.applied_index;
        while self.raw.has_ready() {
            self.handle_ready(&mut out)?;
        }
        for message in &out.messages {
            if message.get_msg_type() == MessageType::MsgSnapshot {
                self.snapshots_sent.insert(message.to, self.now_ms);
            }
        }
        if self.image.applied_index != applied_before {
            self.maybe_compact()?;
            out.image = Some(self.image.clone());
        }
        Ok(out)
    }

    fn handle_ready(&mut self, out: &mut Output<T>) -> Result<(), QuorumError> {
        let mut ready = self.raw.ready();
        if let Some(soft) = ready.ss() {
            self.on_soft_state(soft.raft_state, soft.leader_id);
        }
        out.messages.extend(ready.take_messages());
        if !ready.snapshot().is_empty() {
            let snapshot = ready.snapshot().clone();
            self.install_snapshot(snapshot, out)?;
        }
        let committed = ready.take_committed_entries();
        self.apply(committed, out)?;
        let store = self.raw.mut_store();
        store.append(ready.entries())?;
        if let Some(hard_state) = ready.hs() {
            store.set_hard_state(hard_state.clone())?;
        }
        if ready.must_sync() {
            store.sync()?;
        }
        out.messages.extend(ready.take_persisted_messages());
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.raw.mut_store().set_commit(commit)?;
        }
        out.messages.extend(light.take_messages());
        let committed = light.take_committed_entries();
        self.apply(committed, out)?;
        self.raw.advance_apply();
        Ok(())
    }

    fn on_soft_state(&mut self, role: StateRole, leader_id: u64) {
        let was_leader = self.is_leader();
        self.role = role;
        self.leader = NodeId::from_raft_id(leader_id);
        if self.is_leader() && !was_leader {
            tracing::info!(
                node = self.config.node_id.0,
                term = self.raw.raft.term,
                "became the active controller"
            );
            self.controller.on_elected(&self.image, self.now_ms);
            self.tick_inflight = None;
        }
        if was_leader && !self.is_leader() {
            tracing::info!(node = self.config.node_id.0, leader = ?self.leader, "no longer the active controller");
            self.tick_inflight = None;
        }
    }

    fn apply(
        &mut self,
        entries: Vec<raft::eraftpb::Entry>,
        out: &mut Output<T>,
    ) -> Result<(), QuorumError> {
        for entry in entries {
            let index = LogIndex(entry.index);
            if index <= self.image.applied_index {
                continue; // covered by a snapshot installed in this same ready
            }
            let image = Arc::make_mut(&mut self.image);
            let outcomes = match entry.get_entry_type() {
                EntryType::EntryNormal if !entry.data.is_empty() => {
                    let payload = EntryPayload::decode(&entry.data).map_err(|source| {
                        QuorumError::Payload {
                            index: entry.index,
                            source,
                        }
                    })?;
                    image.apply_entry(index, entry.term, &payload.records)
                }
                // A new leader's empty entry; conf changes are never proposed (static voters).
                _ => {
                    image.skip_entry(index, entry.term);
                    Vec::new()
                }
            };
            self.resolve(index, entry.term, &outcomes, out);
            if self.tick_inflight.is_some_and(|i| i <= index.0) {
                self.tick_inflight = None;
            }
        }
        Ok(())
    }

    /// Answer the requests whose entries are at or below `index`.
    fn resolve(
        &mut self,
        index: LogIndex,
        term: u64,
        outcomes: &[Result<(), crate::image::Rejected>],
        out: &mut Output<T>,
    ) {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > index.0 {
                break;
            }
            let at = *entry.key();
            let pending = entry.remove();
            let response = if at == index.0 && pending.term == term {
                Controller::reply(pending.plan, index, outcomes, &self.image)
            } else {
                Some(ControllerResponse::NotController {
                    leader: self.leader.filter(|l| *l != self.config.node_id),
                })
            };
            if let Some(response) = response {
                out.replies.push((pending.ticket, response));
            }
        }
    }

    fn install_snapshot(
        &mut self,
        snapshot: Snapshot,
        out: &mut Output<T>,
    ) -> Result<(), QuorumError> {
        let image = image_from_snapshot(&snapshot)?;
        let index = image.applied_index;
        tracing::info!(
            node = self.config.node_id.0,
            index = index.0,
            "installing a metadata snapshot"
        );
        self.raw.mut_store().install_snapshot(snapshot)?;
        self.image = Arc::new(image);
        // Requests inside the snapshot cannot learn their outcome here: let them retry.
        self.resolve(index, 0, &[], out);
        Ok(())
    }

    fn maybe_compact(&mut self) -> Result<(), QuorumError> {
        let store = self.raw.store();
        let snapshot_index = store.latest_snapshot().get_metadata().index;
        let applied = self.image.applied_index.0;
        if applied < snapshot_index + self.config.snapshot_every_entries
            || applied > store.hard_state().commit
        {
            return Ok(());
        }
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = applied;
        meta.term = self.image.applied_term;
        *meta.mut_conf_state() = store
            .latest_snapshot()
            .get_metadata()
            .get_conf_state()
            .clone();
        snapshot.data = serde_json::to_vec(&*self.image)
            .expect("image serializes")
            .into();
        tracing::debug!(
            node = self.config.node_id.0,
            index = applied,
            "metadata snapshot"
        );
        self.raw.mut_store().compact(snapshot)?;
        Ok(())
    }
}

/// The image a snapshot holds (the empty image for the initial, data-less one).
fn image_from_snapshot(snapshot: &Snapshot) -> Result<MetadataImage, QuorumError> {
    let index = snapshot.get_metadata().index;
    if snapshot.data.is_empty() {
        assert_eq!(index, 0, "only the initial snapshot is empty");
        return Ok(MetadataImage::default());
    }
    let image: MetadataImage =
        serde_json::from_slice(&snapshot.data).map_err(|e| QuorumError::Payload {
            index,
            source: PayloadError::Malformed(e.to_string()),
        })?;
    if image.applied_index.0 != index {
        return Err(QuorumError::Payload {
            index,
            source: PayloadError::Malformed(format!(
                "snapshot image is at {}",
                image.applied_index
            )),
        });
    }
    Ok(image)
}
