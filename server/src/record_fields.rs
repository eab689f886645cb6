//! The fields of the coordinators' own records (offsets, group metadata, transaction state):
//! big-endian integers and length-prefixed strings and bytes, every read checked against the
//! bytes left, so a truncated or corrupt record is an error, never a panic.
//!
//! Writers: every string a record stores is one of the values in the limits table
//! ([`rill_types::limits`]), which bounds them all by [`RECORD_STRING_BYTES_MAX`] (the wire
//! refuses longer strings before any handler runs, and the one broker-made id, the member id,
//! is cut to it). The writers assert that bound; a value the table lets through always fits.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_types::limits::RECORD_STRING_BYTES_MAX;

/// A field did not fit the bytes left, or a string was not UTF-8; each record module turns it
/// into its own error (`OffsetRecordError::Record`, `TxnRecordError::Record`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Whether `n` more bytes are there.
pub fn need(buf: &Bytes, n: usize) -> Result<(), Malformed> {
    if buf.remaining() < n {
        return Err(Malformed);
    }
    Ok(())
}

/// A u16-length string (ids and names: at most [`RECORD_STRING_BYTES_MAX`], never null).
pub fn put_str(out: &mut BytesMut, s: &str) {
    out.put_u16(record_string_len(s) as u16);
    out.put_slice(s.as_bytes());
}

/// The length of a string a record stores, asserted within the limits table's bound.
fn record_string_len(s: &str) -> i16 {
    assert!(
        s.len() <= RECORD_STRING_BYTES_MAX,
        "a {}-byte string reached a record writer: the limits table bounds them by {}",
        s.len(),
        RECORD_STRING_BYTES_MAX
    );
    s.len() as i16
}

/// Reads [`put_str`]'s string.
pub fn get_str(buf: &mut Bytes) -> Result<String, Malformed> {
    need(buf, 2)?;
    let len = buf.get_u16() as usize;
    take_utf8(buf, len)
}

/// An i16-length string, -1 for null (Kafka's nullable STRING).
pub fn put_nullable_str(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => {
            out.put_i16(record_string_len(s));
            out.put_slice(s.as_bytes());
        }
        None => out.put_i16(-1),
    }
}

/// Reads [`put_nullable_str`]'s string.
pub fn get_nullable_str(buf: &mut Bytes) -> Result<Option<String>, Malformed> {
    let len = get_i16(buf)?;
    if len < 0 {
        return Ok(None);
    }
    take_utf8(buf, len as usize).map(Some)
}

/// i32-length bytes (Kafka's BYTES): a member's subscription or assignment, each from one
/// request frame, which is smaller than 2 GiB (its size prefix is an i32).
pub fn put_bytes(out: &mut BytesMut, b: &Bytes) {
    assert!(b.len() <= i32::MAX as usize, "bytes from one request frame");
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

/// Reads [`put_bytes`]'s bytes (a negative length is malformed).
pub fn get_bytes(buf: &mut Bytes) -> Result<Bytes, Malformed> {
    let len = usize::try_from(get_i32(buf)?).map_err(|_| Malformed)?;
    need(buf, len)?;
    Ok(buf.split_to(len))
}

/// A big-endian i16.
pub fn get_i16(buf: &mut Bytes) -> Result<i16, Malformed> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

/// A big-endian i32.
pub fn get_i32(buf: &mut Bytes) -> Result<i32, Malformed> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

/// A big-endian i64.
pub fn get_i64(buf: &mut Bytes) -> Result<i64, Malformed> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}

fn take_utf8(buf: &mut Bytes, len: usize) -> Result<String, Malformed> {
    need(buf, len)?;
    String::from_utf8(buf.split_to(len).to_vec()).map_err(|_| Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_round_trips_and_every_truncation_is_malformed() {
        let mut out = BytesMut::new();
        put_str(&mut out, "group");
        put_nullable_str(&mut out, Some("leader"));
        put_nullable_str(&mut out, None);
        put_bytes(&mut out, &Bytes::from_static(b"\x00\x01"));
        out.put_i16(-2);
        out.put_i32(7);
        out.put_i64(-9);
        let whole = out.freeze();
        let read = |mut buf: Bytes| -> Result<(), Malformed> {
            assert_eq!(get_str(&mut buf)?, "group");
            assert_eq!(get_nullable_str(&mut buf)?.as_deref(), Some("leader"));
            assert_eq!(get_nullable_str(&mut buf)?, None);
            assert_eq!(&get_bytes(&mut buf)?[..], b"\x00\x01");
            assert_eq!(get_i16(&mut buf)?, -2);
            assert_eq!(get_i32(&mut buf)?, 7);
            assert_eq!(get_i64(&mut buf)?, -9);
            assert!(!buf.has_remaining());
            Ok(())
        };
        assert_eq!(read(whole.clone()), Ok(()));
        for cut in 0..whole.len() {
            assert_eq!(read(whole.slice(..cut)), Err(Malformed), "cut at {cut}");
        }
    }

    /// Issue 26: the longest string the limits table admits is written and read back by both
    /// string writers; the u16 writer used to be the only bound, behind an `expect`.
    #[test]
    fn the_longest_admitted_string_round_trips_in_both_formats() {
        let longest = "x".repeat(RECORD_STRING_BYTES_MAX);
        let mut out = BytesMut::new();
        put_str(&mut out, &longest);
        put_nullable_str(&mut out, Some(&longest));
        let mut buf = out.freeze();
        assert_eq!(get_str(&mut buf).unwrap(), longest);
        assert_eq!(
            get_nullable_str(&mut buf).unwrap().as_deref(),
            Some(&*longest)
        );
        assert!(!buf.has_remaining());
    }

    #[test]
    #[should_panic(expected = "reached a record writer")]
    fn a_string_over_the_table_is_a_broken_invariant() {
        put_nullable_str(
            &mut BytesMut::new(),
            Some(&"x".repeat(RECORD_STRING_BYTES_MAX + 1)),
        );
    }

    #[test]
    fn negative_lengths_and_bad_utf8_are_malformed() {
        let mut buf = Bytes::from_static(b"\xff\xff\xff\xfe");
        assert_eq!(get_bytes(&mut buf), Err(Malformed));
        let mut buf = Bytes::from_static(b"\x00\x02\xc3\x28");
        assert_eq!(get_str(&mut buf), Err(Malformed));
    }
}
