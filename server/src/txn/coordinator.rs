//! One shard's transaction coordinator: the transactional ids whose state-log partition this
//! shard owns, each driven by the pure transitions of [`super::state`], made durable through a
//! [`TxnJournal`] before they are installed or answered.
//!
//! One operation at a time per id: an id is *busy* from the moment an operation decides to
//! change it until its records are durable (and, for an end, its markers written); another
//! operation on it meanwhile gets CONCURRENT_TRANSACTIONS, which every client retries. No
//! `RefCell` borrow is held across an `.await`; a guard frees a busy id even if its operation
//! is dropped half-way (a Prepare left behind is then finished by [`TxnCoordinator::tick`]).
//!
//! | operation       | durable first              | then                                    |
//! |-----------------|----------------------------|-----------------------------------------|
//! | InitProducerId  | Empty, epoch bumped        | (an open transaction: fence, abort it)  |
//! | AddPartitions   | Ongoing + partitions       |                                         |
//! | AddOffsets      | Ongoing + group            |                                         |
//! | TxnOffsetCommit | (the group's pending log)  | offsets pending until the end           |
//! | EndTxn          | PrepareCommit/PrepareAbort | markers, group offsets, then Complete   |
//! | timeout (tick)  | PrepareAbort, epoch bumped | markers, then CompleteAbort             |
//! | expiry (tick)   | tombstone                  | the id is forgotten                     |

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use futures::future::join_all;
use rill_engine::io::Clock;
use rill_engine::TxnMarker;
use rill_protocol::ErrorCode;
use rill_types::limits::Field;
use rill_types::{DurationMs, PartitionIndex, TimestampMs, TopicPartition};

use super::env::{TxnEnv, TxnOffsets};
use super::journal::TxnJournal;
use super::ops::{TxnDescription, TxnListFilter, TxnListing, TxnOp, TxnProducer, TxnReply};
use super::record::TxnRecord;
use super::state::{self, EndPlan, InitPlan, TxnMetadata};
use super::{ProducerEpoch, ProducerId, TxnConfig};
use crate::admin::bound_hits::Bound;
use crate::admin::shard::hooks;
use crate::group::ops::MemberRef;
use crate::group::{offsets_partition, OFFSETS_TOPIC};

/// The transactional ids of one shard.
pub struct TxnCoordinator<J: TxnJournal> {
    txns: RefCell<HashMap<String, TxnMetadata>>,
    busy: RefCell<HashSet<String>>,
    journal: J,
    clock: Rc<dyn Clock>,
    config: TxnConfig,
}

/// Marks an id busy; frees it when dropped (also when its operation is dropped half-way).
struct Busy<'a> {
    set: &'a RefCell<HashSet<String>>,
    id: String,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.set.borrow_mut().remove(&self.id);
    }
}

impl<J: TxnJournal> TxnCoordinator<J> {
    /// A coordinator over `journal` with the ids replayed from it (`live`).
    pub fn new(
        journal: J,
        clock: Rc<dyn Clock>,
        config: TxnConfig,
        live: Vec<(String, TxnMetadata)>,
    ) -> Self {
        TxnCoordinator {
            txns: RefCell::new(live.into_iter().collect()),
            busy: RefCell::new(HashSet::new()),
            journal,
            clock,
            config,
        }
    }

    /// Replaces state-log partition `partition`'s ids with `live` (this broker just became its
    /// coordinator, `crate::internal_topics::replicated`).
    pub fn load_partition(&self, partition: PartitionIndex, live: Vec<(String, TxnMetadata)>) {
        self.unload_partition(partition);
        debug_assert!(live
            .iter()
            .all(|(id, _)| super::txn_partition(id) == partition));
        self.txns.borrow_mut().extend(live);
    }

    /// Drops state-log partition `partition`'s ids (this broker no longer coordinates them).
    pub fn unload_partition(&self, partition: PartitionIndex) {
        self.txns
            .borrow_mut()
            .retain(|id, _| super::txn_partition(id) != partition);
    }

    /// The journal (shutdown closes it).
    pub fn journal(&self) -> &J {
        &self.journal
    }

    fn now(&self) -> TimestampMs {
        self.clock.now()
    }

    fn get(&self, id: &str) -> Option<TxnMetadata> {
        self.txns.borrow().get(id).cloned()
    }

    /// Marks `id` busy, or `None` if an operation on it is in progress.
    fn lock(&self, id: &str) -> Option<Busy<'_>> {
        if !self.busy.borrow_mut().insert(id.to_string()) {
            return None;
        }
        Some(Busy {
            set: &self.busy,
            id: id.to_string(),
        })
    }

    /// Makes `metadata` durable, then installs it.
    async fn persist(&self, id: &str, metadata: TxnMetadata) -> Result<(), ErrorCode> {
        let record = TxnRecord {
            transactional_id: id.to_string(),
            metadata: Some(metadata.clone()),
        };
        self.journal.append(record).await?;
        self.txns.borrow_mut().insert(id.to_string(), metadata);
        Ok(())
    }

    /// Run `op` on `id` (which this shard coordinates); `env` writes markers and group offsets.
    pub async fn handle<E: TxnEnv>(&self, id: &str, op: TxnOp, env: &E) -> TxnReply {
        // The limits table's row (an empty id: INVALID_REQUEST); List names no id.
        if !matches!(op, TxnOp::List(_)) {
            if let Err(e) = Field::TransactionalId.check(id) {
                return refused(&op, e.code);
            }
        }
        if !matches!(op, TxnOp::List(_)) {
            if let Err(code) = self.journal.ready(id) {
                return TxnReply::Unavailable(code);
            }
        }
        match op {
            TxnOp::InitProducerId {
                timeout_ms,
                expected,
            } => TxnReply::Init(self.init(id, timeout_ms, expected, env).await),
            TxnOp::AddPartitions {
                producer,
                partitions,
                verify_only: true,
            } => TxnReply::Partitions(self.verify(id, producer, &partitions)),
            TxnOp::AddPartitions {
                producer,
                partitions,
                verify_only: false,
            } => TxnReply::Partitions(self.add_partitions(id, producer, partitions, env).await),
            TxnOp::AddOffsets { producer, group } => {
                TxnReply::Done(self.add_group(id, producer, group).await)
            }
            TxnOp::CommitOffsets {
                producer,
                group,
                member,
                offsets,
            } => TxnReply::Offsets(
                self.commit_offsets(id, producer, group, member, offsets, env)
                    .await,
            ),
            TxnOp::End { producer, commit } => {
                TxnReply::Done(self.end(id, producer, commit, env).await)
            }
            TxnOp::Describe => TxnReply::Describe(self.describe(id)),
            TxnOp::List(filter) => TxnReply::List(self.list(&filter)),
        }
    }

    /// InitProducerId: bumps the epoch (fencing older producers of the id), first aborting an
    /// open transaction with a fencing epoch.
    async fn init<E: TxnEnv>(
        &self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(ProducerId, ProducerEpoch)>,
        env: &E,
    ) -> Result<(ProducerId, ProducerEpoch), ErrorCode> {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ErrorCode::InvalidTransactionTimeout);
        }
        let _busy = self.lock(id).ok_or(ErrorCode::ConcurrentTransactions)?;
        self.make_room(id).await?;
        // At most twice: an open transaction is aborted first, then the epoch is bumped.
        for _ in 0..2 {
            let current = self.get(id);
            let mut new_id = || env.allocate_producer_id();
            let plan = state::init(
                current.as_ref(),
                timeout_ms,
                expected,
                self.now(),
                &mut new_id,
            )?;
            match plan {
                InitPlan::Ready(next) => {
                    let answer = (next.producer_id, next.producer_epoch);
                    self.persist(id, next).await?;
                    tracing::info!(
                        id,
                        producer_id = answer.0 .0,
                        epoch = answer.1 .0,
                        "initialized transactional id"
                    );
                    return Ok(answer);
                }
                InitPlan::FenceOpen(fenced) => {
                    tracing::info!(
                        id,
                        "aborting the open transaction of a re-initialized transactional id"
                    );
                    self.persist(id, fenced).await?;
                    if !self.finish(id, env).await {
                        return Err(ErrorCode::ConcurrentTransactions);
                    }
                }
            }
        }
        unreachable!("an aborted transaction leaves the id ready for a bump")
    }

    /// The verify-only AddPartitionsToTxn: per partition, NONE when it is in the transaction,
    /// else TRANSACTION_ABORTABLE (the partition leader maps it for old clients).
    fn verify(
        &self,
        id: &str,
        producer: TxnProducer,
        partitions: &[TopicPartition],
    ) -> Vec<ErrorCode> {
        let Some(m) = self.get(id) else {
            return vec![ErrorCode::InvalidProducerIdMapping; partitions.len()];
        };
        match state::verify(&m, producer.id, producer.epoch, partitions) {
            Ok(found) => found
                .into_iter()
                .map(|f| {
                    if f {
                        ErrorCode::None
                    } else {
                        ErrorCode::TransactionAbortable
                    }
                })
                .collect(),
            Err(code) => vec![code; partitions.len()],
        }
    }

    /// AddPartitionsToTxn: partitions that cannot join (unknown, or led elsewhere) fail the
    /// request, the others are not attempted.
    async fn add_partitions<E: TxnEnv>(
        &self,
        id: &str,
        producer: TxnProducer,
        partitions: Vec<TopicPartition>,
        env: &E,
    ) -> Vec<ErrorCode> {
        let refused: Vec<Option<ErrorCode>> = partitions
            .iter()
            .map(|tp| env.partition_refusal(tp.borrowed()))
            .collect();
        if refused.iter().any(Option::is_some) {
            return refused
                .into_iter()
                .map(|r| r.unwrap_or(ErrorCode::OperationNotAttempted))
                .collect();
        }
        let code = self.add(id, producer, &partitions, &[]).await;
        vec![code; partitions.len()]
    }

    async fn add_group(&self, id: &str, producer: TxnProducer, group: String) -> ErrorCode {
        if let Err(e) = Field::GroupId.check(&group) {
            return e.code;
        }
        self.add(id, producer, &[], &[group]).await
    }

    /// Adds partitions and groups to the transaction (durably) and answers.
    async fn add(
        &self,
        id: &str,
        producer: TxnProducer,
        partitions: &[TopicPartition],
        groups: &[String],
    ) -> ErrorCode {
        let Some(_busy) = self.lock(id) else {
            return ErrorCode::ConcurrentTransactions;
        };
        let Some(m) = self.get(id) else {
            return ErrorCode::InvalidProducerIdMapping;
        };
        match state::add(
            &m,
            producer.id,
            producer.epoch,
            partitions,
            groups,
            self.now(),
        ) {
            Ok(None) => ErrorCode::None,
            Ok(Some(next)) => self
                .persist(id, next)
                .await
                .err()
                .unwrap_or(ErrorCode::None),
            Err(code) => code,
        }
    }

    /// TxnOffsetCommit: the group must be in the transaction; its coordinator then keeps the
    /// offsets pending until the transaction ends. Busy meanwhile, so an EndTxn cannot end
    /// the group's offsets before they are stored.
    async fn commit_offsets<E: TxnEnv>(
        &self,
        id: &str,
        producer: TxnProducer,
        group: String,
        member: MemberRef,
        offsets: TxnOffsets,
        env: &E,
    ) -> Vec<ErrorCode> {
        let n = offsets.len();
        let Some(_busy) = self.lock(id) else {
            return vec![ErrorCode::ConcurrentTransactions; n];
        };
        let Some(m) = self.get(id) else {
            return vec![ErrorCode::InvalidProducerIdMapping; n];
        };
        match state::verify_group(&m, producer.id, producer.epoch, &group) {
            Ok(true) => {
                env.commit_group_txn_offsets(&group, producer.id, member, offsets)
                    .await
            }
            Ok(false) => vec![ErrorCode::TransactionAbortable; n],
            Err(code) => vec![code; n],
        }
    }

    /// EndTxn: the decision is durable before markers go out; answered once they are written
    /// (or, if some could not be, once the decision is durable: the coordinator finishes it).
    async fn end<E: TxnEnv>(
        &self,
        id: &str,
        producer: TxnProducer,
        commit: bool,
        env: &E,
    ) -> ErrorCode {
        let Some(_busy) = self.lock(id) else {
            return ErrorCode::ConcurrentTransactions;
        };
        let Some(m) = self.get(id) else {
            return ErrorCode::InvalidProducerIdMapping;
        };
        match state::end(&m, producer.id, producer.epoch, commit, self.now()) {
            Ok(EndPlan::AlreadyDone) => ErrorCode::None,
            Ok(EndPlan::Prepare(prepared)) => {
                if let Err(code) = self.persist(id, prepared).await {
                    return code;
                }
                self.finish(id, env).await;
                ErrorCode::None
            }
            Err(code) => code,
        }
    }

    /// Writes the markers of `id`'s Prepare (the caller holds it busy) and records Complete.
    /// `false` if anything failed: the Prepare stays and a later tick finishes it.
    async fn finish<E: TxnEnv>(&self, id: &str, env: &E) -> bool {
        let m = self.get(id).expect("a prepared id is installed");
        assert!(m.state.is_prepare(), "only a decision has markers to write");
        if !self.write_markers(id, &m, env).await {
            return false;
        }
        let done = state::complete(&m, self.now());
        match self.persist(id, done).await {
            Ok(()) => {
                hooks::txn_ended(m.commits());
                true
            }
            Err(code) => {
                tracing::warn!(
                    id,
                    ?code,
                    "markers written, completion not recorded; will retry"
                );
                false
            }
        }
    }

    /// Markers to every partition and the end to every group of `m`, all at once. A partition
    /// that no longer exists needs none.
    async fn write_markers<E: TxnEnv>(&self, id: &str, m: &TxnMetadata, env: &E) -> bool {
        let commit = m.commits();
        let marker = TxnMarker {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            commit,
            coordinator_epoch: self.journal.coordinator_epoch(id),
        };
        let partitions = m
            .partitions
            .iter()
            .map(|tp| env.write_marker(tp.borrowed(), marker));
        let groups = m.groups.iter().map(|g| env.end_group_txn(g, marker));
        let (written, ended) = futures::join!(join_all(partitions), join_all(groups));
        let failed = written
            .into_iter()
            .chain(ended)
            .filter_map(Result::err)
            .filter(|code| *code != ErrorCode::UnknownTopicOrPartition)
            .collect::<Vec<_>>();
        if !failed.is_empty() {
            tracing::warn!(
                id,
                ?failed,
                "transaction markers not all written; will retry"
            );
        }
        failed.is_empty()
    }

    fn describe(&self, id: &str) -> Result<TxnDescription, ErrorCode> {
        let m = self.get(id).ok_or(ErrorCode::TransactionalIdNotFound)?;
        let mut partitions: Vec<TopicPartition> = m.partitions.iter().cloned().collect();
        partitions.extend(
            m.groups
                .iter()
                .map(|g| TopicPartition::new(OFFSETS_TOPIC, offsets_partition(g))),
        );
        partitions.sort();
        partitions.dedup();
        Ok(TxnDescription {
            state: m.state.name().to_string(),
            timeout_ms: m.timeout_ms,
            start_ms: m.start_ms,
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            partitions,
        })
    }

    /// The ids on this shard that pass `filter`.
    pub fn list(&self, filter: &TxnListFilter) -> Vec<TxnListing> {
        let now = self.now();
        let mut out: Vec<TxnListing> = self
            .txns
            .borrow()
            .iter()
            .filter(|(_, m)| {
                filter.states.is_empty() || filter.states.iter().any(|s| s == m.state.name())
            })
            .filter(|(_, m)| {
                filter.producer_ids.is_empty() || filter.producer_ids.contains(&m.producer_id)
            })
            .filter(|(_, m)| {
                filter.min_duration_ms < DurationMs::ZERO
                    || (m.start_ms >= TimestampMs(0) && now - m.start_ms >= filter.min_duration_ms)
            })
            .map(|(id, m)| TxnListing {
                transactional_id: id.clone(),
                producer_id: m.producer_id,
                state: m.state.name().to_string(),
            })
            .collect();
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        out
    }

    /// Time-driven work (every `transaction.abort.timed.out.transaction.cleanup.interval.ms`):
    /// abort transactions past their timeout (fencing their producer) and finish decisions
    /// whose markers are not all written (after a crash, or a partition that was unavailable).
    pub async fn tick<E: TxnEnv>(&self, env: &E) {
        let now = self.now();
        let due: Vec<String> = self
            .txns
            .borrow()
            .iter()
            .filter(|(_, m)| m.state.is_prepare() || state::timed_out(m, now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let Some(_busy) = self.lock(&id) else {
                continue; // an operation is under way; the next tick looks again
            };
            let Some(m) = self.get(&id) else { continue };
            if state::timed_out(&m, now) {
                hooks::txn_timed_out();
                tracing::info!(
                    id,
                    timeout_ms = m.timeout_ms,
                    "aborting a timed-out transaction"
                );
                if self.persist(&id, state::fence(&m, now)).await.is_err() {
                    continue;
                }
            } else if !m.state.is_prepare() {
                continue;
            }
            self.finish(&id, env).await;
        }
    }

    /// Forgets ids idle for `transactional.id.expiration.ms` (a tombstone in the state log).
    pub async fn expire(&self) {
        let now = self.now();
        let expiration_ms = self.config.id_expiration_ms;
        let due: Vec<String> = self
            .txns
            .borrow()
            .iter()
            .filter(|(_, m)| state::expired(m, now, expiration_ms))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let expired = |m: &TxnMetadata| state::expired(m, now, expiration_ms);
            if self.forget(&id, expired).await {
                hooks::bound_hit(Bound::TransactionalIdExpiration);
                tracing::info!(id, "transactional id expired");
            }
        }
    }

    /// Forgets `id` (a tombstone in the state log) if it is not busy and its metadata still
    /// passes `still`; whether it did.
    async fn forget(&self, id: &str, still: impl Fn(&TxnMetadata) -> bool) -> bool {
        let Some(_busy) = self.lock(id) else {
            return false;
        };
        if !self.get(id).is_some_and(|m| still(&m)) {
            return false;
        }
        let tombstone = TxnRecord {
            transactional_id: id.to_string(),
            metadata: None,
        };
        if self.journal.append(tombstone).await.is_err() {
            return false;
        }
        self.txns.borrow_mut().remove(id);
        true
    }

    /// Room for `id` within `rill.shard.transactional.ids.max`: a known id has its place; a
    /// new one past the maximum takes the place of the idle id updated longest ago, forgotten
    /// as its expiration would forget it. Refused (POLICY_VIOLATION) when every id has a
    /// transaction in progress.
    async fn make_room(&self, id: &str) -> Result<(), ErrorCode> {
        let oldest = {
            let txns = self.txns.borrow();
            if txns.contains_key(id) || txns.len() < self.config.shard_ids_max {
                return Ok(());
            }
            let busy = self.busy.borrow();
            txns.iter()
                .filter(|(other, m)| m.state.is_idle() && !busy.contains(*other))
                .min_by_key(|(_, m)| m.last_update_ms)
                .map(|(other, _)| other.clone())
        };
        hooks::bound_hit(Bound::ShardTransactionalIds);
        let idle = |m: &TxnMetadata| m.state.is_idle();
        match oldest {
            Some(oldest) if self.forget(&oldest, idle).await => {
                tracing::info!(
                    forgotten = oldest,
                    id,
                    "rill.shard.transactional.ids.max reached: forgot the idle transactional id updated longest ago"
                );
                Ok(())
            }
            _ => {
                tracing::warn!(
                    id,
                    "rill.shard.transactional.ids.max reached with every id in a transaction: InitProducerId refused"
                );
                Err(ErrorCode::PolicyViolation)
            }
        }
    }

    /// How many ids are in each state (for the admin listener's metrics).
    pub fn count_by_state(&self) -> BTreeMap<&'static str, u64> {
        let mut counts = BTreeMap::new();
        for m in self.txns.borrow().values() {
            *counts.entry(m.state.name()).or_default() += 1;
        }
        counts
    }

    /// The configuration (the router reads its intervals).
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }
}

/// `op` refused with `code` for its transactional id, in the reply shape `op` expects.
fn refused(op: &TxnOp, code: ErrorCode) -> TxnReply {
    match op {
        TxnOp::InitProducerId { .. } => TxnReply::Init(Err(code)),
        TxnOp::AddPartitions { partitions, .. } => {
            TxnReply::Partitions(vec![code; partitions.len()])
        }
        TxnOp::CommitOffsets { offsets, .. } => TxnReply::Offsets(vec![code; offsets.len()]),
        TxnOp::Describe => TxnReply::Describe(Err(code)),
        TxnOp::AddOffsets { .. } | TxnOp::End { .. } | TxnOp::List(_) => TxnReply::Done(code),
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
