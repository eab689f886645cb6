//! The transaction coordinators' settings (Kafka's `transaction.*`): plain values with
//! their defaults, on the settings floor so that the broker's configuration can hold them;
//! `crate::config` fills them from the properties.

/// Kafka's `transaction.*` broker settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: longer producer timeouts get INVALID_TRANSACTION_TIMEOUT.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an id idle this long (no transaction) is forgotten.
    pub id_expiration_ms: rill_types::DurationMs,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often timed-out
    /// transactions are looked for (and unfinished markers retried).
    pub abort_check_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how often expired ids are
    /// looked for.
    pub expiration_check_interval_ms: u64,
    /// `rill.shard.transactional.ids.max`: ids one shard coordinates. A new id past it makes
    /// room by forgetting the idle id updated longest ago (as its expiration would); with none
    /// idle, its InitProducerId is refused (POLICY_VIOLATION).
    pub shard_ids_max: usize,
}

/// The default `rill.shard.transactional.ids.max` (Kafka bounds them by expiration alone).
pub const SHARD_IDS_MAX_DEFAULT: usize = 50_000;

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            max_timeout_ms: 900_000,
            id_expiration_ms: rill_types::DurationMs(7 * 24 * 60 * 60 * 1000),
            abort_check_interval_ms: 10_000,
            expiration_check_interval_ms: 60 * 60 * 1000,
            shard_ids_max: SHARD_IDS_MAX_DEFAULT,
        }
    }
}
