//! A view over one whole record batch v2 in a byte buffer: header fields in place (typed),
//! validation (length, magic, CRC-32C, compression code), record iteration, and the two rewrites
//! a broker makes at append time. The header layout and the checks are `rill-types`' (one
//! definition for the wire and the engine); this view adds what needs the record codecs.

use rill_types::batch::{check_crc, check_shape, RecordBatchHeader, BATCH_HEADER_BYTES};
use rill_types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence, TimestampMs};

pub use rill_types::batch::{batch_size_bytes, BatchError};

use super::attributes::{Attributes, Compression};
use super::compression::decompress;
use super::records::RecordIter;

/// One whole v2 record batch, viewed in place. `B` is any byte buffer (`&[u8]`, `Bytes`,
/// `BytesMut`, `Vec<u8>`); the setters need a mutable one.
#[derive(Debug, Clone)]
pub struct RecordBatchView<B> {
    buf: B,
}

impl<B: AsRef<[u8]>> RecordBatchView<B> {
    /// Wraps `buf`, which must hold exactly one batch: checks size and magic (not the CRC).
    pub fn new(buf: B) -> Result<Self, BatchError> {
        let bytes = buf.as_ref();
        let size = check_shape(bytes)?;
        if bytes.len() > size {
            return Err(BatchError::TrailingBytes {
                extra: bytes.len() - size,
            });
        }
        assert!(bytes.len() >= BATCH_HEADER_BYTES);
        Ok(RecordBatchView { buf })
    }

    /// [`new`](Self::new) plus the CRC check: what a broker runs before appending.
    pub fn validate(buf: B) -> Result<Self, BatchError> {
        let view = Self::new(buf)?;
        view.check_crc()?;
        view.attributes()
            .compression()
            .map_err(|code| BatchError::UnknownCompression { code })?;
        Ok(view)
    }

    /// The header, read in place.
    pub fn header(&self) -> &RecordBatchHeader {
        RecordBatchHeader::view(self.buf.as_ref()).expect("checked in new")
    }

    /// The whole batch's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> B {
        self.buf
    }

    /// Bytes on the wire/disk: batchLength + 12.
    pub fn size_bytes(&self) -> usize {
        self.buf.as_ref().len()
    }

    /// Recomputes CRC-32C over attributes..end and compares with the stored one.
    pub fn check_crc(&self) -> Result<(), BatchError> {
        check_crc(self.buf.as_ref())
    }

    /// First offset.
    pub fn base_offset(&self) -> Offset {
        self.header().base()
    }

    /// Last offset: base_offset + lastOffsetDelta.
    pub fn last_offset(&self) -> Offset {
        self.header().last()
    }

    /// lastOffsetDelta.
    pub fn last_offset_delta(&self) -> i32 {
        self.header().last_offset_delta.get()
    }

    /// partitionLeaderEpoch.
    pub fn partition_leader_epoch(&self) -> LeaderEpoch {
        self.header().leader_epoch()
    }

    /// Decoded attributes.
    pub fn attributes(&self) -> Attributes {
        self.header().attrs()
    }

    /// baseTimestamp.
    pub fn base_timestamp(&self) -> TimestampMs {
        self.header().base_ts()
    }

    /// maxTimestamp.
    pub fn max_timestamp(&self) -> TimestampMs {
        self.header().max_ts()
    }

    /// producerId (`ProducerId::NONE` if not idempotent).
    pub fn producer_id(&self) -> ProducerId {
        self.header().producer().0
    }

    /// producerEpoch.
    pub fn producer_epoch(&self) -> ProducerEpoch {
        self.header().producer().1
    }

    /// baseSequence.
    pub fn base_sequence(&self) -> Sequence {
        self.header().producer().2
    }

    /// recordsCount.
    pub fn record_count(&self) -> i32 {
        self.header().records_count.get()
    }

    /// The records section (compressed when attributes say so).
    pub fn records_bytes(&self) -> &[u8] {
        &self.buf.as_ref()[BATCH_HEADER_BYTES..]
    }

    /// Iterates the records of an uncompressed batch in place; for compressed batches use
    /// [`decompressed_records`](Self::decompressed_records) and [`RecordIter::new`].
    pub fn records(&self) -> Result<RecordIter<'_>, BatchError> {
        match self.attributes().compression() {
            Ok(Compression::None) => Ok(RecordIter::new(self.records_bytes(), self.record_count())),
            Ok(_) => Err(BatchError::InvalidRecord {
                reason: "batch is compressed".into(),
            }),
            Err(code) => Err(BatchError::UnknownCompression { code }),
        }
    }

    /// The records section decompressed (validation only: never on the append path), at most
    /// `decompressed_bytes_max` bytes.
    pub fn decompressed_records(
        &self,
        decompressed_bytes_max: usize,
    ) -> Result<Vec<u8>, BatchError> {
        let codec = self
            .attributes()
            .compression()
            .map_err(|code| BatchError::UnknownCompression { code })?;
        decompress(codec, self.records_bytes(), decompressed_bytes_max)
            .map_err(|reason| BatchError::Decompression { reason })
    }

    /// Full content check: decompress if needed and parse every record, checking the count
    /// and offset deltas. Costly (`O(records)`); for validation, tests and tools.
    pub fn validate_records(&self, decompressed_bytes_max: usize) -> Result<(), BatchError> {
        let decompressed;
        let records = match self.attributes().compression() {
            Ok(Compression::None) => self.records_bytes(),
            _ => {
                decompressed = self.decompressed_records(decompressed_bytes_max)?;
                &decompressed[..]
            }
        };
        let mut last_delta = -1;
        for record in RecordIter::new(records, self.record_count()) {
            let record = record?;
            if record.offset_delta <= last_delta || record.offset_delta > self.last_offset_delta() {
                let reason = format!("offset delta {} out of order", record.offset_delta);
                return Err(BatchError::InvalidRecord { reason });
            }
            last_delta = record.offset_delta;
        }
        Ok(())
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> RecordBatchView<B> {
    fn header_mut(&mut self) -> &mut RecordBatchHeader {
        RecordBatchHeader::view_mut(self.buf.as_mut()).expect("checked in new")
    }

    /// Assigns the batch's first offset (a rewrite outside the CRC). CRC unaffected.
    pub fn set_base_offset(&mut self, base_offset: Offset) {
        assert!(base_offset.0 >= 0, "offsets are non-negative");
        self.header_mut().base_offset.set(base_offset.0);
    }

    /// Stamps the leader epoch. CRC unaffected.
    pub fn set_partition_leader_epoch(&mut self, epoch: LeaderEpoch) {
        self.header_mut().partition_leader_epoch.set(epoch.0);
    }
}
