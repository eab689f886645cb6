//! `rill dump-log FILE...`: what is in segment files, like Kafka's `kafka-dump-log.sh`.
//!
//! | file          | printed                                                             |
//! |---------------|---------------------------------------------------------------------|
//! | `.log`        | one line per batch: offsets, count, producer id/epoch/sequence,     |
//! |               | timestamps, compression, position, size, CRC validity; with         |
//! |               | `--print-records` one `|` line per record with its key and value    |
//! | `.index`      | `offset: O position: P` per entry, checked against the `.log` beside it |
//! | `.timeindex`  | `timestamp: T offset: O` per entry                                  |
//! | `.txnindex`   | one line per aborted transaction (Kafka's fields)                   |
//!
//! It reads any bytes without panicking: the walk stops at the first batch whose length cannot
//! be trusted (a zero tail of preallocated space is named as such), a batch with a bad CRC is
//! printed with `crcValid: false`, and records that do not decode are named, not printed.
//! Lengths read off the file are checked against the bytes left before anything is allocated.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use rill_engine::segment::file_name::{parse_segment_file_name, FileKind};
use rill_engine::segment::offset_index::{self, OffsetIndex};
use rill_engine::segment::time_index::{self, TimeIndex};
use rill_engine::segment::txn_index::TxnIndex;
use rill_engine::Offset;
use rill_protocol::record::{
    batch_size_bytes, Compression, Record, RecordBatchHeader, RecordBatchView, RecordIter,
    TimestampType, BATCH_HEADER_BYTES,
};

/// Bytes of a batch read before its length is known: baseOffset + batchLength.
const LENGTH_PREFIX_BYTES: usize = 12;
/// Largest records section decompressed for `--print-records` (a damaged or hostile batch
/// must not make the tool allocate without bound).
const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;
/// Bytes read at a time when checking that a tail is all zeros.
const ZERO_CHECK_BYTES: usize = 1 << 20;

/// What a dump found in one file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every byte made sense (a zero tail of preallocated space included).
    Clean,
    /// Something is damaged (bad CRC, bytes that are not a batch, a malformed index).
    Damaged,
}

/// Dumps one file to `out`, choosing the format from its extension.
pub fn dump_file(path: &Path, print_records: bool, out: &mut dyn Write) -> io::Result<Verdict> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let parsed = name.as_deref().and_then(parse_segment_file_name);
    let kind = parsed
        .map(|(_, kind)| kind)
        .or_else(|| match path.extension()?.to_str()? {
            "log" => Some(FileKind::Log),
            "index" => Some(FileKind::Index),
            "timeindex" => Some(FileKind::TimeIndex),
            "txnindex" => Some(FileKind::TxnIndex),
            _ => None,
        });
    let Some(kind) = kind else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a segment file (expected .log, .index, .timeindex or .txnindex)",
        ));
    };
    let base = parsed.map(|(base, _)| base);
    std::fs::metadata(path)?; // fail before printing anything for a file that is not there
    writeln!(out, "Dumping {}", path.display())?;
    match kind {
        FileKind::Log => dump_log(path, base, print_records, out),
        FileKind::Index => dump_offset_index(path, base, out),
        FileKind::TimeIndex => dump_time_index(path, base, out),
        FileKind::TxnIndex => dump_txn_index(path, base, out),
    }
}

/// Walks the batches of a `.log` file.
fn dump_log(
    path: &Path,
    base: Option<Offset>,
    print_records: bool,
    out: &mut dyn Write,
) -> io::Result<Verdict> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if let Some(base) = base {
        writeln!(out, "Log starting offset: {base}")?;
    }
    let mut verdict = Verdict::Clean;
    let mut pos = 0u64;
    while pos < len {
        let Some(batch) = read_batch(&file, pos, len, out)? else {
            return Ok(Verdict::Damaged);
        };
        if batch.is_empty() {
            break; // a zero tail, already described
        }
        let size = batch.len() as u64;
        match RecordBatchView::new(batch) {
            Ok(view) => {
                if !print_batch(&view, pos, out)? {
                    verdict = Verdict::Damaged;
                }
                if print_records {
                    print_records_of(&view, out)?;
                }
            }
            Err(e) => {
                writeln!(
                    out,
                    "position: {pos} not a batch: {e}; {} bytes not dumped",
                    len - pos
                )?;
                return Ok(Verdict::Damaged);
            }
        }
        pos += size;
    }
    Ok(verdict)
}

/// The whole batch at `pos`: `Some(empty)` if only zeros are left (described), `None` if the
/// bytes there cannot be a batch (described).
fn read_batch(file: &File, pos: u64, len: u64, out: &mut dyn Write) -> io::Result<Option<Vec<u8>>> {
    let left = len - pos;
    let mut prefix = vec![0u8; LENGTH_PREFIX_BYTES.min(left as usize)];
    file.read_exact_at(&mut prefix, pos)?;
    let size = match batch_size_bytes(&prefix) {
        Ok(size) if size as u64 <= left => size,
        other => {
            if all_zero(file, pos, len)? {
                writeln!(
                    out,
                    "position: {pos} zeros to the end ({left} bytes): preallocated, never written"
                )?;
                return Ok(Some(Vec::new()));
            }
            match other {
                Ok(size) => writeln!(out, "position: {pos} batch of {size} bytes runs past the end of the file ({left} bytes left): torn or truncated")?,
                Err(e) => writeln!(out, "position: {pos} not a batch: {e}; {left} bytes not dumped")?,
            }
            return Ok(None);
        }
    };
    let mut batch = vec![0u8; size];
    file.read_exact_at(&mut batch, pos)?;
    Ok(Some(batch))
}

/// Whether every byte from `pos` to `len` is zero.
fn all_zero(file: &File, mut pos: u64, len: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; ZERO_CHECK_BYTES];
    while pos < len {
        let n = ((len - pos) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

fn codec_name(view: &RecordBatchView<Vec<u8>>) -> String {
    match view.attributes().compression() {
        Ok(Compression::None) => "none".into(),
        Ok(Compression::Gzip) => "gzip".into(),
        Ok(Compression::Snappy) => "snappy".into(),
        Ok(Compression::Lz4) => "lz4".into(),
        Ok(Compression::Zstd) => "zstd".into(),
        Err(code) => format!("unknown({code})"),
    }
}

fn timestamp_type(view: &RecordBatchView<Vec<u8>>) -> &'static str {
    match view.attributes().timestamp_type() {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// One batch line; returns whether its CRC is valid. Offsets and sequences are computed
/// without overflow: baseOffset is outside the CRC, so damage there is printed, not trusted.
fn print_batch(view: &RecordBatchView<Vec<u8>>, pos: u64, out: &mut dyn Write) -> io::Result<bool> {
    let crc_valid = view.check_crc().is_ok();
    let delta = view.last_offset_delta();
    let base_sequence = view.base_sequence().0;
    let last_sequence = if base_sequence < 0 {
        -1
    } else {
        base_sequence.wrapping_add(delta)
    };
    let attributes = view.attributes();
    writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {base_sequence} lastSequence: {last_sequence} \
         producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} \
         position: {pos} timestampType: {} baseTimestamp: {} maxTimestamp: {} size: {} magic: 2 \
         compresscodec: {} crcValid: {crc_valid}",
        view.base_offset(),
        view.base_offset().0.saturating_add(i64::from(delta)),
        view.record_count(),
        view.producer_id(),
        view.producer_epoch(),
        view.partition_leader_epoch(),
        attributes.is_transactional(),
        attributes.is_control(),
        timestamp_type(view),
        view.base_timestamp(),
        view.max_timestamp(),
        view.size_bytes(),
        codec_name(view),
    )?;
    Ok(crc_valid)
}

/// One `|` line per record, or one line saying why the records do not decode.
fn print_records_of(view: &RecordBatchView<Vec<u8>>, out: &mut dyn Write) -> io::Result<()> {
    let decompressed;
    let records = match view.attributes().compression() {
        Ok(Compression::None) => view.records_bytes(),
        _ => match view.decompressed_records(DECOMPRESSED_BYTES_MAX) {
            Ok(bytes) => {
                decompressed = bytes;
                &decompressed[..]
            }
            Err(e) => return writeln!(out, "| records not decodable: {e}"),
        },
    };
    for record in RecordIter::new(records, view.record_count()) {
        match record {
            Ok(record) => print_record(view, &record, out)?,
            Err(e) => return writeln!(out, "| records not decodable: {e}"),
        }
    }
    Ok(())
}

fn print_record(
    view: &RecordBatchView<Vec<u8>>,
    record: &Record<'_>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let offset = view
        .base_offset()
        .0
        .saturating_add(i64::from(record.offset_delta));
    let timestamp = view
        .base_timestamp()
        .0
        .saturating_add(record.timestamp_delta);
    let sequence = match view.base_sequence().0 {
        s if s < 0 => -1,
        s => s.wrapping_add(record.offset_delta),
    };
    let size = |b: Option<&[u8]>| b.map_or(-1, |b| b.len() as i64);
    let header_keys: Vec<String> = record
        .headers
        .iter()
        .map(|h| printable(Some(h.key)))
        .collect();
    write!(
        out,
        "| offset: {offset} {}: {timestamp} keySize: {} valueSize: {} sequence: {sequence} headerKeys: [{}]",
        timestamp_type(view),
        size(record.key),
        size(record.value),
        header_keys.join(","),
    )?;
    if view.attributes().is_control() {
        return writeln!(out, " {}", control_record(record.key));
    }
    writeln!(
        out,
        " key: {} payload: {}",
        printable(record.key),
        printable(record.value)
    )
}

/// A control record's key is `[i16 version][i16 type]`: 0 ABORT, 1 COMMIT.
fn control_record(key: Option<&[u8]>) -> String {
    match key.and_then(|k| k.get(2..4)) {
        Some([0, 0]) => "endTxnMarker: ABORT".into(),
        Some([0, 1]) => "endTxnMarker: COMMIT".into(),
        _ => format!("controlKey: {}", printable(key)),
    }
}

/// Bytes as text: UTF-8 where valid, with control and invalid bytes escaped; `null` for none.
fn printable(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) => String::from_utf8_lossy(b).escape_debug().to_string(),
    }
}

/// The longest prefix of `bytes`, in whole entries of `entry_bytes`, that `decodes`: the
/// engine's own decoders say where an index stops making sense.
fn longest_valid_prefix<T>(
    bytes: &[u8],
    entry_bytes: usize,
    decodes: impl Fn(&[u8]) -> Option<T>,
) -> (T, usize) {
    let (mut good, mut bad) = (0usize, bytes.len() / entry_bytes + 1);
    // Invariant: `good` entries decode, `bad` entries do not (or exceed the file).
    while bad - good > 1 {
        let mid = (good + bad) / 2;
        if decodes(&bytes[..mid * entry_bytes]).is_some() {
            good = mid;
        } else {
            bad = mid;
        }
    }
    let index = decodes(&bytes[..good * entry_bytes]).expect("an empty prefix always decodes");
    (index, good)
}

fn dump_offset_index(
    path: &Path,
    base: Option<Offset>,
    out: &mut dyn Write,
) -> io::Result<Verdict> {
    let bytes = std::fs::read(path)?;
    let decode = |b: &[u8]| OffsetIndex::decode(b, u64::MAX);
    let (index, good) = longest_valid_prefix(&bytes, offset_index::ENTRY_BYTES, decode);
    let log = base.and_then(|_| File::open(path.with_extension("log")).ok());
    let mut verdict = Verdict::Clean;
    for &(rel, pos) in index.entries() {
        let offset = absolute(base, rel.0);
        write!(out, "offset: {offset} position: {}", pos.0)?;
        if let Some(log) = &log {
            if let Some(problem) = entry_mismatch(log, base, rel.0, pos.0) {
                verdict = Verdict::Damaged;
                write!(out, " MISMATCH: {problem}")?;
            }
        }
        writeln!(out)?;
    }
    Ok(verdict.min_with(index_tail(&bytes, good, offset_index::ENTRY_BYTES, out)?))
}

fn dump_time_index(path: &Path, base: Option<Offset>, out: &mut dyn Write) -> io::Result<Verdict> {
    let bytes = std::fs::read(path)?;
    let decode = |b: &[u8]| TimeIndex::decode(b, u64::MAX);
    let (index, good) = longest_valid_prefix(&bytes, time_index::ENTRY_BYTES, decode);
    for &(ts, rel) in index.entries() {
        writeln!(out, "timestamp: {} offset: {}", ts.0, absolute(base, rel.0))?;
    }
    index_tail(&bytes, good, time_index::ENTRY_BYTES, out)
}

/// Prints the aborted transactions of a `.txnindex` (one line per entry, Kafka's fields).
fn dump_txn_index(path: &Path, base: Option<Offset>, out: &mut dyn Write) -> io::Result<Verdict> {
    let bytes = std::fs::read(path)?;
    let base = base.unwrap_or(Offset(0));
    let Some(index) = TxnIndex::decode(&bytes, base, Offset(i64::MAX)) else {
        writeln!(
            out,
            "damaged: {} bytes are not whole, ordered entries of this segment",
            bytes.len()
        )?;
        return Ok(Verdict::Damaged);
    };
    for e in index.entries() {
        writeln!(
            out,
            "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
            e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset
        )?;
    }
    Ok(Verdict::Clean)
}

/// Describes what follows the `good` entries that decode; `Damaged` if anything does.
fn index_tail(
    bytes: &[u8],
    good: usize,
    entry_bytes: usize,
    out: &mut dyn Write,
) -> io::Result<Verdict> {
    let rest = bytes.len() - good * entry_bytes;
    if rest == 0 {
        return Ok(Verdict::Clean);
    }
    if rest < entry_bytes {
        writeln!(out, "damaged: {rest} trailing bytes (a partial entry)")?;
    } else {
        writeln!(out, "damaged: entry {good} does not follow the one before it (entries must increase); {rest} bytes not dumped")?;
    }
    Ok(Verdict::Damaged)
}

/// The absolute offset of a relative one (relative, marked, if the file name gave no base).
fn absolute(base: Option<Offset>, rel: u32) -> String {
    match base {
        Some(base) => base.plus(i64::from(rel)).to_string(),
        None => format!("+{rel}"),
    }
}

/// Why an index entry does not name the batch at `pos` in `log`, if it does not.
fn entry_mismatch(log: &File, base: Option<Offset>, rel: u32, pos: u32) -> Option<String> {
    let want = base?.plus(i64::from(rel)).0;
    let mut header = [0u8; BATCH_HEADER_BYTES];
    if log.read_exact_at(&mut header, u64::from(pos)).is_err() {
        return Some("position is past the end of the .log".into());
    }
    let found = RecordBatchHeader::view(&header)
        .expect("a whole header")
        .base_offset
        .get();
    (found != want).then(|| format!("the .log has baseOffset {found} there"))
}

impl Verdict {
    /// The worse of two verdicts.
    fn min_with(self, other: Verdict) -> Verdict {
        if self == Verdict::Damaged || other == Verdict::Damaged {
            Verdict::Damaged
        } else {
            Verdict::Clean
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_protocol::record::{encode_plain_batch, PlainRecord};

    fn dump_bytes(name: &str, bytes: &[u8], print_records: bool) -> (Verdict, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut out = Vec::new();
        let verdict = dump_file(&path, print_records, &mut out).unwrap();
        (verdict, String::from_utf8(out).unwrap())
    }

    fn two_batches() -> Vec<u8> {
        let record = |k: &str, v: &str| PlainRecord {
            key: Some(k.as_bytes().to_vec().into()),
            value: Some(v.as_bytes().to_vec().into()),
            ..PlainRecord::default()
        };
        let mut first = encode_plain_batch([record("k1", "hello"), record("k2", "wor\nld")]);
        let mut second = encode_plain_batch([record("k3", "!")]);
        RecordBatchView::new(&mut second[..])
            .unwrap()
            .set_base_offset(rill_types::Offset(2));
        first.extend_from_slice(&second);
        let _ = &mut first;
        first.to_vec()
    }

    const LOG: &str = "00000000000000000000.log";

    #[test]
    fn batches_and_records_of_a_good_log() {
        let (verdict, text) = dump_bytes(LOG, &two_batches(), true);
        assert_eq!(verdict, Verdict::Clean, "{text}");
        assert!(
            text.contains("baseOffset: 0 lastOffset: 1 count: 2"),
            "{text}"
        );
        assert!(
            text.contains("baseOffset: 2 lastOffset: 2 count: 1"),
            "{text}"
        );
        assert!(text.contains("crcValid: true"));
        assert!(text.contains("| offset: 1 CreateTime: "), "{text}");
        assert!(text.contains("key: k2 payload: wor\\nld"), "{text}");
    }

    #[test]
    fn a_bad_crc_is_printed_and_the_zero_tail_named() {
        let mut bytes = two_batches();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        bytes.extend_from_slice(&[0u8; 5000]);
        let (verdict, text) = dump_bytes(LOG, &bytes, true);
        assert_eq!(verdict, Verdict::Damaged);
        assert!(text.contains("crcValid: false"), "{text}");
        assert!(text.contains("zeros to the end (5000 bytes)"), "{text}");
    }

    #[test]
    fn every_truncation_and_every_byte_flip_is_survived() {
        let good = two_batches();
        for cut in 0..good.len() {
            let _ = dump_bytes(LOG, &good[..cut], true);
        }
        for at in 0..good.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut bad = good.clone();
                bad[at] ^= flip;
                let _ = dump_bytes(LOG, &bad, true);
            }
        }
    }

    #[test]
    fn random_bytes_are_survived() {
        let mut rng = fastrand::Rng::with_seed(16);
        for _ in 0..300 {
            let mut bytes = two_batches();
            for _ in 0..rng.usize(1..6) {
                let at = rng.usize(..bytes.len());
                bytes[at] = rng.u8(..);
            }
            bytes.truncate(rng.usize(..=bytes.len()));
            let _ = dump_bytes(LOG, &bytes, true);
            let _ = dump_bytes("00000000000000000000.index", &bytes, false);
            let _ = dump_bytes("00000000000000000000.timeindex", &bytes, false);
        }
    }

    #[test]
    fn index_entries_and_their_damage() {
        let mut index = Vec::new();
        for (rel, pos) in [(0u32, 0u32), (10, 4096), (5, 8192)] {
            index.extend_from_slice(&rel.to_be_bytes());
            index.extend_from_slice(&pos.to_be_bytes());
        }
        let (verdict, text) = dump_bytes("00000000000000000100.index", &index, false);
        assert_eq!(verdict, Verdict::Damaged);
        assert!(
            text.contains("offset: 100 position: 0\noffset: 110 position: 4096\n"),
            "{text}"
        );
        assert!(text.contains("entry 2 does not follow"), "{text}");
        let (verdict, text) = dump_bytes("00000000000000000100.index", &index[..16], false);
        assert_eq!(verdict, Verdict::Clean, "{text}");
        let (_, text) = dump_bytes("00000000000000000100.timeindex", &[0u8; 13], false);
        assert!(
            text.contains("timestamp: 0 offset: 100\ndamaged: 1 trailing bytes"),
            "{text}"
        );
    }
}
