//! The batch `attributes` bit field.
//!
//! | bits | meaning                                               |
//! |------|-------------------------------------------------------|
//! | 0-2  | compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd  |
//! | 3    | timestamp type: 0 CreateTime, 1 LogAppendTime         |
//! | 4    | transactional                                         |
//! | 5    | control batch (transaction markers)                   |
//! | 6    | has delete horizon (compacted topics)                 |

/// Compression codec of a batch's records section.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Records stored as is.
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// Snappy, in xerial framing (Java clients) or raw (some others).
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard frame.
    Zstd,
}

/// How `maxTimestamp` was assigned.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker at append.
    LogAppendTime,
}

/// The attributes of a batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attributes(pub i16);

/// Bits 0-2: the compression codec.
pub const COMPRESSION_MASK: i16 = 0b111;
/// Bit 3: LogAppendTime.
pub const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
/// Bit 4: the batch belongs to a transaction.
pub const TRANSACTIONAL_BIT: i16 = 1 << 4;
/// Bit 5: a control batch (transaction markers).
pub const CONTROL_BIT: i16 = 1 << 5;
/// Bit 6: baseTimestamp holds the delete horizon.
pub const DELETE_HORIZON_BIT: i16 = 1 << 6;

impl Attributes {
    /// The codec, or `Err(code)` for the undefined codes 5-7.
    pub fn compression(self) -> Result<Compression, u8> {
        match self.0 & COMPRESSION_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(other as u8),
        }
    }

    /// CreateTime or LogAppendTime.
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & TIMESTAMP_TYPE_BIT == 0 {
            TimestampType::CreateTime
        } else {
            TimestampType::LogAppendTime
        }
    }

    /// Part of a transaction.
    pub fn is_transactional(self) -> bool {
        self.0 & TRANSACTIONAL_BIT != 0
    }

    /// A control batch (commit/abort marker), never delivered to applications.
    pub fn is_control(self) -> bool {
        self.0 & CONTROL_BIT != 0
    }

    /// baseTimestamp holds the delete horizon (compacted topics).
    pub fn has_delete_horizon(self) -> bool {
        self.0 & DELETE_HORIZON_BIT != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_decode() {
        assert_eq!(Attributes(0).compression(), Ok(Compression::None));
        assert_eq!(Attributes(4).compression(), Ok(Compression::Zstd));
        assert_eq!(Attributes(5).compression(), Err(5));
        assert_eq!(Attributes(0).timestamp_type(), TimestampType::CreateTime);
        assert_eq!(Attributes(8).timestamp_type(), TimestampType::LogAppendTime);
        let all = Attributes(0b111_1011);
        assert!(all.is_transactional() && all.is_control() && all.has_delete_horizon());
        assert_eq!(all.compression(), Ok(Compression::Lz4));
        assert!(!Attributes(0).is_transactional());
    }
}
