//! Resolution of topic configs through the layers, and the settings they give.

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn settings(topic: &[(&str, &str)]) -> Result<TopicSettings, RefusedConfig> {
    let (topic, empty) = (map(topic), BTreeMap::new());
    TopicSettings::from_layers(&ConfigLayers {
        topic: &topic,
        dynamic_broker: &empty,
        dynamic_default: &empty,
        static_broker: &empty,
    })
}

#[test]
fn kafka_defaults_give_the_durable_flush_policy_and_no_compaction() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.log.flush, FlushPolicy::EveryAppend);
    assert_eq!(s.log.segment_bytes_max, 1 << 30);
    assert_eq!(s.log.retention_ms, Some(604_800_000));
    assert_eq!(s.log.index_bytes_max, 10 << 20);
    assert_eq!(s.compaction, None);
    assert_eq!(s.compression, TargetCompression::Producer);
    assert_eq!(
        (s.timestamp_before_max_ms, s.timestamp_after_max_ms),
        (None, None)
    );
    assert!(!s.log.log_append_time);
}

#[test]
fn each_layer_overrides_the_one_below_and_reports_its_source() {
    let topic = map(&[("segment.ms", "5")]);
    let dynamic_broker = map(&[("log.retention.ms", "2000")]);
    let dynamic_default = map(&[("log.retention.minutes", "1"), ("log.roll.hours", "3")]);
    let static_broker = map(&[("log.retention.hours", "2"), ("message.max.bytes", "77")]);
    let layers = ConfigLayers {
        topic: &topic,
        dynamic_broker: &dynamic_broker,
        dynamic_default: &dynamic_default,
        static_broker: &static_broker,
    };
    let r = layers.resolve(def("retention.ms").unwrap());
    assert_eq!(
        (r.value.as_str(), r.source),
        ("2000", ConfigSource::DynamicBroker)
    );
    let names: Vec<(&str, ConfigSource)> = r
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.source))
        .collect();
    assert_eq!(
        names,
        [
            ("log.retention.ms", ConfigSource::DynamicBroker),
            ("log.retention.minutes", ConfigSource::DynamicDefaultBroker),
            ("log.retention.hours", ConfigSource::StaticBroker),
            ("log.retention.ms", ConfigSource::Default),
        ]
    );
    let roll = layers.resolve(def("segment.ms").unwrap());
    assert_eq!(
        (roll.value.as_str(), roll.source),
        ("5", ConfigSource::DynamicTopic)
    );
    assert_eq!(layers.value("max.message.bytes"), "77");
    let empty = BTreeMap::new();
    let only_minutes = ConfigLayers {
        topic: &empty,
        dynamic_broker: &empty,
        ..layers
    };
    assert_eq!(
        only_minutes.value("retention.ms"),
        "60000",
        "minutes converted to ms"
    );
    assert_eq!(
        only_minutes.value("segment.ms"),
        "10800000",
        "hours converted to ms"
    );
}

#[test]
fn compacted_topics_get_a_cleaner_and_lose_retention_without_delete() {
    let s = settings(&[("cleanup.policy", "compact"), ("retention.ms", "5")]).unwrap();
    assert_eq!((s.log.retention_ms, s.log.retention_bytes), (None, None));
    assert_eq!(s.compaction.unwrap().min_cleanable_dirty_ratio, 0.5);
    let s = settings(&[
        ("cleanup.policy", "delete, compact"),
        ("retention.ms", "5"),
        ("min.cleanable.dirty.ratio", "0.1"),
        ("max.compaction.lag.ms", "1000"),
        ("delete.retention.ms", "0"),
    ])
    .unwrap();
    assert_eq!(s.log.retention_ms, Some(5));
    assert_eq!(
        s.log.segment_ms_max,
        Some(1000),
        "max.compaction.lag.ms rolls the segment"
    );
    let c = s.compaction.unwrap();
    assert_eq!(
        (c.min_cleanable_dirty_ratio, c.delete_retention_ms),
        (0.1, 0)
    );
    let never = settings(&[
        ("cleanup.policy", "compact"),
        ("max.compaction.lag.ms", defs::LONG_MAX),
    ]);
    assert_eq!(
        never.unwrap().compaction.unwrap().max_compaction_lag_ms,
        None
    );
    let inverted = settings(&[
        ("cleanup.policy", "compact"),
        ("min.compaction.lag.ms", "10"),
        ("max.compaction.lag.ms", "5"),
    ]);
    assert_eq!(inverted.unwrap_err().name, "max.compaction.lag.ms");
}

#[test]
fn refusals_name_the_config() {
    for (k, v) in [
        ("segment.bytes", "0"),
        ("retention.ms", "-7"),
        ("cleanup.policy", "compact,shred"),
        ("cleanup.policy", ""),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("delete.retention.ms", "-1"),
        ("max.compaction.lag.ms", "0"),
        ("remote.storage.enable", "maybe"),
        ("compression.type", "brotli"),
        ("message.timestamp.type", "Now"),
        ("message.timestamp.difference.max.ms", "5"),
    ] {
        let e = settings(&[(k, v)]).unwrap_err();
        assert_eq!(e.name, k);
        assert!(e.to_string().contains(k), "{e}");
    }
    let unknown = settings(&[("no.such.config", "1")]).unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "Unknown topic config name: no.such.config"
    );
}

#[test]
fn produce_rules_and_engine_settings_come_from_their_configs() {
    let s = settings(&[
        ("compression.type", "zstd"),
        ("compression.zstd.level", "7"),
        ("message.timestamp.type", "LogAppendTime"),
        ("message.timestamp.before.max.ms", "1000"),
        ("message.timestamp.after.max.ms", "2000"),
        ("min.insync.replicas", "2"),
        ("segment.jitter.ms", "100"),
        ("segment.index.bytes", "4096"),
        ("flush.ms", "0"),
    ])
    .unwrap();
    assert_eq!(
        s.compression,
        TargetCompression::Codec(Compression::Zstd, Some(7))
    );
    assert!(s.log.log_append_time);
    assert_eq!(
        (s.timestamp_before_max_ms, s.timestamp_after_max_ms),
        (Some(1000), Some(2000))
    );
    assert_eq!(s.min_insync_replicas, 2);
    assert_eq!(
        (s.log.segment_jitter_ms, s.log.index_bytes_max),
        (100, 4096)
    );
    assert_eq!(
        s.log.flush,
        FlushPolicy::Interval {
            messages: None,
            ms: Some(0)
        }
    );
    let gzip = settings(&[("compression.type", "gzip")]).unwrap();
    assert_eq!(
        gzip.compression,
        TargetCompression::Codec(Compression::Gzip, None)
    );
}

#[test]
fn every_config_is_described() {
    let (topic, empty) = (map(&[("retention.ms", "5")]), BTreeMap::new());
    let rows = describe(&ConfigLayers {
        topic: &topic,
        dynamic_broker: &empty,
        dynamic_default: &empty,
        static_broker: &empty,
    });
    assert_eq!(rows.len(), TOPIC_CONFIGS.len());
    let retention = rows.iter().find(|r| r.def.name == "retention.ms").unwrap();
    assert_eq!(retention.resolved.source, ConfigSource::DynamicTopic);
}

fn tiered_settings(topic: &[(&str, &str)]) -> Result<TopicSettings, RefusedConfig> {
    let (topic, empty) = (map(topic), BTreeMap::new());
    let file = map(&[(REMOTE_STORAGE_SYSTEM_ENABLE, "true")]);
    TopicSettings::from_layers(&ConfigLayers {
        topic: &topic,
        dynamic_broker: &empty,
        dynamic_default: &empty,
        static_broker: &file,
    })
}

#[test]
fn remote_storage_is_refused_as_kafka_refuses_it() {
    let on = ("remote.storage.enable", "true");
    let e = settings(&[on]).unwrap_err();
    assert_eq!(
        e.to_string(),
        REMOTE_STORAGE_DISABLED,
        "no system enable on the broker"
    );
    let e = tiered_settings(&[on, ("cleanup.policy", "compact")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Remote log storage is unsupported for the compacted topics"
    );
    let e = tiered_settings(&[on, ("retention.ms", "1000"), ("local.retention.ms", "2000")])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Invalid value 2000 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"
    );
    let e = tiered_settings(&[
        on,
        ("retention.bytes", "10"),
        ("local.retention.bytes", "-1"),
    ])
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as retention.bytes value is set as 10."
    );
}

#[test]
fn a_tiered_topics_log_keeps_the_local_retention_and_the_tier_the_total() {
    let s = tiered_settings(&[
        ("remote.storage.enable", "true"),
        ("local.retention.bytes", "4096"),
    ])
    .unwrap();
    assert_eq!(s.log.retention_bytes, Some(4096), "local");
    assert_eq!(s.log.retention_ms, Some(604_800_000), "-2: the total one");
    let total = s.remote.unwrap();
    assert_eq!(
        (total.retention_ms, total.retention_bytes),
        (Some(604_800_000), None)
    );
    assert_eq!(settings(&[]).unwrap().remote, None, "not tiered by default");
}
