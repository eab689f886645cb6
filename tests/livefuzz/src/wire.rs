//! Kafka's primitive encodings, written by hand so that any of them can be made to lie: a
//! string or array length that is null, negative, one off or huge while the bytes that follow
//! are the true ones. (The typed codec, `kafka_protocol`, only writes the truth.)

/// How a length prefix misstates the bytes after it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Lie {
    /// The true length.
    None,
    /// -1 (null), whether or not the field is nullable.
    Null,
    /// A negative length other than -1.
    Negative,
    /// One more than the bytes that follow.
    PlusOne,
    /// One fewer.
    MinusOne,
    /// 0 with the bytes still following.
    Zero,
    /// The largest length the encoding can express.
    Huge,
}

impl Lie {
    /// Every lie, for choosing one.
    pub const ALL: [Lie; 6] = [
        Lie::Null,
        Lie::Negative,
        Lie::PlusOne,
        Lie::MinusOne,
        Lie::Zero,
        Lie::Huge,
    ];

    /// The length to write for `len` true bytes (-1 is null), in a field whose largest length is
    /// `max`.
    fn apply(self, len: i64, max: i64) -> i64 {
        match self {
            Lie::None => len,
            Lie::Null => -1,
            Lie::Negative => -2 - (len % 1000),
            Lie::PlusOne => len + 1,
            Lie::MinusOne => len - 1,
            Lie::Zero => 0,
            Lie::Huge => max,
        }
    }
}

/// A growing request body.
#[derive(Default, Debug, Clone)]
pub struct Wire {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Wire {
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// A big-endian integer of `bytes` bytes (1, 2, 4 or 8), truncated from `v`.
    pub fn int(&mut self, v: i64, bytes: usize) {
        debug_assert!(matches!(bytes, 1 | 2 | 4 | 8));
        self.buf.extend_from_slice(&v.to_be_bytes()[8 - bytes..]);
    }

    /// Raw bytes.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Kafka's UNSIGNED_VARINT.
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// The length prefix of a string (INT16, or compact: UNSIGNED_VARINT of length + 1).
    pub fn string_len(&mut self, len: Option<usize>, compact: bool, lie: Lie) {
        let truth = len.map_or(-1, |n| n as i64);
        if compact {
            self.compact_len(lie.apply(truth, i64::from(i32::MAX)));
        } else {
            self.int(lie.apply(truth, i64::from(i16::MAX)), 2);
        }
    }

    /// The length prefix of bytes or an array (INT32, or compact: UNSIGNED_VARINT of n + 1).
    pub fn block_len(&mut self, len: Option<usize>, compact: bool, lie: Lie) {
        let truth = len.map_or(-1, |n| n as i64);
        if compact {
            self.compact_len(lie.apply(truth, i64::from(i32::MAX)));
        } else {
            self.int(lie.apply(truth, i64::from(i32::MAX)), 4);
        }
    }

    /// A compact length: n + 1 as an unsigned varint, 0 for null; a negative lie other than
    /// null becomes the largest varint (what a reader would see as a negative i32).
    fn compact_len(&mut self, n: i64) {
        let v = match n {
            -1 => 0,
            n if n < -1 => u32::MAX,
            n => u32::try_from(n + 1).unwrap_or(u32::MAX),
        };
        self.uvarint(v);
    }

    /// A string (or null) with its prefix.
    pub fn string(&mut self, s: Option<&[u8]>, compact: bool, lie: Lie) {
        self.string_len(s.map(<[u8]>::len), compact, lie);
        if let Some(s) = s {
            self.raw(s);
        }
    }

    /// Bytes (or null) with their prefix.
    pub fn bytes(&mut self, b: Option<&[u8]>, compact: bool, lie: Lie) {
        self.block_len(b.map(<[u8]>::len), compact, lie);
        if let Some(b) = b {
            self.raw(b);
        }
    }
}

/// The whole frame: size prefix and body.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as i32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_compact_lengths() {
        let mut w = Wire::default();
        w.uvarint(300);
        assert_eq!(w.buf, [0xac, 0x02]);
        let mut w = Wire::default();
        w.string(Some(b"ab"), true, Lie::None);
        assert_eq!(w.buf, [3, b'a', b'b']);
        let mut w = Wire::default();
        w.string(None, true, Lie::None);
        assert_eq!(w.buf, [0]);
    }

    #[test]
    fn lies_change_only_the_prefix() {
        let mut w = Wire::default();
        w.string(Some(b"abc"), false, Lie::Null);
        assert_eq!(w.buf, [0xff, 0xff, b'a', b'b', b'c']);
        let mut w = Wire::default();
        w.bytes(Some(b"x"), false, Lie::Huge);
        assert_eq!(w.buf, [0x7f, 0xff, 0xff, 0xff, b'x']);
        let mut w = Wire::default();
        w.block_len(Some(2), true, Lie::Negative);
        assert_eq!(w.buf, [0xff, 0xff, 0xff, 0xff, 0x0f]);
    }

    #[test]
    fn int_truncates_big_endian() {
        let mut w = Wire::default();
        w.int(-2, 2);
        w.int(0x0102_0304, 4);
        assert_eq!(w.buf, [0xff, 0xfe, 1, 2, 3, 4]);
        assert_eq!(frame(&[9]), [0, 0, 0, 1, 9]);
    }
}
