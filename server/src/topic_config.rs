//! Per-topic configs (Kafka's topic-level names) → the engine's `LogConfig`, and the table that
//! DescribeConfigs reports.
//!
//! | topic config            | broker default (property)       | LogConfig field         |
//! |-------------------------|---------------------------------|-------------------------|
//! | `segment.bytes`         | `log.segment.bytes`             | `segment_bytes_max`     |
//! | `segment.ms`            | `log.roll.ms`                   | `segment_ms_max`        |
//! | `retention.ms`          | `log.retention.ms`              | `retention_ms`          |
//! | `retention.bytes`       | `log.retention.bytes`           | `retention_bytes`       |
//! | `flush.messages`        | `log.flush.interval.messages`   | `flush` (Interval)      |
//! | `flush.ms`              | `log.flush.interval.ms`         | `flush` (Interval)      |
//! | `max.message.bytes`     | `message.max.bytes`             | `message_bytes_max`     |
//! | `index.interval.bytes`  | `log.index.interval.bytes`      | `index_interval_bytes`  |
//! | `cleanup.policy`        | `log.cleanup.policy`            | retention off without `delete`; cleaner on with `compact` |
//! | `delete.retention.ms`   | `log.cleaner.delete.retention.ms` | `CompactionConfig`    |
//! | `min.cleanable.dirty.ratio` | `log.cleaner.min.cleanable.ratio` | `CompactionConfig` |
//! | `min.compaction.lag.ms` | `log.cleaner.min.compaction.lag.ms` | `CompactionConfig`  |
//! | `max.compaction.lag.ms` | `log.cleaner.max.compaction.lag.ms` | `CompactionConfig`; also caps `segment.ms` (the active segment rolls, as KIP-354 has it) |

use std::collections::BTreeMap;

use rill_engine::cleaner::CompactionConfig;
use rill_engine::{FlushPolicy, LogConfig};

use crate::config::LogDefaults;

/// Topic config names Rill understands (CreateTopics rejects others with INVALID_CONFIG).
pub const TOPIC_CONFIG_NAMES: &[&str] = &[
    "cleanup.policy",
    "delete.retention.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.ms",
];

/// One row of DescribeConfigs: name, effective value, and whether the topic overrides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Kafka topic config name.
    pub name: &'static str,
    /// Effective value as Kafka prints it (-1 for unlimited).
    pub value: String,
    /// True when the topic sets it (source DYNAMIC_TOPIC_CONFIG), else a broker default.
    pub is_topic_override: bool,
}

/// Kafka's `cleanup.policy`: a list of `delete` and `compact`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Old segments are deleted by `retention.ms` / `retention.bytes`.
    pub delete: bool,
    /// The log is compacted.
    pub compact: bool,
}

/// Parses `cleanup.policy` (`delete`, `compact`, `compact,delete`, in any order).
pub fn parse_cleanup_policy(v: &str) -> Result<CleanupPolicy, String> {
    let mut policy = CleanupPolicy {
        delete: false,
        compact: false,
    };
    for item in v.split(',').map(str::trim) {
        match item {
            "delete" => policy.delete = true,
            "compact" => policy.compact = true,
            other => {
                return Err(format!(
                    "cleanup.policy={v:?}: {other:?} is not one of delete, compact"
                ))
            }
        }
    }
    Ok(policy)
}

/// Parses a ratio in [0, 1] (`min.cleanable.dirty.ratio`).
pub fn parse_ratio(name: &str, v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{name}={v:?} must be a number in [0, 1]")),
    }
}

/// The cleanup policy a topic runs under: its own, or the broker's `log.cleanup.policy`.
pub fn cleanup_policy(
    defaults: &LogDefaults,
    topic: &BTreeMap<String, String>,
) -> Result<CleanupPolicy, String> {
    let value = topic
        .get("cleanup.policy")
        .map_or(defaults.cleanup_policy.as_str(), |v| v.trim());
    parse_cleanup_policy(value)
}

/// The effective log config of a topic: broker defaults overridden by the topic's configs.
pub fn log_config(
    defaults: &LogDefaults,
    topic: &BTreeMap<String, String>,
) -> Result<LogConfig, String> {
    let mut config = LogConfig {
        segment_bytes_max: defaults.segment_bytes_max,
        segment_ms_max: defaults.segment_ms_max,
        index_interval_bytes: defaults.index_interval_bytes,
        flush: flush_policy(defaults.flush_interval_messages, defaults.flush_interval_ms),
        retention_ms: defaults.retention_ms,
        retention_bytes: defaults.retention_bytes,
        message_bytes_max: defaults.message_bytes_max,
        ..LogConfig::default()
    };
    let (mut flush_messages, mut flush_ms) =
        (defaults.flush_interval_messages, defaults.flush_interval_ms);
    for (name, value) in topic {
        let v = value.trim();
        match name.as_str() {
            "segment.bytes" => config.segment_bytes_max = positive(name, v)?,
            "segment.ms" => config.segment_ms_max = optional(name, v)?,
            "retention.ms" => config.retention_ms = optional(name, v)?,
            "retention.bytes" => config.retention_bytes = optional(name, v)?,
            "flush.messages" => flush_messages = flush_setting(name, v)?,
            "flush.ms" => flush_ms = flush_setting(name, v)?,
            "max.message.bytes" => config.message_bytes_max = positive(name, v)?,
            "index.interval.bytes" => config.index_interval_bytes = positive(name, v)?,
            "cleanup.policy" => {
                parse_cleanup_policy(v)?;
            }
            "delete.retention.ms" | "min.compaction.lag.ms" => {
                non_negative(name, v)?;
            }
            "max.compaction.lag.ms" => {
                positive::<u64>(name, v)?;
            }
            "min.cleanable.dirty.ratio" => {
                parse_ratio(name, v)?;
            }
            "message.timestamp.type" if v == "CreateTime" => {}
            "message.timestamp.type" => {
                return Err(format!(
                    "message.timestamp.type={v:?}: only CreateTime is supported"
                ))
            }
            other => return Err(format!("unknown topic config {other:?}")),
        }
    }
    config.flush = flush_policy(flush_messages, flush_ms);
    let policy = cleanup_policy(defaults, topic)?;
    if !policy.delete {
        // Compacted only: nothing is deleted by age or size, however retention is set.
        config.retention_ms = None;
        config.retention_bytes = None;
    }
    if let Some(compaction) = compaction_config(defaults, topic)? {
        if let Some(lag) = compaction.max_compaction_lag_ms {
            config.segment_ms_max = Some(config.segment_ms_max.map_or(lag, |ms| ms.min(lag)));
        }
    }
    Ok(config)
}

/// The compaction settings of a compacted topic (`None` unless `cleanup.policy` has `compact`).
pub fn compaction_config(
    defaults: &LogDefaults,
    topic: &BTreeMap<String, String>,
) -> Result<Option<CompactionConfig>, String> {
    if !cleanup_policy(defaults, topic)?.compact {
        return Ok(None);
    }
    let mut config = CompactionConfig {
        delete_retention_ms: defaults.delete_retention_ms,
        min_cleanable_dirty_ratio: defaults.min_cleanable_dirty_ratio,
        min_compaction_lag_ms: defaults.min_compaction_lag_ms,
        max_compaction_lag_ms: defaults.max_compaction_lag_ms,
    };
    for (name, value) in topic {
        let v = value.trim();
        match name.as_str() {
            "delete.retention.ms" => config.delete_retention_ms = non_negative(name, v)?,
            "min.cleanable.dirty.ratio" => config.min_cleanable_dirty_ratio = parse_ratio(name, v)?,
            "min.compaction.lag.ms" => config.min_compaction_lag_ms = non_negative(name, v)?,
            "max.compaction.lag.ms" => {
                let lag: u64 = positive(name, v)?;
                config.max_compaction_lag_ms = (lag < i64::MAX as u64).then_some(lag);
            }
            _ => {}
        }
    }
    if let Some(max) = config.max_compaction_lag_ms {
        if max < config.min_compaction_lag_ms {
            return Err(format!(
                "max.compaction.lag.ms={max} is below min.compaction.lag.ms={}",
                config.min_compaction_lag_ms
            ));
        }
    }
    Ok(Some(config))
}

fn non_negative(name: &str, v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .map_err(|_| format!("{name}={v:?} must be a number >= 0"))
}

fn flush_policy(messages: Option<u64>, ms: Option<u64>) -> FlushPolicy {
    if messages.is_none() && ms.is_none() {
        FlushPolicy::EveryAppend
    } else {
        FlushPolicy::Interval { messages, ms }
    }
}

fn positive<T: std::str::FromStr + PartialOrd + From<u8>>(
    name: &str,
    v: &str,
) -> Result<T, String> {
    let n = v
        .parse::<T>()
        .map_err(|_| format!("{name}={v:?} is not a number"))?;
    if n < T::from(1) {
        return Err(format!("{name}={v:?} must be at least 1"));
    }
    Ok(n)
}

fn optional(name: &str, v: &str) -> Result<Option<u64>, String> {
    match v.parse::<i64>() {
        Ok(-1) => Ok(None),
        Ok(n) if n >= 0 => Ok(Some(n as u64)),
        _ => Err(format!("{name}={v:?} must be -1 or >= 0")),
    }
}

fn flush_setting(name: &str, v: &str) -> Result<Option<u64>, String> {
    match v.parse::<i64>() {
        Ok(-1) | Ok(i64::MAX) => Ok(None),
        Ok(n) if n >= 1 => Ok(Some(n as u64)),
        _ => Err(format!("{name}={v:?} must be >= 1")),
    }
}

/// The DescribeConfigs rows of a topic (every known name, effective value, source).
pub fn describe(defaults: &LogDefaults, topic: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    let unlimited = |v: Option<u64>| v.map_or("-1".to_string(), |n| n.to_string());
    let long_max = |v: Option<u64>| v.map_or(i64::MAX.to_string(), |n| n.to_string());
    TOPIC_CONFIG_NAMES
        .iter()
        .map(|&name| {
            let default = match name {
                "cleanup.policy" => defaults.cleanup_policy.clone(),
                "delete.retention.ms" => defaults.delete_retention_ms.to_string(),
                "min.cleanable.dirty.ratio" => defaults.min_cleanable_dirty_ratio.to_string(),
                "min.compaction.lag.ms" => defaults.min_compaction_lag_ms.to_string(),
                "max.compaction.lag.ms" => long_max(defaults.max_compaction_lag_ms),
                "flush.messages" => long_max(defaults.flush_interval_messages),
                "flush.ms" => long_max(defaults.flush_interval_ms),
                "index.interval.bytes" => defaults.index_interval_bytes.to_string(),
                "max.message.bytes" => defaults.message_bytes_max.to_string(),
                "message.timestamp.type" => "CreateTime".to_string(),
                "retention.bytes" => unlimited(defaults.retention_bytes),
                "retention.ms" => unlimited(defaults.retention_ms),
                "segment.bytes" => defaults.segment_bytes_max.to_string(),
                "segment.ms" => unlimited(defaults.segment_ms_max),
                _ => unreachable!("every name in TOPIC_CONFIG_NAMES has a default"),
            };
            match topic.get(name) {
                Some(value) => ConfigEntry {
                    name,
                    value: value.clone(),
                    is_topic_override: true,
                },
                None => ConfigEntry {
                    name,
                    value: default,
                    is_topic_override: false,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_give_durable_flush_policy() {
        let c = log_config(&LogDefaults::default(), &BTreeMap::new()).unwrap();
        assert_eq!(c.flush, FlushPolicy::EveryAppend);
        assert_eq!(c.segment_bytes_max, 1 << 30);
    }

    #[test]
    fn topic_overrides_win() {
        let c = log_config(
            &LogDefaults::default(),
            &map(&[
                ("retention.ms", "-1"),
                ("segment.bytes", "4096"),
                ("flush.ms", "100"),
            ]),
        )
        .unwrap();
        assert_eq!(c.retention_ms, None);
        assert_eq!(c.segment_bytes_max, 4096);
        assert_eq!(
            c.flush,
            FlushPolicy::Interval {
                messages: None,
                ms: Some(100)
            }
        );
    }

    #[test]
    fn bad_topic_configs_are_refused() {
        for (k, v) in [
            ("segment.bytes", "0"),
            ("retention.ms", "-7"),
            ("flush.messages", "0"),
            ("cleanup.policy", "compact,shred"),
            ("cleanup.policy", ""),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("delete.retention.ms", "-1"),
            ("max.compaction.lag.ms", "0"),
            ("no.such.config", "1"),
        ] {
            assert!(
                log_config(&LogDefaults::default(), &map(&[(k, v)])).is_err(),
                "{k}={v}"
            );
        }
    }

    #[test]
    fn compacted_topics_get_a_cleaner_and_lose_retention_without_delete() {
        let d = LogDefaults::default();
        assert_eq!(compaction_config(&d, &BTreeMap::new()).unwrap(), None);
        let compact = map(&[("cleanup.policy", "compact"), ("retention.ms", "5")]);
        let c = log_config(&d, &compact).unwrap();
        assert_eq!((c.retention_ms, c.retention_bytes), (None, None));
        let cc = compaction_config(&d, &compact).unwrap().unwrap();
        assert_eq!(cc.min_cleanable_dirty_ratio, 0.5);
        let both = map(&[
            ("cleanup.policy", "delete, compact"),
            ("retention.ms", "5"),
            ("min.cleanable.dirty.ratio", "0.1"),
            ("max.compaction.lag.ms", "1000"),
            ("delete.retention.ms", "0"),
        ]);
        let c = log_config(&d, &both).unwrap();
        assert_eq!(c.retention_ms, Some(5));
        assert_eq!(
            c.segment_ms_max,
            Some(1000),
            "max.compaction.lag.ms rolls the active segment"
        );
        let cc = compaction_config(&d, &both).unwrap().unwrap();
        assert_eq!(cc.min_cleanable_dirty_ratio, 0.1);
        assert_eq!(cc.delete_retention_ms, 0);
        assert_eq!(cc.max_compaction_lag_ms, Some(1000));
        let never = map(&[
            ("cleanup.policy", "compact"),
            ("max.compaction.lag.ms", &i64::MAX.to_string()),
        ]);
        assert_eq!(
            compaction_config(&d, &never)
                .unwrap()
                .unwrap()
                .max_compaction_lag_ms,
            None
        );
        let inverted = map(&[
            ("cleanup.policy", "compact"),
            ("min.compaction.lag.ms", "10"),
            ("max.compaction.lag.ms", "5"),
        ]);
        assert!(compaction_config(&d, &inverted).is_err());
    }

    #[test]
    fn describe_reports_source() {
        let rows = describe(&LogDefaults::default(), &map(&[("retention.ms", "5")]));
        let r = rows.iter().find(|r| r.name == "retention.ms").unwrap();
        assert!(r.is_topic_override);
        assert_eq!(r.value, "5");
        let s = rows.iter().find(|r| r.name == "segment.bytes").unwrap();
        assert!(!s.is_topic_override);
        assert_eq!(rows.len(), TOPIC_CONFIG_NAMES.len());
    }
}
