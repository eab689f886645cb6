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
//! | `cleanup.policy`        | `delete` (only value accepted)  | —                       |

use std::collections::BTreeMap;

use rill_engine::{FlushPolicy, LogConfig};

use crate::config::LogDefaults;

/// Topic config names Rill understands (CreateTopics rejects others with INVALID_CONFIG).
pub const TOPIC_CONFIG_NAMES: &[&str] = &[
    "cleanup.policy",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.message.bytes",
    "message.timestamp.type",
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
            "cleanup.policy" if v == "delete" => {}
            "cleanup.policy" => {
                return Err(format!("cleanup.policy={v:?}: only delete is supported"))
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
    Ok(config)
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
                "cleanup.policy" => "delete".to_string(),
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
            ("cleanup.policy", "compact"),
            ("no.such.config", "1"),
        ] {
            assert!(
                log_config(&LogDefaults::default(), &map(&[(k, v)])).is_err(),
                "{k}={v}"
            );
        }
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
