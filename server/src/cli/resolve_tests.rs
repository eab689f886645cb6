//! Resolving the broker's configuration from defaults, a properties file and the flags
//! ([`BrokerConfig::resolve`]), as `rill` does at start (moved from `crate::config`'s tests
//! with the resolution itself).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Parser;

use super::*;
use crate::config::*;

fn cli(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("rill").chain(args.iter().copied())).unwrap()
}

#[test]
fn defaults_match_issue_4() {
    let c = BrokerConfig::resolve(&cli(&[])).unwrap();
    assert_eq!(c.listen, "127.0.0.1:9092".parse().unwrap());
    assert_eq!(
        (c.advertise_host.as_str(), c.advertise_port),
        ("127.0.0.1", 9092)
    );
    assert_eq!(c.data_dir, PathBuf::from("./rill-data"));
    assert_eq!(c.shards, available_cores());
    assert_eq!(c.default_partitions, 1);
    assert!(c.auto_create_topics);
    assert_eq!(c.group.initial_rebalance_delay_ms, 3_000, "Kafka's default");
    assert!(c.log.static_props.is_empty());
    assert!(c.explicit.is_empty());
}

#[test]
fn advertise_follows_listen_unless_given() {
    let c = BrokerConfig::resolve(&cli(&["--listen", "127.0.0.1:19092"])).unwrap();
    assert_eq!(c.advertise_port, 19092);
    let c = BrokerConfig::resolve(&cli(&[
        "--listen",
        "127.0.0.1:19092",
        "--advertise",
        "localhost:29092",
    ]))
    .unwrap();
    assert_eq!(
        (c.advertise_host.as_str(), c.advertise_port),
        ("localhost", 29092)
    );
}

#[test]
fn unclean_election_is_a_log_default_the_controller_reads_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(
        &path,
        "node.id=1\nprocess.roles=broker,controller\n\
         listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n\
         controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n\
         unclean.leader.election.enable=true\nauto.leader.rebalance.enable=false\n",
    )
    .unwrap();
    let c = BrokerConfig::resolve(&cli(&["--config", path.to_str().unwrap()])).unwrap();
    assert_eq!(
        c.log.topic_default("unclean.leader.election.enable"),
        "true"
    );
    let leadership = &c.cluster.as_ref().unwrap().leadership;
    assert!(leadership.unclean_election && !leadership.auto_rebalance);
}

#[test]
fn file_then_flags_override() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(
        &path,
        "# kafka style\nnum.partitions=3\nlog.segment.bytes = 1048576\n\
         log.retention.ms=-1\nlog.flush.interval.messages=100\n\
         auto.create.topics.enable=false\nsome.unknown.key=1\n\
         listeners=PLAINTEXT://127.0.0.1:9999\nrill.read.cache.bytes=1000\n\
         rill.read.ahead.hold.ms=0\nrill.read.cache.write.through=false\n\
         rill.read.ahead.hold.piece.bytes=131072\n\
         transaction.max.timeout.ms=60000\n\
         transaction.abort.timed.out.transaction.cleanup.interval.ms=200\n\
         group.initial.rebalance.delay.ms=250\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let c = BrokerConfig::resolve(&cli(&["--config", p])).unwrap();
    assert_eq!(c.default_partitions, 3);
    assert_eq!(c.txn.max_timeout_ms, 60_000);
    assert_eq!(c.txn.abort_check_interval_ms, 200);
    assert_eq!(c.group.initial_rebalance_delay_ms, 250);
    assert_eq!(c.read_cache_bytes_per_shard(), 1000);
    assert!(!c.read_cache_write_through);
    assert_eq!(c.read_ahead_hold_ms, 0);
    assert_eq!(c.read_ahead_hold_piece_bytes, 128 << 10);
    assert_eq!(c.log.topic_default("segment.bytes"), "1048576");
    assert_eq!(c.log.topic_default("retention.ms"), "-1");
    assert_eq!(c.log.topic_default("flush.messages"), "100");
    assert!(c.explicit.contains("num.partitions") && c.explicit.contains("listeners"));
    assert!(!c.auto_create_topics);
    assert_eq!(c.listen.port(), 9999);
    let c = BrokerConfig::resolve(&cli(&[
        "--config",
        p,
        "--default-partitions",
        "5",
        "--auto-create-topics",
        "true",
        "--group-initial-rebalance-delay-ms",
        "0",
    ]))
    .unwrap();
    assert_eq!(c.default_partitions, 5);
    assert_eq!(c.group.initial_rebalance_delay_ms, 0);
    assert!(c.auto_create_topics);
}

/// Kafka's property names turn the authorizer on; another authorizer class stops the start.
#[test]
fn bad_values_are_errors_not_ignored() {
    let mut c = BrokerConfig::defaults();
    for (k, v) in [
        ("num.partitions", "0"),
        ("num.partitions", "x"),
        ("auto.create.topics.enable", "yes"),
        ("log.retention.ms", "-5"),
        ("log.flush.interval.ms", "-2"),
        ("log.cleanup.policy", "shred"),
        ("log.retention.hours", "x"),
        ("log.segment.bytes", "0"),
        ("rill.broker.partitions.max", "0"),
        ("rill.shard.open.files.max", "-3"),
        ("rill.partition.idle.ms", "0"),
        ("group.initial.rebalance.delay.ms", "-1"),
        ("group.initial.rebalance.delay.ms", "3s"),
        ("group.max.size", "0"),
        ("rill.shard.groups.max", "0"),
        ("producer.id.expiration.ms", "0"),
        ("rill.partition.producers.max", "0"),
        ("rill.shard.transactional.ids.max", "0"),
        ("transactional.id.expiration.ms", "0"),
    ] {
        let map = BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(c.apply_properties(&map).is_err(), "{k}={v} accepted");
    }
    assert!(Cli::try_parse_from(["rill", "--auto-create-topics", "maybe"]).is_err());
    assert!(BrokerConfig::resolve(&cli(&["--shards", "100000"])).is_err());
    assert!(BrokerConfig::resolve(&cli(&["--listen", "nonsense"])).is_err());
    let negative = Cli::try_parse_from(["rill", "--group-initial-rebalance-delay-ms=-5"]);
    assert!(negative.is_ok_and(|c| BrokerConfig::resolve(&c).is_err()));
}

#[test]
fn admin_listener_defaults_to_9644_and_can_be_moved_or_switched_off() {
    let c = BrokerConfig::resolve(&cli(&[])).unwrap();
    assert_eq!(c.admin.listen, Some("127.0.0.1:9644".parse().unwrap()));
    assert!(c.admin.limits.partition_series);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(
        &path,
        "rill.admin.listen=127.0.0.1:19644\nrill.metrics.topics.max=7\n\
         rill.metrics.partition.series.enable=false\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let c = BrokerConfig::resolve(&cli(&["--config", p])).unwrap();
    assert_eq!(c.admin.listen, Some("127.0.0.1:19644".parse().unwrap()));
    assert_eq!(c.admin.limits.topics_max, 7);
    assert!(!c.admin.limits.partition_series);
    let c = BrokerConfig::resolve(&cli(&["--config", p, "--admin-listen", "OFF"])).unwrap();
    assert_eq!(c.admin.listen, None);
    assert!(BrokerConfig::resolve(&cli(&["--admin-listen", "nowhere"])).is_err());
    let mut c = BrokerConfig::defaults();
    for (k, v) in [
        ("rill.metrics.topics.max", "0"),
        ("rill.metrics.partition.series.enable", "sometimes"),
    ] {
        let map = BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(c.apply_properties(&map).is_err(), "{k}={v} accepted");
    }
}

#[test]
fn connection_and_memory_bounds_take_kafkas_names_and_defaults() {
    let c = BrokerConfig::resolve(&cli(&["--shards", "2"])).unwrap();
    assert_eq!(
        c.connections.idle_ms,
        rill_types::DurationMs(600_000),
        "Kafka's connections.max.idle.ms"
    );
    assert_eq!(c.connections.per_ip, i32::MAX as usize);
    assert_eq!(c.fetch_max_bytes, 57_671_680, "Kafka's fetch.max.bytes");
    assert_eq!(c.queued_max_request_bytes(), 512 << 20, "256 MiB per shard");
    assert_eq!(c.shard_request_bytes_max(), 256 << 20);
    assert!(c.max_connections() >= 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(
        &path,
        "max.connections=4000\nmax.connections.per.ip=10\n\
         max.connections.per.ip.overrides=127.0.0.1:200,[::1]:5\n\
         connections.max.idle.ms=-1\nqueued.max.request.bytes=200000000\n\
         fetch.max.bytes=1048576\nrill.shard.fetch.bytes.max=8388608\n\
         socket.request.max.bytes=1000000\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let c = BrokerConfig::resolve(&cli(&["--config", p, "--shards", "4"])).unwrap();
    assert_eq!(c.max_connections(), 4000);
    let limits = c.connection_quota_limits();
    assert_eq!(limits.per_ip, 10);
    assert_eq!(limits.per_ip_overrides[&"127.0.0.1".parse().unwrap()], 200);
    assert_eq!(limits.per_ip_overrides[&"::1".parse().unwrap()], 5);
    assert_eq!(c.connections.idle(), None, "negative: never idle out");
    assert_eq!(c.queued_max_request_bytes(), 200_000_000);
    assert_eq!(
        c.shard_request_bytes_max(),
        50_000_000,
        "split among 4 shards"
    );
    assert_eq!(
        (c.fetch_max_bytes, c.shard_fetch_bytes_max),
        (1 << 20, 8 << 20)
    );
    // A share never below one largest request (and its size prefix).
    let mut small = c.clone();
    small.shards = 1000;
    assert_eq!(small.shard_request_bytes_max(), 1_000_004);
    // Kafka's -1 keeps Rill's bound.
    let mut c = BrokerConfig::defaults();
    let map = BTreeMap::from([("queued.max.request.bytes".into(), "-1".into())]);
    c.apply_properties(&map).unwrap();
    assert_eq!(c.queued_max_request_bytes, None);
}

#[test]
fn bad_bounds_are_refused_as_kafka_refuses_them() {
    let mut c = BrokerConfig::defaults();
    for (k, v) in [
        ("max.connections", "0"),
        ("max.connections", "3000000000"),
        ("max.connections.per.ip", "-1"),
        ("max.connections.per.ip.overrides", "nocount"),
        ("max.connections.per.ip.overrides", "127.0.0.1:x"),
        ("fetch.max.bytes", "0"),
        ("socket.request.max.bytes", "0"),
        ("connections.max.idle.ms", "soon"),
    ] {
        let map = BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(c.apply_properties(&map).is_err(), "{k}={v} accepted");
    }
    let dir = tempfile::tempdir().unwrap();
    for text in [
        "queued.max.request.bytes=1000\n",
        "max.connections.per.ip=0\n",
    ] {
        let path = dir.path().join("bad.properties");
        std::fs::write(&path, text).unwrap();
        let resolved = BrokerConfig::resolve(&cli(&["--config", path.to_str().unwrap()]));
        assert!(resolved.is_err(), "{text} accepted");
    }
}

#[test]
fn missing_config_file_is_an_error() {
    assert!(BrokerConfig::resolve(&cli(&["--config", "/nonexistent/rill.properties"])).is_err());
}
