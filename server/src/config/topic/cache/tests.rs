//! The cache serves what parsing would, and never settings of a changed or re-created topic.

use std::cell::Cell;
use std::collections::BTreeMap;

use super::*;
use crate::config::topic::ConfigLayers;
use crate::topics::CLUSTER_DEFAULT_RESOURCE;

/// A registry in a temp dir (kept alive with it).
fn registry() -> (tempfile::TempDir, TopicRegistry) {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = TopicRegistry::open(dir.path()).expect("registry");
    (dir, registry)
}

/// `name`'s settings through `cache`, parsed from the registry's layers (no properties file),
/// counting the parses in `parses`.
fn lookup(
    cache: &SettingsCache,
    registry: &TopicRegistry,
    name: &str,
    parses: &Cell<u32>,
) -> Settled {
    let meta = registry.get(name).expect("the topic exists");
    cache.settings(registry, name, &meta, || {
        parses.set(parses.get() + 1);
        let dynamic = registry.broker_configs();
        let none = BTreeMap::new();
        TopicSettings::from_layers(&ConfigLayers {
            topic: &meta.configs,
            dynamic_broker: &none,
            dynamic_default: dynamic.cluster_default(),
            static_broker: &none,
        })
    })
}

fn retention_ms(settled: &Settled) -> Option<u64> {
    settled.as_ref().expect("valid configs").log.retention_ms
}

fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn an_unchanged_topic_is_parsed_once() {
    let (_dir, registry) = registry();
    registry
        .create("t", 1, configs(&[("retention.ms", "5")]))
        .unwrap();
    let (cache, parses) = (SettingsCache::default(), Cell::new(0));
    for _ in 0..3 {
        assert_eq!(
            retention_ms(&lookup(&cache, &registry, "t", &parses)),
            Some(5)
        );
    }
    assert_eq!(parses.get(), 1);
}

#[test]
fn a_changed_topic_config_is_seen_by_the_next_lookup() {
    let (_dir, registry) = registry();
    registry
        .create("t", 1, configs(&[("retention.ms", "5")]))
        .unwrap();
    let (cache, parses) = (SettingsCache::default(), Cell::new(0));
    assert_eq!(
        retention_ms(&lookup(&cache, &registry, "t", &parses)),
        Some(5)
    );
    registry
        .set_topic_configs("t", |_| Ok(configs(&[("retention.ms", "7")])))
        .unwrap();
    assert_eq!(
        retention_ms(&lookup(&cache, &registry, "t", &parses)),
        Some(7)
    );
    assert_eq!(parses.get(), 2);
}

#[test]
fn a_changed_broker_default_the_topic_inherits_is_seen_by_the_next_lookup() {
    let (_dir, registry) = registry();
    registry.create("t", 1, BTreeMap::new()).unwrap();
    let (cache, parses) = (SettingsCache::default(), Cell::new(0));
    assert_eq!(
        retention_ms(&lookup(&cache, &registry, "t", &parses)),
        Some(604_800_000)
    );
    registry
        .set_broker_configs(CLUSTER_DEFAULT_RESOURCE, |_| {
            Ok(configs(&[("log.retention.ms", "9")]))
        })
        .unwrap();
    assert_eq!(
        retention_ms(&lookup(&cache, &registry, "t", &parses)),
        Some(9)
    );
    assert_eq!(parses.get(), 2);
}

#[test]
fn a_deleted_and_recreated_topic_is_not_served_stale_settings() {
    let (_dir, registry) = registry();
    registry
        .create("t", 1, configs(&[("retention.ms", "5")]))
        .unwrap();
    let (cache, parses) = (SettingsCache::default(), Cell::new(0));
    assert_eq!(
        retention_ms(&lookup(&cache, &registry, "t", &parses)),
        Some(5)
    );
    let generation = registry.config_generation();
    registry.delete("t").unwrap();
    registry
        .create("t", 1, configs(&[("retention.ms", "6")]))
        .unwrap();
    assert_eq!(
        registry.config_generation(),
        generation,
        "create and delete bump nothing"
    );
    assert_eq!(
        retention_ms(&lookup(&cache, &registry, "t", &parses)),
        Some(6)
    );
}

#[test]
fn invalid_stored_configs_are_cached_as_refused_too() {
    let (_dir, registry) = registry();
    registry
        .create("t", 1, configs(&[("retention.ms", "soon")]))
        .unwrap();
    let (cache, parses) = (SettingsCache::default(), Cell::new(0));
    for _ in 0..2 {
        let refused = lookup(&cache, &registry, "t", &parses).unwrap_err();
        assert_eq!(refused.name, "retention.ms");
    }
    assert_eq!(parses.get(), 1);
}

#[test]
fn deleted_topics_do_not_grow_the_cache_without_bound() {
    let (_dir, registry) = registry();
    let (cache, parses) = (SettingsCache::default(), Cell::new(0));
    registry.create("kept", 1, BTreeMap::new()).unwrap();
    lookup(&cache, &registry, "kept", &parses).unwrap();
    for i in 0..(10 * SWEEP_FLOOR) {
        let name = format!("gone-{i}");
        registry.create(&name, 1, BTreeMap::new()).unwrap();
        lookup(&cache, &registry, &name, &parses).unwrap();
        registry.delete(&name).unwrap();
        assert!(cache.len() <= SWEEP_FLOOR, "{} entries", cache.len());
    }
    let before = parses.get();
    lookup(&cache, &registry, "kept", &parses).unwrap();
    assert_eq!(
        parses.get(),
        before,
        "a live topic's entry survives the sweeps"
    );
}
