//! Transactions in a partition log: markers, the last stable offset, aborted transactions.
//!
//! - [`PartitionLog::append_marker`] writes a COMMIT/ABORT control batch for a producer (the
//!   coordinator's decision, already durable in the transaction state log). An ABORT of an
//!   open transaction adds an entry to the active segment's `.txnindex`.
//! - [`PartitionLog::last_stable_offset`] (LSO): read_committed consumers read below it. Kafka's
//!   rule: the smallest first offset among open transactions and among closed transactions
//!   whose marker is not yet below the high watermark, capped by the high watermark:
//!   ```text
//!   log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset
//!   ```
//!   A transaction's records only become visible to read_committed consumers once its marker
//!   is as durable as the records (below the high watermark).
//! - [`PartitionLog::aborted_transactions`]: what a read_committed fetch of `[from, upper)`
//!   returns beside its records, so the consumer can drop aborted records.
//!
//! The active segment's aborted transactions are in memory and written to its `.txnindex` with
//! each index checkpoint and when it is sealed; a sealed segment's file is read on demand.
//! Recovery keeps the checkpointed entries below its producer-state replay point and re-derives
//! the rest from the markers it replays (see `recovery.rs`).

use crate::batch::{meta_of_validated, BatchHeader, ValidatedBatch};
use crate::control::{encode_marker_batch, TxnMarker};
use crate::error::EngineError;
use crate::io::Storage;
use crate::partition_log::{AppendInfo, PartitionLog, ReadBatches};
use crate::producer_state::{CompletedTxn, ProducerView};
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::segment::txn_index::{AbortedTxn, TxnIndex};
use crate::segment::Segment;
use crate::small_file;
use crate::types::{Offset, TimestampMs};
use bytes::BytesMut;
use rill_types::ProducerId;

impl<S: Storage> PartitionLog<S> {
    /// Appends a transaction marker (a control batch) for `marker.producer_id`. Refused with
    /// `InvalidProducerEpoch` or `CoordinatorFenced` when an older producer or coordinator epoch
    /// than the last marker's. Buffered like [`Self::append`]; flush to make it durable.
    pub async fn append_marker(
        &mut self,
        marker: &TxnMarker,
        now: TimestampMs,
    ) -> Result<AppendInfo, EngineError> {
        self.check_usable()?;
        self.producers.check_marker(marker)?;
        let bytes = encode_marker_batch(marker, now);
        let batch = ValidatedBatch::new(BytesMut::from(&bytes[..]), usize::MAX)
            .expect("a marker batch is built valid");
        let sent = meta_of_validated(&batch)?;
        assert!(sent.control.is_some(), "a marker is a control batch");
        self.append_checked(batch, sent, now).await
    }

    /// Read_committed consumers read below this offset (see the module doc).
    pub fn last_stable_offset(&self) -> Offset {
        let lso = self.positions.last_stable();
        debug_assert_eq!(
            lso,
            self.compute_last_stable(),
            "refreshed after every change"
        );
        lso
    }

    /// Sets the positions' last stable offset from the open transactions (after every change
    /// of the high watermark, the log start or the transactions).
    pub(crate) fn refresh_last_stable(&mut self) {
        self.prune_unstable_markers();
        let lso = self.compute_last_stable();
        self.positions.set_last_stable(lso);
    }

    fn compute_last_stable(&self) -> Offset {
        let hw = self.positions.high_watermark();
        let open = self.producers.first_open_txn_offset();
        let unstable = self
            .unstable_markers
            .iter()
            .filter(|(marker, _)| *marker >= hw)
            .map(|(_, first)| *first)
            .min();
        let lso = [Some(hw), open, unstable]
            .into_iter()
            .flatten()
            .min()
            .expect("hw is always there")
            .max(self.positions.log_start());
        assert!(lso <= hw, "last stable offset above the high watermark");
        lso
    }

    /// Forgets closed transactions whose marker the high watermark has passed.
    pub(crate) fn prune_unstable_markers(&mut self) {
        let hw = self.positions.high_watermark();
        self.unstable_markers.retain(|(marker, _)| *marker >= hw);
    }

    /// What a read_committed fetch returns: whole batches from the one containing `from`, below
    /// the last stable offset, up to `max_bytes` (at least one batch if any); and the aborted
    /// transactions among them (overlapping `[from, end of the last batch)`).
    pub async fn read_committed(
        &mut self,
        from: Offset,
        max_bytes: usize,
    ) -> Result<(ReadBatches, Vec<AbortedTxn>), EngineError> {
        let limit = self.last_stable_offset();
        let read = self.read_below(from, max_bytes, limit).await?;
        let aborted = match read.chunks.last().and_then(|c| offset_after(c)) {
            Some(upper) => self.aborted_transactions(from, upper).await?,
            None => Vec::new(),
        };
        Ok((read, aborted))
    }

    /// Whether `producer_id` has an open transaction here.
    pub fn has_open_txn(&self, producer_id: ProducerId) -> bool {
        self.producers.has_open_txn(producer_id)
    }

    /// Every producer this partition knows (DescribeProducers).
    pub fn producers(&self) -> Vec<ProducerView> {
        self.producers.views()
    }

    /// Notes a transaction a marker just closed: it stays unstable until the marker is below
    /// the high watermark; an abort gets a `.txnindex` entry in the active segment.
    pub(crate) fn note_completed_txn(&mut self, txn: CompletedTxn) {
        self.unstable_markers
            .push_back((txn.last_offset, txn.first_offset));
        self.prune_unstable_markers();
        if txn.aborted {
            let entry = self.aborted_entry(&txn);
            let active = self.active_mut();
            active.txn_index.push(entry);
            active.txn_first_offset_min = active.txn_index.first_offset_min();
        }
    }

    /// The `.txnindex` entry of an aborted transaction; its last stable offset is the first
    /// offset of the earliest transaction still open after it, else the offset after the marker.
    pub(crate) fn aborted_entry(&self, txn: &CompletedTxn) -> AbortedTxn {
        assert!(txn.aborted);
        let after = txn.last_offset.plus(1);
        AbortedTxn {
            producer_id: txn.producer_id,
            first_offset: txn.first_offset,
            last_offset: txn.last_offset,
            last_stable_offset: self
                .producers
                .first_open_txn_offset()
                .map_or(after, |o| o.min(after)),
        }
    }

    /// The aborted transactions a read_committed fetch returning `[from, upper)` must report:
    /// every entry with `last_offset >= from` and `first_offset < upper`, from the segment
    /// holding `from` onward (sealed segments' files are read only if their summary says they
    /// may hold one). In marker order.
    pub async fn aborted_transactions(
        &mut self,
        from: Offset,
        upper: Offset,
    ) -> Result<Vec<AbortedTxn>, EngineError> {
        self.check_usable()?;
        let mut out = Vec::new();
        if upper <= from {
            return Ok(out);
        }
        let from = from.max(self.positions.log_start());
        let first = self.segment_index_for(from);
        let last = self.segments.len() - 1;
        for i in first..=last {
            let segment = &self.segments[i];
            if segment.txn_first_offset_min.is_none_or(|min| min >= upper) {
                continue;
            }
            if i == last {
                out.extend(segment.txn_index.overlapping(from, upper));
                continue;
            }
            let index = self.read_txn_index_file(segment).await?;
            out.extend(index.overlapping(from, upper));
        }
        Ok(out)
    }

    /// A sealed segment's `.txnindex` from disk (empty when there is no file). A file that no
    /// longer decodes is a storage error here; recovery rebuilds damaged files at open.
    async fn read_txn_index_file(
        &self,
        segment: &Segment<S::File>,
    ) -> Result<TxnIndex, EngineError> {
        let path = self
            .dir
            .join(segment_file_name(segment.base, FileKind::TxnIndex));
        let bytes = small_file::read_whole(&*self.storage, &path).await?;
        let Some(bytes) = bytes else {
            return Ok(TxnIndex::default());
        };
        TxnIndex::decode(&bytes, segment.base, segment.next_offset)
            .ok_or_else(|| EngineError::Layout(format!("{} does not decode", path.display())))
    }

    /// Writes `segment`'s in-memory aborted transactions to its `.txnindex`, or removes the
    /// file when there are none (atomic replacement: the file is always whole).
    pub(crate) async fn write_txn_index(
        &self,
        segment: &Segment<S::File>,
    ) -> Result<(), EngineError> {
        let name = segment_file_name(segment.base, FileKind::TxnIndex);
        if segment.txn_index.is_empty() {
            let path = self.dir.join(&name);
            if self.storage.exists(&path).await? {
                self.storage.remove_file(&path).await?;
            }
            return Ok(());
        }
        let bytes = segment.txn_index.encode();
        small_file::write_atomic(&*self.storage, &self.dir, &name, &bytes).await?;
        Ok(())
    }
}

/// The offset after the last whole batch of a chunk of batches back to back (headers only:
/// the read already validated them).
fn offset_after(chunk: &[u8]) -> Option<Offset> {
    let mut pos = 0;
    let mut next = None;
    while let Some(header) = chunk.get(pos..).and_then(BatchHeader::view) {
        let total = header.total_bytes()?;
        if total == 0 || pos + total > chunk.len() {
            break;
        }
        next = Some(header.last().plus(1));
        pos += total;
    }
    next
}
