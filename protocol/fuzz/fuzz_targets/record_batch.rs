//! Record batch decoding: split, validate (length, magic, CRC), decompress with a cap and
//! parse every record of arbitrary bytes, and the Produce check (`ValidatedBatch`). CRC is
//! recomputed for half the inputs so the fuzzer also reaches record parsing and decompression.
#![no_main]
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use rill_protocol::record::header::{write_crc, BATCH_HEADER_BYTES};
use rill_protocol::record::{batches, RecordBatchView, RecordIter, ValidatedBatch};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut buf = BytesMut::from(rest);
    if mode & 1 == 1 && buf.len() >= BATCH_HEADER_BYTES {
        write_crc(&mut buf);
    }
    let _ = ValidatedBatch::new(buf.clone(), 1 << 20);
    let blob: Bytes = buf.freeze();
    for view in batches(blob.clone()).flatten() {
        let _ = view.validate_records(1 << 20);
        let _ = view.records().map(Iterator::count);
    }
    if let Ok(view) = RecordBatchView::new(&blob[..]) {
        let _ = view.check_crc();
    }
    let _ = RecordIter::new(&blob, i32::from(mode)).count();
});
