//! Transaction state in a cluster: written to the replicated `__transaction_state` partitions
//! and loaded by the broker that leads each one (the design: `crate::internal_topics::replicated`). The
//! leader epoch a partition was loaded at is the coordinator epoch its markers carry, so a
//! partition refuses the markers of a deposed coordinator once it saw the new one's.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use rill_engine::io::{Clock, Storage};
use rill_protocol::ErrorCode;

use super::coordinator::TxnCoordinator;
use super::journal::{apply, TxnJournal};
use super::record::{decode_chunk, encode_batch, TxnRecord};
use super::state::TxnMetadata;
use super::txn_partition;
use crate::internal_topics::replicated::{LoadedChunk, ReplicatedLog};

/// The state-log partitions of one shard, on the replicated internal topic.
pub struct ReplicatedTxnLog<S: Storage> {
    log: ReplicatedLog<S>,
    clock: Rc<dyn Clock>,
}

impl<S: Storage + 'static> ReplicatedTxnLog<S> {
    /// The journal over `log` (the shard's state-log partitions).
    pub fn new(log: ReplicatedLog<S>, clock: Rc<dyn Clock>) -> Self {
        ReplicatedTxnLog { log, clock }
    }

    /// Loads the partitions this broker now leads into `coordinator`, drops those it no longer
    /// leads (call every coordinator tick); `true` if it loaded any (whose decisions the
    /// coordinator should then finish without waiting for its next tick).
    pub async fn follow<J: TxnJournal>(&self, coordinator: &TxnCoordinator<J>) -> bool {
        let loaded = Cell::new(false);
        let install = |partition, chunks| {
            let (live, records) = live_of(chunks)?;
            coordinator.load_partition(partition, live.into_iter().collect());
            loaded.set(true);
            Ok(records)
        };
        let unload = |partition| coordinator.unload_partition(partition);
        self.log.follow(install, unload).await;
        loaded.get()
    }
}

/// The live entries of loaded batches, and how many records were read.
pub fn live_of(chunks: Vec<LoadedChunk>) -> Result<(HashMap<String, TxnMetadata>, u64), String> {
    let mut live = HashMap::new();
    let mut records = 0;
    for (from, chunk) in chunks {
        let decoded = decode_chunk(chunk).map_err(|e| e.to_string())?;
        for (_, record) in decoded.into_iter().filter(|(o, _)| *o >= from.0) {
            records += 1;
            apply(&mut live, record);
        }
    }
    Ok((live, records))
}

impl<S: Storage + 'static> TxnJournal for ReplicatedTxnLog<S> {
    async fn append(&self, record: TxnRecord) -> Result<(), ErrorCode> {
        let partition = txn_partition(&record.transactional_id);
        let batch = encode_batch(std::slice::from_ref(&record), self.clock.now());
        self.log.append(partition, batch).await
    }

    fn ready(&self, transactional_id: &str) -> Result<(), ErrorCode> {
        self.log.ready(txn_partition(transactional_id))
    }

    fn coordinator_epoch(&self, transactional_id: &str) -> i32 {
        let partition = txn_partition(transactional_id);
        self.log.loaded_epoch(partition).map_or(0, |epoch| epoch.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::TxnState;
    use crate::txn::{ProducerEpoch, ProducerId};
    use rill_types::{Offset, TimestampMs};

    fn record(id: &str, epoch: Option<i16>) -> TxnRecord {
        TxnRecord {
            transactional_id: id.into(),
            metadata: epoch.map(|e| TxnMetadata {
                producer_id: ProducerId(7),
                last_producer_id: ProducerId::NONE,
                producer_epoch: ProducerEpoch(e),
                last_producer_epoch: ProducerEpoch::NONE,
                timeout_ms: 1000,
                state: TxnState::Ongoing,
                partitions: Default::default(),
                groups: Default::default(),
                start_ms: TimestampMs(5),
                last_update_ms: TimestampMs(6),
            }),
        }
    }

    #[test]
    fn a_load_keeps_the_latest_state_of_each_id() {
        let batch = encode_batch(
            &[
                record("a", Some(0)),
                record("b", Some(0)),
                record("a", Some(1)),
            ],
            TimestampMs(1),
        );
        let mut later =
            bytes::BytesMut::from(encode_batch(&[record("b", None)], TimestampMs(2)).as_bytes());
        later[..8].copy_from_slice(&3i64.to_be_bytes()); // base offset 3
        let first = bytes::Bytes::copy_from_slice(batch.as_bytes());
        let chunks = vec![
            (Offset(0), first.clone()),
            (Offset(3), later.freeze()),
            (Offset(4), first),
        ];
        let (live, records) = live_of(chunks).unwrap();
        assert_eq!(records, 4, "the repeated batch precedes its read: skipped");
        assert_eq!(live.len(), 1);
        assert_eq!(live["a"].producer_epoch, ProducerEpoch(1));
    }
}
