//! Records inside a (decompressed) v2 batch, parsed in place with `nom`.
//!
//! Record layout (varints are zigzag, as in protobuf):
//!
//! ```text
//! length: varint            bytes of the record after this field
//! attributes: int8          unused, 0
//! timestampDelta: varlong   relative to the batch baseTimestamp
//! offsetDelta: varint       relative to the batch baseOffset
//! keyLength: varint, key    -1 = null key
//! valueLength: varint, value
//! headerCount: varint, then per header: keyLength varint, key (UTF-8), valueLength varint, value
//! ```
//!
//! Every length is checked against the bytes of the enclosing record before it is used; nothing
//! is preallocated from a count read off the wire.

use nom::bytes::complete::take;
use nom::number::complete::{be_i8, u8 as byte};
use nom::IResult;

use super::batch::BatchError;

/// One record, borrowing its key, value and headers from the batch buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// Record attributes (unused by Kafka, always 0).
    pub attributes: i8,
    /// Timestamp relative to the batch's baseTimestamp.
    pub timestamp_delta: i64,
    /// Offset relative to the batch's baseOffset.
    pub offset_delta: i32,
    /// Key, `None` when null (compaction needs one).
    pub key: Option<&'a [u8]>,
    /// Value, `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    /// Headers in order.
    pub headers: Vec<RecordHeader<'a>>,
}

/// One record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader<'a> {
    /// Header key (UTF-8 per spec; not checked here).
    pub key: &'a [u8],
    /// Header value, `None` when null.
    pub value: Option<&'a [u8]>,
}

/// Iterates `count` records over `input`; yields an error (then stops) on a malformed record,
/// a short count, or bytes left after the last record.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    input: &'a [u8],
    remaining: i32,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Iterates the records in `input`, expecting exactly `count` of them.
    pub fn new(input: &'a [u8], count: i32) -> Self {
        RecordIter {
            input,
            remaining: count,
            failed: false,
        }
    }

    fn fail(&mut self, reason: String) -> Option<Result<Record<'a>, BatchError>> {
        self.failed = true;
        Some(Err(BatchError::InvalidRecord { reason }))
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.remaining < 0 {
            return self.fail(format!("negative record count {}", self.remaining));
        }
        if self.remaining == 0 {
            if self.input.is_empty() {
                return None;
            }
            return self.fail(format!("{} bytes after the last record", self.input.len()));
        }
        match record(self.input) {
            Ok((rest, parsed)) => {
                self.input = rest;
                self.remaining -= 1;
                Some(Ok(parsed))
            }
            Err(e) => self.fail(format!("record {} left: {e}", self.remaining)),
        }
    }
}

/// Unsigned LEB128 of at most `max_bytes` bytes.
fn uvarint(max_bytes: u32) -> impl Fn(&[u8]) -> IResult<&[u8], u64> {
    move |mut input| {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let (rest, b) = byte(input)?;
            input = rest;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((input, value));
            }
        }
        Err(nom::Err::Error(nom::error::Error::new(
            input,
            nom::error::ErrorKind::TooLarge,
        )))
    }
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Zigzag varint (i32 range, at most 5 bytes).
pub fn varint(input: &[u8]) -> IResult<&[u8], i32> {
    let (rest, raw) = uvarint(5)(input)?;
    let value = zigzag(raw);
    let value = i32::try_from(value).map_err(|_| {
        nom::Err::Error(nom::error::Error::new(
            input,
            nom::error::ErrorKind::TooLarge,
        ))
    })?;
    Ok((rest, value))
}

/// Zigzag varlong (i64, at most 10 bytes).
pub fn varlong(input: &[u8]) -> IResult<&[u8], i64> {
    let (rest, raw) = uvarint(10)(input)?;
    Ok((rest, zigzag(raw)))
}

/// A varint-length-prefixed byte string; -1 = null.
fn nullable_bytes(input: &[u8]) -> IResult<&[u8], Option<&[u8]>> {
    let (input, len) = varint(input)?;
    match len {
        -1 => Ok((input, None)),
        n if n < -1 => Err(nom::Err::Error(nom::error::Error::new(
            input,
            nom::error::ErrorKind::Verify,
        ))),
        n => take(n as usize)(input).map(|(rest, b)| (rest, Some(b))),
    }
}

fn header(input: &[u8]) -> IResult<&[u8], RecordHeader<'_>> {
    let (input, key) = nullable_bytes(input)?;
    let key = key.ok_or_else(|| {
        nom::Err::Error(nom::error::Error::new(input, nom::error::ErrorKind::Verify))
    })?;
    let (input, value) = nullable_bytes(input)?;
    Ok((input, RecordHeader { key, value }))
}

/// One whole record: the outer length bounds every field inside it.
pub fn record(input: &[u8]) -> IResult<&[u8], Record<'_>> {
    let (rest, len) = varint(input)?;
    let len = usize::try_from(len).map_err(|_| {
        nom::Err::Error(nom::error::Error::new(input, nom::error::ErrorKind::Verify))
    })?;
    let (rest, body) = take(len)(rest)?;
    let (body, parsed) = record_body(body)?;
    if !body.is_empty() {
        return Err(nom::Err::Error(nom::error::Error::new(
            body,
            nom::error::ErrorKind::Eof,
        )));
    }
    Ok((rest, parsed))
}

fn record_body(input: &[u8]) -> IResult<&[u8], Record<'_>> {
    let (input, attributes) = be_i8(input)?;
    let (input, timestamp_delta) = varlong(input)?;
    let (input, offset_delta) = varint(input)?;
    let (input, key) = nullable_bytes(input)?;
    let (input, value) = nullable_bytes(input)?;
    let (mut input, header_count) = varint(input)?;
    if header_count < 0 || header_count as usize > input.len() {
        return Err(nom::Err::Error(nom::error::Error::new(
            input,
            nom::error::ErrorKind::Verify,
        )));
    }
    let mut headers = Vec::new();
    for _ in 0..header_count {
        let (rest, h) = header(input)?;
        headers.push(h);
        input = rest;
    }
    Ok((
        input,
        Record {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_varints() {
        assert_eq!(varint(&[0x00]), Ok((&[][..], 0)));
        assert_eq!(varint(&[0x01]), Ok((&[][..], -1)));
        assert_eq!(varint(&[0x02]), Ok((&[][..], 1)));
        assert_eq!(
            varint(&[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            Ok((&[][..], i32::MAX))
        );
        assert!(varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).is_err());
        assert!(varint(&[0x80]).is_err());
        assert_eq!(varlong(&[0x03]), Ok((&[][..], -2)));
    }

    #[test]
    fn record_with_null_key_and_header() {
        // attrs 0, ts +1, off 0, key null, value "hi", 1 header "k" -> "v"
        let body = [0u8, 2, 0, 1, 4, b'h', b'i', 2, 2, b'k', 2, b'v'];
        let mut input = vec![(body.len() as u8) << 1];
        input.extend_from_slice(&body);
        let (rest, r) = record(&input).unwrap();
        assert!(rest.is_empty());
        assert_eq!(r.timestamp_delta, 1);
        assert_eq!(r.key, None);
        assert_eq!(r.value, Some(&b"hi"[..]));
        assert_eq!(
            r.headers,
            vec![RecordHeader {
                key: b"k",
                value: Some(b"v")
            }]
        );
    }

    #[test]
    fn lying_lengths_are_errors() {
        assert!(record(&[0x7e, 0]).is_err(), "length 63 with 1 byte");
        assert!(record(&[0x01]).is_err(), "negative length");
        // header count claims 50 headers in 0 bytes
        let body = [0u8, 0, 0, 1, 1, 100];
        let mut input = vec![(body.len() as u8) << 1];
        input.extend_from_slice(&body);
        assert!(record(&input).is_err());
    }

    #[test]
    fn iterator_checks_count_and_trailing_bytes() {
        let one = [12u8, 0, 0, 0, 1, 1, 0];
        assert_eq!(RecordIter::new(&one, 1).filter(Result::is_ok).count(), 1);
        assert!(RecordIter::new(&one, 2).any(|r| r.is_err()));
        assert!(RecordIter::new(&one, 0).any(|r| r.is_err()));
        assert!(RecordIter::new(&one, -1).any(|r| r.is_err()));
    }
}
