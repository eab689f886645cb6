//! Per-partition log configuration, named after Kafka's topic configs with units last.

/// When appended bytes must reach the disk (Kafka's `flush.messages` / `flush.ms`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// Durable before an `acks=all` ack: the high watermark only moves on `fdatasync`.
    #[default]
    EveryAppend,
    /// Flush when either bound is reached; consumers may see bytes a crash could lose.
    Interval {
        /// Flush after this many unflushed messages (Kafka `flush.messages`).
        messages: Option<u64>,
        /// Flush when the oldest unflushed append is this old (Kafka `flush.ms`).
        ms: Option<u64>,
    },
}

/// Configuration of one partition log. `Default` gives Kafka's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll the active segment when it would exceed this size (`segment.bytes`).
    pub segment_bytes_max: u64,
    /// Roll the active segment when its first append is older than this (`segment.ms`).
    pub segment_ms_max: Option<u64>,
    /// Bytes of log between two sparse index entries (`index.interval.bytes`).
    pub index_interval_bytes: u32,
    /// Durability policy (`flush.messages` / `flush.ms`).
    pub flush: FlushPolicy,
    /// Delete sealed segments whose max timestamp is older than this (`retention.ms`).
    pub retention_ms: Option<u64>,
    /// Delete oldest sealed segments while the log is larger than this (`retention.bytes`).
    pub retention_bytes: Option<u64>,
    /// Bound of the in-memory tail batch cache that serves consumers at the tail.
    pub batch_cache_bytes_max: usize,
    /// Largest accepted record batch (`max.message.bytes`): the Produce handler checks it when it
    /// builds a `ValidatedBatch`; the engine appends what it is given.
    pub message_bytes_max: u32,
    /// Roll the active segment when its offset index would grow past this (`segment.index.bytes`;
    /// 8 bytes per entry, as Kafka's `.index`).
    pub index_bytes_max: u64,
    /// Up to this much is taken off `segment_ms_max` per segment (`segment.jitter.ms`), so the
    /// segments of many partitions do not all roll at once.
    pub segment_jitter_ms: u64,
    /// Stamp each appended batch with the append time (`message.timestamp.type=LogAppendTime`).
    pub log_append_time: bool,
    /// Producers whose idempotence state the log keeps at most (`rill.partition.producers.max`):
    /// past it, the least recently written without an open transaction are forgotten.
    pub producers_max: usize,
}

/// The default [`LogConfig::producers_max`].
pub const PRODUCERS_MAX_DEFAULT: usize = 10_000;

/// Kafka's default `segment.bytes`: 1 GiB.
pub const SEGMENT_BYTES_MAX_DEFAULT: u64 = 1 << 30;
/// Kafka's default `segment.index.bytes`: 10 MiB.
pub const INDEX_BYTES_MAX_DEFAULT: u64 = 10 << 20;
/// Kafka's default `segment.ms` and `retention.ms`: 7 days.
pub const WEEK_MS: u64 = 7 * 24 * 60 * 60 * 1000;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes_max: SEGMENT_BYTES_MAX_DEFAULT,
            segment_ms_max: Some(WEEK_MS),
            index_interval_bytes: 4096,
            flush: FlushPolicy::EveryAppend,
            retention_ms: Some(WEEK_MS),
            retention_bytes: None,
            batch_cache_bytes_max: 4 << 20,
            message_bytes_max: (1 << 20) + 12,
            index_bytes_max: INDEX_BYTES_MAX_DEFAULT,
            segment_jitter_ms: 0,
            log_append_time: false,
            producers_max: PRODUCERS_MAX_DEFAULT,
        }
    }
}

impl LogConfig {
    /// Checks the bounds the engine relies on (positions fit u32, etc.).
    pub fn validate(&self) -> Result<(), String> {
        if self.segment_bytes_max < 4096 || self.segment_bytes_max > u64::from(i32::MAX as u32) {
            return Err(format!(
                "segment_bytes_max {} out of [4096, 2^31)",
                self.segment_bytes_max
            ));
        }
        if self.index_interval_bytes == 0 {
            return Err("index_interval_bytes must be > 0".into());
        }
        if self.message_bytes_max < 61 {
            return Err("message_bytes_max must hold a batch header".into());
        }
        if self.index_bytes_max < 8 {
            return Err("index_bytes_max must hold an index entry".into());
        }
        if self.producers_max == 0 {
            return Err("producers_max must keep a producer".into());
        }
        Ok(())
    }
}
