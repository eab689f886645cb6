//! Control batches: the COMMIT/ABORT markers a transaction coordinator writes to each partition
//! of a transaction, in Kafka's format so every client can read them.
//!
//! A marker is a v2 batch with the transactional and control attribute bits set (never
//! compressed), the producer's id and epoch, baseSequence -1, and exactly one record:
//! ```text
//! record:  length varint | attributes i8 (0) | timestampDelta varlong (0) | offsetDelta varint (0)
//!          keyLength varint (4)   | key   = [version i16 = 0][type i16: 0 ABORT, 1 COMMIT]
//!          valueLength varint (6) | value = [version i16 = 0][coordinatorEpoch i32]
//!          headerCount varint (0)
//! ```
//! Varints are zigzag (Kafka's record encoding). The engine never decodes ordinary records; this
//! file reads the one field it must know to recover a partition's transactions: the control type.

use crate::batch::{BatchHeader, HEADER_BYTES, LOG_OVERHEAD_BYTES};
use crate::types::TimestampMs;
use rill_types::batch::attributes::COMPRESSION_MASK;
use rill_types::batch::write_crc;
use rill_types::{ProducerEpoch, ProducerId};

/// Attribute bits (defined once, in `rill-types`).
pub use rill_types::batch::attributes::{CONTROL_BIT, TRANSACTIONAL_BIT};

/// Bytes of the one record of a marker batch, length prefix included.
const MARKER_RECORD_BYTES: usize = 17;

/// What a control batch says (Kafka's `ControlRecordType`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// The producer's open transaction is aborted: its records are to be skipped.
    Abort,
    /// The producer's open transaction is committed.
    Commit,
    /// Another control type (KRaft's leader-change and snapshot records); no transaction effect.
    Other(i16),
}

impl ControlType {
    fn from_wire(code: i16) -> ControlType {
        match code {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            other => ControlType::Other(other),
        }
    }

    fn wire(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
            ControlType::Other(code) => code,
        }
    }
}

/// A control batch's record as the log keeps it: its type and, for markers, the epoch of the
/// coordinator that wrote it (-1 for other control types).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Control {
    /// What the control record says.
    pub kind: ControlType,
    /// `coordinatorEpoch` from an ABORT/COMMIT record's value; -1 otherwise.
    pub coordinator_epoch: i32,
}

/// A transaction marker to append: who it is for and what it decides.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    /// The transactional producer.
    pub producer_id: ProducerId,
    /// The producer epoch the coordinator ends the transaction with (may be a bumped epoch
    /// that fences the producer that opened it).
    pub producer_epoch: ProducerEpoch,
    /// Commit or abort.
    pub commit: bool,
    /// The coordinator's epoch: markers from an older coordinator are refused.
    pub coordinator_epoch: i32,
}

/// Encodes `marker` as one control batch (baseOffset 0: the log assigns it).
pub fn encode_marker_batch(marker: &TxnMarker, now: TimestampMs) -> Vec<u8> {
    assert!(marker.producer_id.is_some(), "markers belong to a producer");
    let kind = if marker.commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    let mut record = Vec::with_capacity(MARKER_RECORD_BYTES);
    put_varint(&mut record, 16); // the record's length after this field
    record.extend_from_slice(&[0, 0, 0]); // attributes, timestampDelta, offsetDelta
    put_varint(&mut record, 4);
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&kind.wire().to_be_bytes());
    put_varint(&mut record, 6);
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    record.push(0); // no headers
    assert_eq!(record.len(), MARKER_RECORD_BYTES);
    let total = HEADER_BYTES + record.len();
    let mut buf = vec![0u8; HEADER_BYTES];
    buf.extend_from_slice(&record);
    let h = BatchHeader::view_mut(&mut buf).expect("sized");
    h.batch_length
        .set(i32::try_from(total - LOG_OVERHEAD_BYTES).expect("tiny"));
    h.partition_leader_epoch.set(-1);
    h.magic = 2;
    h.attributes.set(TRANSACTIONAL_BIT | CONTROL_BIT);
    h.last_offset_delta.set(0);
    h.base_timestamp.set(now.0);
    h.max_timestamp.set(now.0);
    h.producer_id.set(marker.producer_id.0);
    h.producer_epoch.set(marker.producer_epoch.0);
    h.base_sequence.set(-1);
    h.records_count.set(1);
    write_crc(&mut buf);
    buf
}

/// The control record of a whole, CRC-checked control batch `batch` (its first record's key,
/// and for markers the coordinator epoch in its value). `Err` names what is malformed.
pub fn control_type(batch: &[u8]) -> Result<Control, &'static str> {
    let header = BatchHeader::view(batch).ok_or("shorter than a batch header")?;
    if header.attributes.get() & COMPRESSION_MASK != 0 {
        return Err("compressed control batch");
    }
    if header.records_count.get() < 1 {
        return Err("control batch without a record");
    }
    let mut r = VarReader {
        bytes: &batch[HEADER_BYTES..],
    };
    let _length = r.varint()?;
    let _attributes = r.take(1)?;
    let _timestamp_delta = r.varlong()?;
    let _offset_delta = r.varint()?;
    let key_len = r.varint()?;
    if key_len < 4 {
        return Err("control record key shorter than 4 bytes");
    }
    let key = r.take(key_len as usize)?;
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version < 0 {
        return Err("negative control record key version");
    }
    let kind = ControlType::from_wire(i16::from_be_bytes([key[2], key[3]]));
    if matches!(kind, ControlType::Other(_)) {
        return Ok(Control {
            kind,
            coordinator_epoch: -1,
        });
    }
    let value_len = r.varint()?;
    if value_len < 6 {
        return Err("transaction marker value shorter than 6 bytes");
    }
    let value = r.take(value_len as usize)?;
    Ok(Control {
        kind,
        coordinator_epoch: i32::from_be_bytes(value[2..6].try_into().expect("4 bytes")),
    })
}

/// Sets the transactional attribute bit of a whole batch and recomputes its CRC (tests and
/// benches play transactional producers with it).
#[doc(hidden)]
pub fn mark_transactional(batch: &mut [u8]) {
    let h = BatchHeader::view_mut(batch).expect("a batch header");
    let attributes = h.attributes.get() | TRANSACTIONAL_BIT;
    h.attributes.set(attributes);
    write_crc(batch);
}

/// Appends `v` as a zigzag varint.
fn put_varint(out: &mut Vec<u8>, v: i32) {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Reads zigzag varints and byte runs, bounds-checked.
struct VarReader<'a> {
    bytes: &'a [u8],
}

impl<'a> VarReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.bytes.len() < n {
            return Err("control record runs past the batch");
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// A zigzag varint of at most `max_bytes` bytes.
    fn zigzag(&mut self, max_bytes: u32) -> Result<i64, &'static str> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let b = self.take(1)?[0];
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        Err("varint too long")
    }

    fn varint(&mut self) -> Result<i32, &'static str> {
        let v = self.zigzag(5)?;
        i32::try_from(v).map_err(|_| "varint out of range")
    }

    fn varlong(&mut self) -> Result<i64, &'static str> {
        self.zigzag(10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{meta_of_validated, ValidatedBatch};
    use bytes::BytesMut;

    fn marker(commit: bool) -> TxnMarker {
        TxnMarker {
            producer_id: ProducerId(42),
            producer_epoch: ProducerEpoch(3),
            commit,
            coordinator_epoch: 7,
        }
    }

    #[test]
    fn marker_batches_validate_and_say_what_they_are() {
        for commit in [true, false] {
            let b = encode_marker_batch(&marker(commit), TimestampMs(99));
            let batch = ValidatedBatch::new(BytesMut::from(&b[..]), 1 << 20).unwrap();
            let meta = meta_of_validated(&batch).unwrap();
            let want = if commit {
                ControlType::Commit
            } else {
                ControlType::Abort
            };
            let control = Control {
                kind: want,
                coordinator_epoch: 7,
            };
            assert_eq!(meta.control, Some(control));
            assert!(meta.transactional);
            assert_eq!(
                (meta.producer_id, meta.producer_epoch),
                (ProducerId(42), ProducerEpoch(3))
            );
            assert_eq!(meta.base_sequence, rill_types::Sequence::NONE);
            assert_eq!(b.len(), HEADER_BYTES + MARKER_RECORD_BYTES);
        }
    }

    #[test]
    fn varints_round_trip_through_the_reader() {
        for v in [0, 1, -1, 63, 64, -64, -65, 300, i32::MAX, i32::MIN] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(VarReader { bytes: &buf }.varint(), Ok(v));
        }
    }

    #[test]
    fn truncated_control_records_are_errors_not_panics() {
        let b = encode_marker_batch(&marker(true), TimestampMs(1));
        for cut in 0..b.len() {
            let _ = control_type(&b[..cut]);
        }
        assert!(control_type(&b[..HEADER_BYTES + 5]).is_err());
    }
}
