//! The fields of the coordinators' own records (offsets, group metadata, transaction state):
//! big-endian integers and length-prefixed strings and bytes, every read checked against the
//! bytes left, so a truncated or corrupt record is an error, never a panic.

use bytes::{Buf, BufMut, Bytes, BytesMut};

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

/// A u16-length string (ids and names: short, never null).
pub fn put_str(out: &mut BytesMut, s: &str) {
    out.put_u16(u16::try_from(s.len()).expect("ids, names and topics are short"));
    out.put_slice(s.as_bytes());
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
            out.put_i16(i16::try_from(s.len()).expect("ids and names are short"));
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

/// i32-length bytes (Kafka's BYTES).
pub fn put_bytes(out: &mut BytesMut, b: &Bytes) {
    out.put_i32(i32::try_from(b.len()).expect("metadata fits a request"));
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

    #[test]
    fn negative_lengths_and_bad_utf8_are_malformed() {
        let mut buf = Bytes::from_static(b"\xff\xff\xff\xfe");
        assert_eq!(get_bytes(&mut buf), Err(Malformed));
        let mut buf = Bytes::from_static(b"\x00\x02\xc3\x28");
        assert_eq!(get_str(&mut buf), Err(Malformed));
    }
}
