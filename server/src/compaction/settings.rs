//! The shards' cleaners' settings (Kafka's `log.cleaner.*`): plain values with their
//! defaults, on the settings floor so that the broker's configuration can hold them;
//! `crate::config` fills them from the properties.

/// Broker-wide cleaner settings (Kafka's `log.cleaner.*` properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanerSettings {
    /// `log.cleaner.enable`: whether compacted topics are cleaned at all.
    pub enabled: bool,
    /// `log.cleaner.dedupe.buffer.size`: offset-map memory over all shards.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: read+write rate over all shards (`None`: unlimited).
    pub io_bytes_per_second_max: Option<u64>,
    /// `log.cleaner.backoff.ms`: how often a compacted partition checks whether a clean is due.
    pub backoff_ms: u64,
}

impl Default for CleanerSettings {
    /// Kafka's defaults.
    fn default() -> Self {
        CleanerSettings {
            enabled: true,
            dedupe_buffer_bytes: 128 << 20,
            io_bytes_per_second_max: None,
            backoff_ms: 15_000,
        }
    }
}
