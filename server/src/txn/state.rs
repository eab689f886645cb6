//! One transactional id's metadata and its transitions (Kafka's `TransactionMetadata`), pure:
//! no runtime, no I/O. Callers pass the time; each transition returns the metadata to make
//! durable, and the coordinator installs it only once the state log holds it.
//!
//! ```text
//!                 AddPartitions/AddOffsets                 EndTxn(commit)
//!   Empty ───────────────────────────────▶ Ongoing ──────────────────────▶ PrepareCommit
//!   CompleteCommit ─┘   (start_ms = now)     │  │ EndTxn(abort), timeout,         │ markers
//!   CompleteAbort ──┘                        │  └ InitProducerId (epoch fenced)   ▼ written
//!        ▲  ▲                                ▼                              CompleteCommit
//!        │  └──────── markers written ── PrepareAbort
//!        └── InitProducerId (epoch + 1, or a new producer id once the epoch is exhausted)
//! ```
//! The decision of a transaction is the durable Prepare record: from then on its markers are
//! written to every partition (and its offsets to every group) even across a crash.
//! Validation order and error codes follow Kafka's `TransactionCoordinator`.

use std::collections::BTreeSet;

use rill_protocol::ErrorCode;
use rill_types::{DurationMs, TimestampMs, TopicPartition};

use super::{ProducerEpoch, ProducerId};

/// An epoch at or above this is exhausted: the next InitProducerId hands out a new producer id
/// (Kafka's `isEpochExhausted`, Short.MaxValue - 1; the fence of a timed-out transaction may
/// still take it to Short.MaxValue).
pub const EPOCH_EXHAUSTED: ProducerEpoch = ProducerEpoch(i16::MAX - 1);

/// Where a transactional id is in its lifecycle (Kafka's names; Dead is a deleted entry).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction since the producer (re)initialized.
    Empty,
    /// Partitions or offsets were added: a transaction is open.
    Ongoing,
    /// The commit is decided; markers are being written.
    PrepareCommit,
    /// The abort is decided; markers are being written.
    PrepareAbort,
    /// The last transaction committed and its markers are written.
    CompleteCommit,
    /// The last transaction aborted and its markers are written.
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name (DescribeTransactions, ListTransactions).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// Every state, in the order of its wire code in the state log.
    pub const ALL: [TxnState; 6] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ];

    /// Whether a decision was made whose markers may not all be written yet.
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// Whether no transaction is open or being ended (a new one may start).
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// The durable metadata of one transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The producer id in use.
    pub producer_id: ProducerId,
    /// The producer id before the last rotation (a retried InitProducerId may still name it).
    pub last_producer_id: ProducerId,
    /// The current epoch; older epochs are fenced.
    pub producer_epoch: ProducerEpoch,
    /// The epoch before the last InitProducerId bump (KIP-360 retries), else -1.
    pub last_producer_epoch: ProducerEpoch,
    /// `transaction.timeout.ms` of the producer: an open transaction older than this is aborted.
    pub timeout_ms: i32,
    /// Lifecycle state.
    pub state: TxnState,
    /// Partitions in the current (or being ended) transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// Consumer groups whose offsets are in the current transaction (AddOffsetsToTxn).
    pub groups: BTreeSet<String>,
    /// When the current transaction began ([`TimestampMs::NONE`]: none).
    pub start_ms: TimestampMs,
    /// When the metadata last changed (expiration counts from here).
    pub last_update_ms: TimestampMs,
}

impl TxnMetadata {
    fn transit(&self, state: TxnState, now_ms: TimestampMs) -> TxnMetadata {
        TxnMetadata {
            state,
            last_update_ms: now_ms,
            ..self.clone()
        }
    }

    /// The marker this Prepare metadata writes.
    pub fn commits(&self) -> bool {
        assert!(self.state.is_prepare());
        self.state == TxnState::PrepareCommit
    }
}

/// What InitProducerId does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitPlan {
    /// Persist this metadata and answer with its producer id and epoch.
    Ready(TxnMetadata),
    /// A transaction is open: persist this PrepareAbort (epoch bumped, fencing the producer
    /// that opened it), write its markers, then InitProducerId runs again.
    FenceOpen(TxnMetadata),
}

/// What EndTxn does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndPlan {
    /// A retry of an EndTxn that already completed: answer success, change nothing.
    AlreadyDone,
    /// Persist this Prepare metadata (the decision), then write its markers.
    Prepare(TxnMetadata),
}

/// The client's expected (producer id, epoch) of InitProducerId v3+ (KIP-360).
pub type Expected = Option<(ProducerId, ProducerEpoch)>;

/// InitProducerId for a transactional id (`current` is its metadata, if any). `new_id`
/// allocates a producer id when one is needed.
pub fn init(
    current: Option<&TxnMetadata>,
    timeout_ms: i32,
    expected: Expected,
    now_ms: TimestampMs,
    new_id: &mut dyn FnMut() -> Result<ProducerId, ErrorCode>,
) -> Result<InitPlan, ErrorCode> {
    let fresh;
    let m = match current {
        Some(m) => m,
        None => {
            fresh = TxnMetadata {
                producer_id: new_id()?,
                last_producer_id: ProducerId::NONE,
                producer_epoch: ProducerEpoch::NONE,
                last_producer_epoch: ProducerEpoch::NONE,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                groups: BTreeSet::new(),
                start_ms: TimestampMs::NONE,
                last_update_ms: now_ms,
            };
            &fresh
        }
    };
    let exhausted = |epoch: ProducerEpoch| epoch >= EPOCH_EXHAUSTED;
    let valid = |(pid, epoch): (ProducerId, ProducerEpoch)| {
        m.producer_epoch == ProducerEpoch::NONE
            || pid == m.producer_id
            || (pid == m.last_producer_id && exhausted(epoch))
    };
    if !expected.is_none_or(valid) {
        return Err(ErrorCode::ProducerFenced);
    }
    match m.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => Err(ErrorCode::ConcurrentTransactions),
        TxnState::Ongoing => Ok(InitPlan::FenceOpen(fence(m, now_ms))),
        _ if exhausted(m.producer_epoch) && expected.is_none_or(|(_, e)| e == m.producer_epoch) => {
            let recorded = if expected.is_some() {
                m.producer_epoch
            } else {
                ProducerEpoch::NONE
            };
            Ok(InitPlan::Ready(TxnMetadata {
                producer_id: new_id()?,
                last_producer_id: m.producer_id,
                producer_epoch: ProducerEpoch(0),
                last_producer_epoch: recorded,
                ..reset(m, timeout_ms, now_ms)
            }))
        }
        _ => {
            let (epoch, last) = bumped_epochs(m, expected.map(|(_, e)| e))?;
            Ok(InitPlan::Ready(TxnMetadata {
                producer_epoch: epoch,
                last_producer_epoch: last,
                ..reset(m, timeout_ms, now_ms)
            }))
        }
    }
}

/// `m` with no transaction: Empty, no partitions, the new timeout.
fn reset(m: &TxnMetadata, timeout_ms: i32, now_ms: TimestampMs) -> TxnMetadata {
    TxnMetadata {
        timeout_ms,
        partitions: BTreeSet::new(),
        groups: BTreeSet::new(),
        start_ms: TimestampMs::NONE,
        ..m.transit(TxnState::Empty, now_ms)
    }
}

/// The (epoch, last epoch) an InitProducerId leaves: bumped, or unchanged for a retry of a
/// bump that succeeded (KIP-360), else fenced.
fn bumped_epochs(
    m: &TxnMetadata,
    expected: Option<ProducerEpoch>,
) -> Result<(ProducerEpoch, ProducerEpoch), ErrorCode> {
    let bumped = ProducerEpoch(m.producer_epoch.0 + 1);
    match expected {
        None => Ok((bumped, ProducerEpoch::NONE)),
        Some(e) if m.producer_epoch == ProducerEpoch::NONE || e == m.producer_epoch => {
            Ok((bumped, m.producer_epoch))
        }
        Some(e) if e == m.last_producer_epoch => Ok((m.producer_epoch, m.last_producer_epoch)),
        Some(_) => Err(ErrorCode::ProducerFenced),
    }
}

/// The open transaction of `m` aborted with its epoch bumped, so that the producer that opened
/// it is fenced (InitProducerId by a new instance, a timeout).
pub fn fence(m: &TxnMetadata, now_ms: TimestampMs) -> TxnMetadata {
    assert_eq!(m.state, TxnState::Ongoing);
    assert!(
        m.producer_epoch.0 < i16::MAX,
        "fencing would overflow the epoch"
    );
    TxnMetadata {
        producer_epoch: ProducerEpoch(m.producer_epoch.0 + 1),
        last_producer_epoch: ProducerEpoch::NONE,
        ..m.transit(TxnState::PrepareAbort, now_ms)
    }
}

/// Checks that `(pid, epoch)` is the producer of `m` and that no decision is being carried out.
fn check_producer(m: &TxnMetadata, pid: ProducerId, epoch: ProducerEpoch) -> Result<(), ErrorCode> {
    if m.producer_id != pid {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if m.producer_epoch != epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    if m.state.is_prepare() {
        return Err(ErrorCode::ConcurrentTransactions);
    }
    Ok(())
}

/// AddPartitionsToTxn / AddOffsetsToTxn: `None` when everything is in the transaction already
/// (nothing to persist).
pub fn add(
    m: &TxnMetadata,
    pid: ProducerId,
    epoch: ProducerEpoch,
    partitions: &[TopicPartition],
    groups: &[String],
    now_ms: TimestampMs,
) -> Result<Option<TxnMetadata>, ErrorCode> {
    check_producer(m, pid, epoch)?;
    let known = partitions.iter().all(|p| m.partitions.contains(p))
        && groups.iter().all(|g| m.groups.contains(g));
    if m.state == TxnState::Ongoing && known {
        return Ok(None);
    }
    let mut next = m.transit(TxnState::Ongoing, now_ms);
    if m.state.is_idle() {
        next.start_ms = now_ms;
    }
    next.partitions.extend(partitions.iter().cloned());
    next.groups.extend(groups.iter().cloned());
    Ok(Some(next))
}

/// The verify-only AddPartitionsToTxn of KIP-890 (a partition leader asking before the first
/// transactional append): for each partition, whether it is in the transaction.
pub fn verify(
    m: &TxnMetadata,
    pid: ProducerId,
    epoch: ProducerEpoch,
    partitions: &[TopicPartition],
) -> Result<Vec<bool>, ErrorCode> {
    check_producer(m, pid, epoch)?;
    // A group's offsets partition is in the transaction once the group is (AddOffsetsToTxn),
    // as Kafka adds it: a group coordinator on another broker verifies TxnOffsetCommit so.
    let offsets_of_a_group = |tp: &TopicPartition| {
        tp.topic == crate::group::OFFSETS_TOPIC
            && m.state == TxnState::Ongoing
            && m.groups
                .iter()
                .any(|g| crate::group::offsets_partition(g) == tp.partition)
    };
    Ok(partitions
        .iter()
        .map(|p| m.partitions.contains(p) || offsets_of_a_group(p))
        .collect())
}

/// Whether `group`'s offsets may be committed in the transaction of `(pid, epoch)`.
pub fn verify_group(
    m: &TxnMetadata,
    pid: ProducerId,
    epoch: ProducerEpoch,
    group: &str,
) -> Result<bool, ErrorCode> {
    check_producer(m, pid, epoch)?;
    Ok(m.state == TxnState::Ongoing && m.groups.contains(group))
}

/// EndTxn from the client (transactions V1: the epoch must be the current one).
pub fn end(
    m: &TxnMetadata,
    pid: ProducerId,
    epoch: ProducerEpoch,
    commit: bool,
    now_ms: TimestampMs,
) -> Result<EndPlan, ErrorCode> {
    if m.producer_id != pid {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if m.producer_epoch != epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    match (m.state, commit) {
        (TxnState::Ongoing, true) => {
            Ok(EndPlan::Prepare(m.transit(TxnState::PrepareCommit, now_ms)))
        }
        (TxnState::Ongoing, false) => {
            Ok(EndPlan::Prepare(m.transit(TxnState::PrepareAbort, now_ms)))
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
            Ok(EndPlan::AlreadyDone)
        }
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Err(ErrorCode::ConcurrentTransactions)
        }
        _ => Err(ErrorCode::InvalidTxnState),
    }
}

/// The markers of a Prepare are all written: CompleteCommit or CompleteAbort, nothing left in
/// the transaction.
pub fn complete(m: &TxnMetadata, now_ms: TimestampMs) -> TxnMetadata {
    let state = if m.commits() {
        TxnState::CompleteCommit
    } else {
        TxnState::CompleteAbort
    };
    TxnMetadata {
        partitions: BTreeSet::new(),
        groups: BTreeSet::new(),
        ..m.transit(state, now_ms)
    }
}

/// Whether `m`'s open transaction has outlived its timeout at `now_ms`.
pub fn timed_out(m: &TxnMetadata, now_ms: TimestampMs) -> bool {
    m.state == TxnState::Ongoing
        && now_ms.saturating_since(m.start_ms) > DurationMs::from(m.timeout_ms)
}

/// Whether `m` may be forgotten (`transactional.id.expiration.ms` without a change, and no
/// transaction in progress).
pub fn expired(m: &TxnMetadata, now_ms: TimestampMs, expiration_ms: DurationMs) -> bool {
    m.state.is_idle() && now_ms.saturating_since(m.last_update_ms) >= expiration_ms
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
