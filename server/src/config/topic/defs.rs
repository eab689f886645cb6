//! Every topic config Kafka defines: its type, default, the broker properties that set its
//! default (synonyms, highest priority first), what it means here, and its validity rule.
//!
//! Each one is honoured, or accepted because it has no effect on a single node without tiered
//! storage (the doc says so), or refused with the reason in its rule.

use super::ConfigType;

/// A broker property that sets a topic config's default, and the factor from its unit to the
/// topic config's (`log.retention.hours` is 3,600,000 ms per unit).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Synonym {
    /// The broker property.
    pub name: &'static str,
    /// Multiply its value by this to get the topic config's value.
    pub factor: i64,
}

/// One topic config.
#[derive(Debug)]
pub struct TopicConfigDef {
    /// Kafka's name.
    pub name: &'static str,
    /// How DescribeConfigs types it.
    pub kind: ConfigType,
    /// Kafka's default, as Kafka prints it.
    pub default: &'static str,
    /// Broker properties setting its default, highest priority first.
    pub synonyms: &'static [Synonym],
    /// What it does (DescribeConfigs `documentation`).
    pub doc: &'static str,
    /// `Err(reason)` when a value is refused.
    pub check: fn(&str) -> Result<(), String>,
}

const fn same(name: &'static str) -> Synonym {
    Synonym { name, factor: 1 }
}

const HOUR_MS: i64 = 60 * 60 * 1000;

/// `i64::MAX` as Kafka prints `Long.MAX_VALUE`.
pub const LONG_MAX: &str = "9223372036854775807";

/// The table, sorted by name.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    TopicConfigDef {
        name: "cleanup.policy",
        kind: ConfigType::List,
        default: "delete",
        synonyms: &[same("log.cleanup.policy")],
        doc: "delete: old segments are deleted by retention.ms and retention.bytes; compact: the log keeps the latest record of each key (the cleaner); both may be given.",
        check: check_cleanup_policy,
    },
    TopicConfigDef {
        name: "compression.gzip.level",
        kind: ConfigType::Int,
        default: "-1",
        synonyms: &[same("compression.gzip.level")],
        doc: "The gzip level the broker compresses with when compression.type is gzip: 1 to 9, or -1 for the library default.",
        check: |v| check_gzip_level(v),
    },
    TopicConfigDef {
        name: "compression.lz4.level",
        kind: ConfigType::Int,
        default: "9",
        synonyms: &[same("compression.lz4.level")],
        doc: "The lz4 level the broker compresses with when compression.type is lz4: 1 to 17.",
        check: |v| check_int_range(v, 1, 17),
    },
    TopicConfigDef {
        name: "compression.type",
        kind: ConfigType::String,
        default: "producer",
        synonyms: &[same("compression.type")],
        doc: "The compression of the stored batches: producer keeps what the producer sent; uncompressed, gzip, snappy, lz4 or zstd make the broker recompress batches sent otherwise.",
        check: |v| check_one_of(v, &["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]),
    },
    TopicConfigDef {
        name: "compression.zstd.level",
        kind: ConfigType::Int,
        default: "3",
        synonyms: &[same("compression.zstd.level")],
        doc: "The zstd level the broker compresses with when compression.type is zstd: -131072 to 22.",
        check: |v| check_int_range(v, -131_072, 22),
    },
    TopicConfigDef {
        name: "delete.retention.ms",
        kind: ConfigType::Long,
        default: "86400000",
        synonyms: &[same("log.cleaner.delete.retention.ms")],
        doc: "How long a tombstone stays in a compacted log after the clean that first kept it; a consumer reading from the start within this time sees every deletion.",
        check: |v| check_long_at_least(v, 0),
    },
    TopicConfigDef {
        name: "file.delete.delay.ms",
        kind: ConfigType::Long,
        default: "60000",
        synonyms: &[same("log.segment.delete.delay.ms")],
        doc: "Kafka waits this long before deleting the files of a removed segment, for reads still using them. Accepted; Rill deletes them at once, as no read outlives its segment.",
        check: |v| check_long_at_least(v, 0),
    },
    TopicConfigDef {
        name: "flush.messages",
        kind: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[same("log.flush.interval.messages")],
        doc: "With flush.messages or flush.ms set, the log is fdatasync'ed after this many messages and acks=all is answered before that. Unset (the default), every acks=all produce is answered only once fdatasync'ed.",
        check: check_flush,
    },
    TopicConfigDef {
        name: "flush.ms",
        kind: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[same("log.flush.interval.ms"), same("log.flush.scheduler.interval.ms")],
        doc: "With flush.messages or flush.ms set, the log is fdatasync'ed when its oldest unflushed message is this old. Unset (the default), every acks=all produce is answered only once fdatasync'ed.",
        check: check_flush,
    },
    TopicConfigDef {
        name: "follower.replication.throttled.replicas",
        kind: ConfigType::List,
        default: "",
        synonyms: &[same("follower.replication.throttled.replicas")],
        doc: "Replicas whose follower replication is throttled (partition:broker pairs, or *). Accepted; a single node replicates nothing.",
        check: check_throttled_replicas,
    },
    TopicConfigDef {
        name: "index.interval.bytes",
        kind: ConfigType::Int,
        default: "4096",
        synonyms: &[same("log.index.interval.bytes")],
        doc: "Bytes of log between two entries of the sparse offset index.",
        check: |v| check_int_range(v, 0, i64::from(i32::MAX)),
    },
    TopicConfigDef {
        name: "leader.replication.throttled.replicas",
        kind: ConfigType::List,
        default: "",
        synonyms: &[same("leader.replication.throttled.replicas")],
        doc: "Replicas whose leader replication is throttled (partition:broker pairs, or *). Accepted; a single node replicates nothing.",
        check: check_throttled_replicas,
    },
    TopicConfigDef {
        name: "local.retention.bytes",
        kind: ConfigType::Long,
        default: "-2",
        synonyms: &[same("log.local.retention.bytes")],
        doc: "With remote.storage.enable, the oldest local segments already copied to the remote tier are deleted while the local log is larger than this; -2: retention.bytes.",
        check: |v| check_long_at_least(v, -2),
    },
    TopicConfigDef {
        name: "local.retention.ms",
        kind: ConfigType::Long,
        default: "-2",
        synonyms: &[same("log.local.retention.ms")],
        doc: "With remote.storage.enable, local segments already copied to the remote tier are deleted once older than this; -2: retention.ms.",
        check: |v| check_long_at_least(v, -2),
    },
    TopicConfigDef {
        name: "max.compaction.lag.ms",
        kind: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[same("log.cleaner.max.compaction.lag.ms")],
        doc: "The longest a record stays uncompacted in a compacted log: a dirty record this old forces a clean, and the active segment rolls at this age.",
        check: |v| check_long_at_least(v, 1),
    },
    TopicConfigDef {
        name: "max.message.bytes",
        kind: ConfigType::Int,
        default: "1048588",
        synonyms: &[same("message.max.bytes")],
        doc: "The largest record batch a producer may send (MESSAGE_TOO_LARGE beyond it).",
        check: |v| check_int_range(v, 0, i64::from(i32::MAX)),
    },
    TopicConfigDef {
        name: "message.downconversion.enable",
        kind: ConfigType::Boolean,
        default: "true",
        synonyms: &[same("log.message.downconversion.enable")],
        doc: "Whether old consumers get batches converted to older formats. Accepted; Rill stores and serves record batch v2 only and never converts (Kafka 4.0 removed this config).",
        check: check_boolean,
    },
    TopicConfigDef {
        name: "message.format.version",
        kind: ConfigType::String,
        default: "3.0-IV1",
        synonyms: &[same("log.message.format.version")],
        doc: "Removed in Kafka 4.0. Only values meaning record batch v2 (0.11.0 and later) are accepted; Rill writes v2 only.",
        check: check_message_format_version,
    },
    TopicConfigDef {
        name: "message.timestamp.after.max.ms",
        kind: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[same("log.message.timestamp.after.max.ms")],
        doc: "With CreateTime, a record whose timestamp is more than this ahead of the broker's clock is refused (INVALID_TIMESTAMP, KIP-937).",
        check: |v| check_long_at_least(v, 0),
    },
    TopicConfigDef {
        name: "message.timestamp.before.max.ms",
        kind: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[same("log.message.timestamp.before.max.ms")],
        doc: "With CreateTime, a record whose timestamp is more than this behind the broker's clock is refused (INVALID_TIMESTAMP, KIP-937).",
        check: |v| check_long_at_least(v, 0),
    },
    TopicConfigDef {
        name: "message.timestamp.difference.max.ms",
        kind: ConfigType::Long,
        default: LONG_MAX,
        synonyms: &[same("log.message.timestamp.difference.max.ms")],
        doc: "Removed in Kafka 4.0 (KIP-937): refused; set message.timestamp.before.max.ms and message.timestamp.after.max.ms.",
        check: |_| Err("removed in Kafka 4.0: set message.timestamp.before.max.ms and message.timestamp.after.max.ms instead".into()),
    },
    TopicConfigDef {
        name: "message.timestamp.type",
        kind: ConfigType::String,
        default: "CreateTime",
        synonyms: &[same("log.message.timestamp.type")],
        doc: "CreateTime keeps the producer's timestamps; LogAppendTime makes the broker stamp every batch with its append time, which Fetch and ListOffsets then use.",
        check: |v| check_one_of(v, &["CreateTime", "LogAppendTime"]),
    },
    TopicConfigDef {
        name: "min.cleanable.dirty.ratio",
        kind: ConfigType::Double,
        default: "0.5",
        synonyms: &[same("log.cleaner.min.cleanable.ratio")],
        doc: "The dirty share of a compacted log (bytes written since the last clean over all cleanable bytes) that makes it due for a clean.",
        check: check_ratio,
    },
    TopicConfigDef {
        name: "min.compaction.lag.ms",
        kind: ConfigType::Long,
        default: "0",
        synonyms: &[same("log.cleaner.min.compaction.lag.ms")],
        doc: "The least time a record stays uncompacted: segments holding younger records are not cleaned.",
        check: |v| check_long_at_least(v, 0),
    },
    TopicConfigDef {
        name: "min.insync.replicas",
        kind: ConfigType::Int,
        default: "1",
        synonyms: &[same("min.insync.replicas")],
        doc: "The replicas that must have an acks=all batch. A single node has one, so above 1 every acks=all produce is refused with NOT_ENOUGH_REPLICAS, as Kafka does.",
        check: |v| check_int_range(v, 1, i64::from(i32::MAX)),
    },
    TopicConfigDef {
        name: "preallocate",
        kind: ConfigType::Boolean,
        default: "false",
        synonyms: &[same("log.preallocate")],
        doc: "Kafka preallocates a whole segment when true. Accepted; Rill always allocates ahead of the data by its own measured step.",
        check: check_boolean,
    },
    TopicConfigDef {
        name: "remote.log.copy.disable",
        kind: ConfigType::Boolean,
        default: "false",
        synonyms: &[],
        doc: "Tiered storage only. Accepted; Rill does not support remote storage.",
        check: check_boolean,
    },
    TopicConfigDef {
        name: "remote.log.delete.on.disable",
        kind: ConfigType::Boolean,
        default: "false",
        synonyms: &[],
        doc: "Tiered storage only. Accepted; Rill does not support remote storage.",
        check: check_boolean,
    },
    TopicConfigDef {
        name: "remote.storage.enable",
        kind: ConfigType::Boolean,
        default: "false",
        synonyms: &[],
        doc: "Tiered storage: sealed segments are copied to the broker's object store (rill.remote.*) and read back from it once local retention deleted them. Needs remote.log.storage.system.enable on the broker; refused on compacted topics.",
        check: check_boolean,
    },
    TopicConfigDef {
        name: "retention.bytes",
        kind: ConfigType::Long,
        default: "-1",
        synonyms: &[same("log.retention.bytes")],
        doc: "With cleanup.policy delete, the oldest segments are deleted while the partition is larger than this; -1: no limit.",
        check: |v| check_long_at_least(v, -1),
    },
    TopicConfigDef {
        name: "retention.ms",
        kind: ConfigType::Long,
        default: "604800000",
        synonyms: &[
            same("log.retention.ms"),
            Synonym {
                name: "log.retention.minutes",
                factor: 60_000,
            },
            Synonym {
                name: "log.retention.hours",
                factor: HOUR_MS,
            },
        ],
        doc: "With cleanup.policy delete, a segment whose newest record is older than this is deleted; -1: no limit.",
        check: |v| check_long_at_least(v, -1),
    },
    TopicConfigDef {
        name: "segment.bytes",
        kind: ConfigType::Int,
        default: "1073741824",
        synonyms: &[same("log.segment.bytes")],
        doc: "A segment rolls before it grows past this size. At least 4096 (Rill's smallest segment).",
        check: |v| check_int_range(v, 4096, i64::from(i32::MAX)),
    },
    TopicConfigDef {
        name: "segment.index.bytes",
        kind: ConfigType::Int,
        default: "10485760",
        synonyms: &[same("log.index.size.max.bytes")],
        doc: "A segment rolls when its offset index would grow past this size (8 bytes per entry).",
        check: |v| check_int_range(v, 8, i64::from(i32::MAX)),
    },
    TopicConfigDef {
        name: "segment.jitter.ms",
        kind: ConfigType::Long,
        default: "0",
        synonyms: &[
            same("log.roll.jitter.ms"),
            Synonym {
                name: "log.roll.jitter.hours",
                factor: HOUR_MS,
            },
        ],
        doc: "Up to this much is taken off segment.ms for each segment, so the segments of many partitions do not roll at once.",
        check: |v| check_long_at_least(v, 0),
    },
    TopicConfigDef {
        name: "segment.ms",
        kind: ConfigType::Long,
        default: "604800000",
        synonyms: &[
            same("log.roll.ms"),
            Synonym {
                name: "log.roll.hours",
                factor: HOUR_MS,
            },
        ],
        doc: "A segment rolls once its first record was appended this long ago (at the next append).",
        check: |v| check_long_at_least(v, 1),
    },
    TopicConfigDef {
        name: "unclean.leader.election.enable",
        kind: ConfigType::Boolean,
        default: "false",
        synonyms: &[same("unclean.leader.election.enable")],
        doc: "Whether an out-of-sync replica may become leader. Accepted; a single node is always its partitions' leader.",
        check: check_boolean,
    },
];

/// The definition of `name`.
pub fn def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// The topic config a broker property sets the default of, and the synonym.
pub fn by_synonym(property: &str) -> Option<(&'static TopicConfigDef, Synonym)> {
    TOPIC_CONFIGS.iter().find_map(|d| {
        d.synonyms
            .iter()
            .find(|s| s.name == property)
            .map(|s| (d, *s))
    })
}

fn parse_long(v: &str) -> Result<i64, String> {
    v.trim()
        .parse::<i64>()
        .map_err(|_| format!("{v:?} is not a number"))
}

fn check_long_at_least(v: &str, min: i64) -> Result<(), String> {
    let n = parse_long(v)?;
    if n < min {
        return Err(format!("{n} is below the minimum {min}"));
    }
    Ok(())
}

fn check_int_range(v: &str, min: i64, max: i64) -> Result<(), String> {
    let n = parse_long(v)?;
    if n < min || n > max {
        return Err(format!("{n} is out of [{min}, {max}]"));
    }
    Ok(())
}

fn check_gzip_level(v: &str) -> Result<(), String> {
    match parse_long(v)? {
        -1 | 1..=9 => Ok(()),
        n => Err(format!("{n} is not -1 or in [1, 9]")),
    }
}

fn check_boolean(v: &str) -> Result<(), String> {
    match v.trim() {
        "true" | "false" => Ok(()),
        _ => Err(format!("{v:?} is not true or false")),
    }
}

fn check_one_of(v: &str, allowed: &[&str]) -> Result<(), String> {
    if allowed.contains(&v.trim()) {
        return Ok(());
    }
    Err(format!("{v:?} is not one of {}", allowed.join(", ")))
}

fn check_ratio(v: &str) -> Result<(), String> {
    match v.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(()),
        _ => Err(format!("{v:?} is not a number in [0, 1]")),
    }
}

fn check_flush(v: &str) -> Result<(), String> {
    // -1 is Rill's old spelling of "unset"; Kafka's minimum is 0 (flush.ms) or 1 (messages).
    match parse_long(v)? {
        n if n >= -1 => Ok(()),
        n => Err(format!("{n} is below the minimum 0")),
    }
}

fn check_cleanup_policy(v: &str) -> Result<(), String> {
    let items: Vec<&str> = v.split(',').map(str::trim).collect();
    if items.iter().any(|i| *i != "delete" && *i != "compact") {
        return Err(format!("{v:?} is not a list of delete and compact"));
    }
    Ok(())
}

fn check_throttled_replicas(v: &str) -> Result<(), String> {
    let v = v.trim();
    if v.is_empty() || v == "*" {
        return Ok(());
    }
    let pair = |item: &str| {
        let (p, b) = item.trim().split_once(':')?;
        p.parse::<u32>().ok()?;
        b.parse::<u32>().ok()
    };
    if v.split(',').all(|item| pair(item).is_some()) {
        return Ok(());
    }
    Err(format!(
        "{v:?} is not * or a list of partition:broker pairs"
    ))
}

fn check_message_format_version(v: &str) -> Result<(), String> {
    let v = v.trim();
    let old = ["0.8", "0.9", "0.10"];
    if old.iter().any(|o| v.starts_with(o)) {
        return Err(format!(
            "{v:?} means a record format before v2; Rill writes record batch v2 only"
        ));
    }
    let known = v.starts_with("0.11") || v.chars().next().is_some_and(|c| c.is_ascii_digit());
    if !known {
        return Err(format!("{v:?} is not a Kafka version"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_unique_and_every_default_is_valid() {
        for pair in TOPIC_CONFIGS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} then {}",
                pair[0].name,
                pair[1].name
            );
        }
        for d in TOPIC_CONFIGS {
            if d.name != "message.timestamp.difference.max.ms" {
                assert_eq!((d.check)(d.default), Ok(()), "{}", d.name);
            }
        }
    }

    #[test]
    fn synonyms_find_their_topic_config() {
        let (d, s) = by_synonym("log.retention.hours").unwrap();
        assert_eq!((d.name, s.factor), ("retention.ms", HOUR_MS));
        assert_eq!(
            by_synonym("message.max.bytes").unwrap().0.name,
            "max.message.bytes"
        );
        assert!(by_synonym("num.partitions").is_none());
    }

    #[test]
    fn rules_refuse_with_a_reason() {
        let refused = |name: &str, v: &str| (def(name).unwrap().check)(v).unwrap_err();
        assert!(refused("remote.storage.enable", "yes").contains("true or false"));
        assert!(refused("cleanup.policy", "compact,shred").contains("delete and compact"));
        assert!(refused("segment.bytes", "100").contains("4096"));
        assert!(refused("message.format.version", "0.10.2").contains("v2"));
        assert!(refused("compression.type", "brotli").contains("one of"));
        assert!(refused("min.cleanable.dirty.ratio", "1.5").contains("[0, 1]"));
        assert!(refused("leader.replication.throttled.replicas", "x").contains("pairs"));
        assert_eq!(
            (def("leader.replication.throttled.replicas").unwrap().check)("0:0,1:0"),
            Ok(())
        );
        assert_eq!(
            (def("message.format.version").unwrap().check)("3.0-IV1"),
            Ok(())
        );
    }
}
