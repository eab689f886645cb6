//! Batch-level tests against batches encoded by an independent implementation
//! (`kafka_protocol::records::RecordBatchEncoder`).

use bytes::{Bytes, BytesMut};

use super::*;
use crate::kafka_protocol::indexmap::IndexMap;
use crate::kafka_protocol::protocol::StrBytes;
use crate::kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as KpTimestampType,
};

const CAP: usize = 1 << 20;

fn kp_record(i: i64, key: Option<&'static [u8]>) -> KpRecord {
    let mut headers = IndexMap::new();
    headers.insert(
        StrBytes::from_static_str("h"),
        Some(Bytes::from_static(b"v")),
    );
    KpRecord {
        transactional: false,
        control: false,
        partition_leader_epoch: 0,
        producer_id: 42,
        producer_epoch: 1,
        timestamp_type: KpTimestampType::Creation,
        offset: i,
        sequence: i as i32,
        timestamp: 1_700_000_000_000 + i,
        key: key.map(Bytes::from_static),
        value: Some(Bytes::from(format!("value-{i}"))),
        headers,
        delete_horizon: false,
    }
}

/// One encoded batch of `n` records with `compression`.
pub(crate) fn encoded_batch(n: i64, compression: KpCompression) -> BytesMut {
    let records: Vec<_> = (0..n).map(|i| kp_record(i, Some(b"key"))).collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    buf
}

#[test]
fn uncompressed_batch_fields_and_records() {
    let buf = encoded_batch(3, KpCompression::None);
    let view = RecordBatchView::validate(&buf[..]).unwrap();
    assert_eq!(view.record_count(), 3);
    assert_eq!(view.last_offset_delta(), 2);
    assert_eq!(view.producer_id().0, 42);
    assert_eq!(view.base_sequence().0, 0);
    assert_eq!(view.base_timestamp().0, 1_700_000_000_000);
    assert_eq!(view.max_timestamp().0, 1_700_000_000_002);
    assert_eq!(view.attributes().compression(), Ok(Compression::None));
    let records: Vec<_> = view.records().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records[2].offset_delta, 2);
    assert_eq!(records[1].value, Some(&b"value-1"[..]));
    assert_eq!(records[0].headers[0].key, b"h");
    view.validate_records(CAP).unwrap();
}

#[test]
fn every_codec_validates_and_decompresses() {
    for codec in [
        KpCompression::Gzip,
        KpCompression::Snappy,
        KpCompression::Lz4,
        KpCompression::Zstd,
    ] {
        let buf = encoded_batch(5, codec);
        let view = RecordBatchView::validate(&buf[..]).unwrap();
        assert_ne!(
            view.attributes().compression(),
            Ok(Compression::None),
            "{codec:?}"
        );
        view.validate_records(CAP)
            .unwrap_or_else(|e| panic!("{codec:?}: {e}"));
        assert!(
            view.records().is_err(),
            "compressed batches are not iterated in place"
        );
        assert!(view.validate_records(10).is_err(), "{codec:?} cap");
    }
}

#[test]
fn rewrites_keep_crc_valid() {
    let mut buf = encoded_batch(2, KpCompression::None);
    let mut view = RecordBatchView::validate(&mut buf[..]).unwrap();
    view.set_base_offset(rill_types::Offset(1_000));
    view.set_partition_leader_epoch(rill_types::LeaderEpoch(7));
    assert_eq!(view.base_offset().0, 1_000);
    assert_eq!(view.last_offset().0, 1_001);
    assert_eq!(view.partition_leader_epoch().0, 7);
    view.check_crc().unwrap();
}

#[test]
fn every_single_bit_flip_in_crc_range_is_caught() {
    let buf = encoded_batch(2, KpCompression::None);
    for pos in header::CRC_START..buf.len() {
        let mut bad = buf.clone();
        bad[pos] ^= 0x10;
        let err = RecordBatchView::validate(&bad[..]).unwrap_err();
        assert!(
            matches!(err, BatchError::CrcMismatch { .. }),
            "byte {pos}: {err}"
        );
        assert_eq!(err.error_code(), crate::ErrorCode::CorruptMessage);
    }
}

#[test]
fn length_and_magic_errors() {
    let buf = encoded_batch(1, KpCompression::None);
    assert!(matches!(
        RecordBatchView::new(&buf[..buf.len() - 1]),
        Err(BatchError::Truncated { .. })
    ));
    let mut longer = buf.to_vec();
    longer.push(0);
    assert!(matches!(
        RecordBatchView::new(&longer[..]),
        Err(BatchError::TrailingBytes { extra: 1 })
    ));
    let mut magic = buf.to_vec();
    magic[header::MAGIC_OFFSET] = 1;
    assert!(matches!(
        RecordBatchView::new(&magic[..]),
        Err(BatchError::UnsupportedMagic { magic: 1 })
    ));
    let mut short_len = buf.to_vec();
    short_len[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        RecordBatchView::new(&short_len[..]),
        Err(BatchError::InvalidLength { .. })
    ));
    assert!(RecordBatchView::new(&[0u8; 5][..]).is_err());
}

#[test]
fn blob_of_several_batches_splits_without_copy() {
    let mut blob = encoded_batch(2, KpCompression::None);
    blob.extend_from_slice(&encoded_batch(3, KpCompression::Zstd));
    let blob = blob.freeze();
    let views: Vec<_> = batches(blob.clone()).collect::<Result<_, _>>().unwrap();
    assert_eq!(views.len(), 2);
    assert_eq!(views[1].record_count(), 3);
    assert_eq!(
        views[0].as_bytes().as_ptr(),
        blob.as_ptr(),
        "slices share the buffer"
    );
    let cut = blob.slice(..blob.len() - 3);
    let results: Vec<_> = batches(cut).collect();
    assert_eq!(results.len(), 2);
    assert!(matches!(results[1], Err(BatchError::Truncated { .. })));
}

#[test]
fn single_batch_is_one_whole_batch_and_nothing_after_it() {
    let mut blob = encoded_batch(2, KpCompression::None);
    let first_len = blob.len();
    blob.extend_from_slice(&encoded_batch(3, KpCompression::Zstd));
    let blob = blob.freeze();
    let one = single_batch(blob.slice(..first_len)).unwrap();
    assert_eq!(one.as_ptr(), blob.as_ptr(), "a part of the same buffer");
    assert_eq!(RecordBatchView::validate(one).unwrap().record_count(), 2);
    // BytesMut splits the same way: the writable part the Produce handler stamps in place.
    let one = single_batch(BytesMut::from(&blob[..first_len])).unwrap();
    assert_eq!(one.len(), first_len);

    assert_eq!(single_batch(blob.clone()), Err(NotOneBatch::MoreThanOne));
    assert_eq!(single_batch(Bytes::new()), Err(NotOneBatch::Empty));
    // Batches are counted before either is looked into (Kafka's order): a corrupt first batch
    // with a second after it is still "more than one".
    let mut corrupt_first = BytesMut::from(&blob[..]);
    corrupt_first[first_len - 1] ^= 0xff;
    assert_eq!(single_batch(corrupt_first), Err(NotOneBatch::MoreThanOne));
    // A cut batch alone, and a few bytes, hold no batch for Kafka's reader.
    for (cut, available) in [
        (blob.slice(..first_len - 1), first_len - 1),
        (blob.slice(..1), 1),
        (blob.slice(..16), 16),
    ] {
        assert_eq!(single_batch(cut), Err(NotOneBatch::Cut { available }));
    }
    // A whole batch then a cut one (Kafka would drop it), or a few bytes.
    for extra in [1, 20, blob.len() - first_len - 1] {
        assert_eq!(
            single_batch(blob.slice(..first_len + extra)),
            Err(NotOneBatch::Trailing { extra })
        );
    }
    // Kafka's reader throws before it measures: batchLength below 14, magic outside 0..=2,
    // even on a batch cut short; then validateRecords refuses magic 0 and 1.
    let edited = |at: usize, bytes: &[u8], len: usize| {
        let mut b = BytesMut::from(&blob[..first_len]);
        b[at..at + bytes.len()].copy_from_slice(bytes);
        single_batch(b.split_to(len))
    };
    for length in [-1i32, 0, 13] {
        assert_eq!(
            edited(8, &length.to_be_bytes(), first_len),
            Err(NotOneBatch::Malformed(BatchError::InvalidLength {
                batch_length: length
            }))
        );
    }
    for (magic, len) in [(3i8, first_len), (-1, 20), (1, first_len), (0, first_len)] {
        assert_eq!(
            edited(16, &[magic as u8], len),
            Err(NotOneBatch::Malformed(BatchError::UnsupportedMagic {
                magic
            }))
        );
    }
    // A batchLength of 14..49 with its bytes present is a batch to Kafka's reader (the batch
    // checks refuse it); cut, it is none.
    assert!(edited(8, &14i32.to_be_bytes(), 26).is_ok());
    assert_eq!(
        edited(8, &14i32.to_be_bytes(), 25),
        Err(NotOneBatch::Cut { available: 25 })
    );
}
