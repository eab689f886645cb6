"""Tiered storage (issue 31, KIP-405) on one node, against a real S3 server on loopback (moto's
server mode, started here from the .venv): small segments and many rolls; the sealed segments are
copied to the bucket with their indexes; local retention deletes local files only once copied; a
consumer from offset 0 reads every record, bytes identical, through the remote tier; the object
store down at first: produce goes on, local files stay, the upload-lag metric shows it, and once
the store is up the copies resume and nothing is lost. DeleteRecords and topic deletion reach the
bucket; kill -9 during copies, repeated, leaves no orphan object and no dangling metadata, as
`rill check --remote-config` confirms (and it names a stray object as an orphan). Kafka's config checks: a compacted topic
refused with Kafka's message, local retention above total retention refused.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.protocol.consumer.offsets import OffsetSpec as KpOffsetSpec

from broker import free_port, rill_binary
from clients import CLIENT_TIMEOUT_S, admin, consume_partition, create_topic, producer, \
    produce_all, watermarks
from test_admin_listener import http_get, metrics

BUCKET = "rill-tiered"
#: moto accepts any credentials; these are what the broker and boto3 sign with.
KEY_ID, SECRET = "rill-test", "rill-test-secret"
MOTO_START_S = 20.0


class Moto:
    """One moto_server process on a free loopback port (its state lives in memory)."""

    def __init__(self, log_path: Path):
        self.port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        server = Path(sys.executable).with_name("moto_server")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + MOTO_START_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"moto_server exited: {self.log_path.read_text()}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"moto_server did not listen within {MOTO_START_S}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)

    def s3(self):
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)

    def keys(self) -> dict[str, int]:
        """Every object in the bucket, with its size."""
        out, token = {}, None
        while True:
            kwargs = {"Bucket": BUCKET, **({"ContinuationToken": token} if token else {})}
            page = self.s3().list_objects_v2(**kwargs)
            out.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]


@pytest.fixture
def moto(tmp_path):
    m = Moto(tmp_path / "moto.log")
    yield m
    m.stop()


def tiered_broker(broker_factory, tmp_path, moto: Moto, extra: list[str] = ()):
    config = tmp_path / "tiered.properties"
    config.write_text("\n".join([
        "remote.log.storage.system.enable=true",
        f"rill.remote.endpoint={moto.endpoint}",
        f"rill.remote.bucket={BUCKET}",
        "rill.remote.region=us-east-1",
        f"rill.remote.access.key.id={KEY_ID}",
        f"rill.remote.secret.access.key={SECRET}",
        "rill.remote.prefix=tiered",
        "rill.remote.task.interval.ms=200",
        "rill.remote.retry.backoff.ms=200",
        "rill.remote.retry.backoff.max.ms=1000",
        "log.retention.check.interval.ms=200",
        *extra,
    ]) + "\n")
    return broker_factory(config_path=config)


#: Small segments (16 KiB) and a local tier of about two of them: many rolls, many copies.
TIERED = {"remote.storage.enable": "true", "segment.bytes": "16384",
          "local.retention.bytes": "32768"}
RECORDS = 400


def _records(tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"{tag}-{i:06d}-".encode() + bytes([i % 251]) * 480)
            for i in range(RECORDS)]


def _local_segments(b, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (b.data_dir / f"{topic}-0").glob("*.log"))


def _wait(what: str, check, timeout_s: float = 40.0):
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _copied_logs(moto: Moto, topic: str) -> list[str]:
    return sorted(k for k in moto.keys() if f"/{topic}-" in k and k.endswith(".log"))


def _read_all_from_zero(b, topic: str, expected: list[tuple[bytes, bytes]]) -> None:
    small_fetches = {"fetch.max.bytes": 1048576, "max.partition.fetch.bytes": 65536,
                     "message.max.bytes": 1048576}
    got = consume_partition(b.bootstrap, topic, 0, 0, len(expected), **small_fetches)
    assert [m.offset() for m in got[:len(expected)]] == list(range(len(expected)))
    assert [(m.key(), m.value()) for m in got[:len(expected)]] == expected, "bytes differ"


def test_segments_are_copied_local_ones_deleted_and_read_back_from_offset_zero(
        broker_factory, tmp_path, moto, topic_name):
    moto.start()
    moto.s3().create_bucket(Bucket=BUCKET)
    b = tiered_broker(broker_factory, tmp_path, moto)
    create_topic(b.bootstrap, topic_name, config=TIERED)
    records = _records("a")
    produce_all(producer(b.bootstrap, **{"linger.ms": 0, "batch.num.messages": 5}), topic_name,
                records)

    # Copies happen: each sealed segment's .log with its indexes, under the documented layout.
    logs = _wait("segments copied", lambda: (lambda l: l if len(l) >= 8 else None)(
        _copied_logs(moto, topic_name)))
    keys = moto.keys()
    first = logs[0]
    assert first.startswith(f"tiered/{topic_name}-") and "/0/00000000000000000000-" in first
    stem = first[:-len(".log")]
    assert f"{stem}.index" in keys and f"{stem}.timeindex" in keys
    # Local retention deletes local segments, once copied: offset 0's is gone from disk.
    local = _wait("local retention", lambda: (lambda s: s if s and s[0] > 0 and len(s) <= 4
                                              else None)(_local_segments(b, topic_name)))
    low, high = watermarks(b.bootstrap, topic_name, 0)
    assert (low, high) == (0, RECORDS), "the log starts in the remote tier"
    # ListOffsets earliest-local (-4) is the first offset on disk, latest-tiered (-5) the
    # highest copied one (KIP-1005), by kafka-python's admin client.
    before = _local_segments(b, topic_name)   # local retention may still be deleting
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=30000)
    try:
        tp = KpTopicPartition(topic_name, 0)
        earliest_local = kp.list_partition_offsets({tp: KpOffsetSpec.EARLIEST_LOCAL})[tp].offset
        latest_tiered = kp.list_partition_offsets({tp: KpOffsetSpec.LATEST_TIERED})[tp].offset
    finally:
        kp.close()
    after = _local_segments(b, topic_name)
    assert before[0] <= earliest_local <= after[0], (before, earliest_local, after)
    assert earliest_local in before + after, (before, earliest_local, after)
    assert earliest_local - 1 <= latest_tiered < RECORDS, (earliest_local, latest_tiered)

    # A consumer from offset 0 reads every record, bytes identical, through the remote tier.
    _read_all_from_zero(b, topic_name, records)
    m = metrics(f"127.0.0.1:{b.admin_port}")
    assert m["rill_remote_copy_segments_total"] >= len(logs)
    assert m["rill_remote_fetch_requests_total"] > 0
    assert m["rill_remote_fetch_errors_total"] == 0
    # The status (JSON behind the status page) shows the local and the remote extent.
    status = json.loads(http_get(f"127.0.0.1:{b.admin_port}", "/v1/status")[2])
    [part] = [t for t in status["topics"] if t["name"] == topic_name][0]["partitions"]
    assert part["log_start_offset"] == 0 and part["local_log_start_offset"] > 0, part
    assert part["remote_segments"] >= len(logs) and part["remote_bytes"] > 0, part

    # A restart keeps the remote tier: the metadata is durable, reads still go through it.
    b.restart()
    _read_all_from_zero(b, topic_name, records)

    # Configuration: shown by DescribeConfigs, the secret never.
    a = admin(b.bootstrap)
    broker_res = ConfigResource(ResourceType.BROKER, "0")
    described = a.describe_configs([broker_res])[broker_res].result(timeout=CLIENT_TIMEOUT_S)
    assert described["remote.log.storage.system.enable"].value == "true"
    assert described["rill.remote.bucket"].value == BUCKET
    assert described["rill.remote.secret.access.key"].value is None
    assert described["rill.remote.secret.access.key"].is_sensitive
    topic_res = ConfigResource(ResourceType.TOPIC, topic_name)
    described = a.describe_configs([topic_res])[topic_res].result(timeout=CLIENT_TIMEOUT_S)
    assert described["remote.storage.enable"].value == "true"
    assert described["local.retention.bytes"].value == "32768"


def test_kafka_refuses_what_it_refuses(broker_factory, tmp_path, moto, topic_name):
    moto.start()
    b = tiered_broker(broker_factory, tmp_path, moto)
    a = admin(b.bootstrap)

    def refusal(config: dict) -> str:
        futures = a.create_topics([NewTopic(topic_name, 1, 1, config=config)],
                                  request_timeout=CLIENT_TIMEOUT_S)
        with pytest.raises(KafkaException) as raised:
            futures[topic_name].result(timeout=CLIENT_TIMEOUT_S)
        return raised.value.args[0].str()

    assert "Remote log storage is unsupported for the compacted topics" in refusal(
        {"remote.storage.enable": "true", "cleanup.policy": "compact"})
    assert ("Invalid value 2000 for configuration local.retention.ms: Value must not be more "
            "than retention.ms property value: 1000") in refusal(
        {"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"})


def test_the_store_down_produce_goes_on_and_copies_resume(broker_factory, tmp_path, moto,
                                                          topic_name):
    b = tiered_broker(broker_factory, tmp_path, moto)   # moto not started: the store is down
    create_topic(b.bootstrap, topic_name, config=TIERED)
    records = _records("b")
    produce_all(producer(b.bootstrap, **{"linger.ms": 0, "batch.num.messages": 5}), topic_name,
                records)
    admin_address = f"127.0.0.1:{b.admin_port}"
    lag = _wait("upload lag shown", lambda: (lambda m: m if m["rill_remote_upload_lag_segments"]
                                             >= 8 else None)(metrics(admin_address)))
    assert lag["rill_remote_upload_lag_bytes"] > 8 * 10_000
    segments_down = _local_segments(b, topic_name)
    assert segments_down[0] == 0, "nothing deleted locally before it is copied"
    # A stop while copies are being retried is clean, and the copies wait for the next start.
    assert b.stop() == 0, b.log_tail()
    assert "panicked" not in b.log_text(), b.log_tail()
    b.start()

    moto.start()
    moto.s3().create_bucket(Bucket=BUCKET)
    _wait("copies resumed", lambda: metrics(admin_address)["rill_remote_upload_lag_segments"] == 0)
    _wait("local retention after the copies",
          lambda: _local_segments(b, topic_name)[0] > 0)
    assert len(_copied_logs(moto, topic_name)) >= len(segments_down) - 1
    _read_all_from_zero(b, topic_name, records)


def _metadata(b, topic: str) -> dict:
    """The partition's remote log metadata file (server/src/tiered/metadata.rs)."""
    path = b.data_dir / f"{topic}-0" / "remote-log-metadata"
    return json.loads(path.read_text()) if path.exists() else {"segments": []}


def test_delete_records_and_topic_deletion_reach_the_remote_tier(broker_factory, tmp_path, moto,
                                                                 topic_name):
    moto.start()
    moto.s3().create_bucket(Bucket=BUCKET)
    b = tiered_broker(broker_factory, tmp_path, moto)
    create_topic(b.bootstrap, topic_name, config=TIERED)
    records = _records("c")
    produce_all(producer(b.bootstrap, **{"linger.ms": 0, "batch.num.messages": 5}), topic_name,
                records)
    _wait("local retention", lambda: (lambda s: s if s and s[0] > 150 else None)(
        _local_segments(b, topic_name)))
    copied_before = len(_copied_logs(moto, topic_name))

    # DeleteRecords inside the remote tier: the log start moves, nothing below is served, and
    # the copies wholly below it leave the bucket.
    a = admin(b.bootstrap)
    futures = a.delete_records([TopicPartition(topic_name, 0, 100)],
                               request_timeout=CLIENT_TIMEOUT_S)
    assert list(futures.values())[0].result(timeout=CLIENT_TIMEOUT_S).low_watermark == 100
    assert watermarks(b.bootstrap, topic_name, 0) == (100, RECORDS)
    got = consume_partition(b.bootstrap, topic_name, 0, 100, RECORDS - 100)
    assert [(m.key(), m.value()) for m in got[:RECORDS - 100]] == records[100:]
    _wait("copies below the log start deleted",
          lambda: all(s["end_offset"] >= 100 for s in _metadata(b, topic_name)["segments"]))
    assert len(_copied_logs(moto, topic_name)) < copied_before

    # Deleting the topic deletes its remote objects.
    a.delete_topics([topic_name])[topic_name].result(timeout=CLIENT_TIMEOUT_S)
    _wait("remote objects deleted with the topic",
          lambda: not any(f"/{topic_name}-" in k for k in moto.keys()))


def test_kill9_during_copies_leaves_no_orphan_and_no_dangling_metadata(
        broker_factory, tmp_path, moto, topic_name):
    moto.start()
    moto.s3().create_bucket(Bucket=BUCKET)
    b = tiered_broker(broker_factory, tmp_path, moto)
    create_topic(b.bootstrap, topic_name, config=TIERED)
    expected: list[tuple[bytes, bytes]] = []
    for round_ in range(3):
        records = [(k, v) for k, v in _records(f"r{round_}")][:150]
        produce_all(producer(b.bootstrap, **{"linger.ms": 0, "batch.num.messages": 5}),
                    topic_name, records)
        expected += records
        time.sleep(0.1 * (round_ + 1))   # copies in flight at different points
        b.restart(graceful=False)
    admin_address = f"127.0.0.1:{b.admin_port}"
    def caught_up() -> bool:
        # Every sealed segment copied: the copies end where the active segment starts (the
        # lag gauge alone reads 0 before the reopened partition has counted its lag).
        segments = _metadata(b, topic_name)["segments"]
        active = _local_segments(b, topic_name)[-1]
        return bool(segments) and all(s["state"] == "COPY_FINISHED" for s in segments) and \
            max(s["end_offset"] for s in segments) + 1 == active and \
            metrics(admin_address)["rill_remote_upload_lag_segments"] == 0
    _wait("copies caught up", caught_up)
    # Every object belongs to a finished copy the metadata names, and every finished copy's
    # .log, .index and .timeindex are there.
    meta = _metadata(b, topic_name)["segments"]
    ids = {s["id"].replace("-", "") for s in meta}
    keys = [k for k in moto.keys() if f"/{topic_name}-" in k]
    orphans = [k for k in keys if k.rsplit("/", 1)[1].split("-", 1)[1].split(".")[0] not in ids]
    assert not orphans, f"objects no metadata names: {orphans}"
    for s in meta:
        stem = f"{s['base_offset']:020d}-{s['id'].replace('-', '')}"
        for suffix in ("log", "index", "timeindex"):
            assert any(k.endswith(f"/{stem}.{suffix}") for k in keys), f"{stem}.{suffix} missing"
    ends = sorted((s["base_offset"], s["end_offset"]) for s in meta)
    assert all(a[1] + 1 == b_[0] for a, b_ in zip(ends, ends[1:])), f"holes: {ends}"
    _read_all_from_zero(b, topic_name, expected)

    # `rill check --remote-config` says the same, and names an orphan once there is one.
    assert b.stop() == 0
    check = _rill_check(b, tmp_path)
    assert check.returncode == 0, check.stdout
    assert f"ok       remote {topic_name}-0: {len(meta)} copies" in check.stdout, check.stdout
    stray = keys[0].rsplit("/", 1)[0] + "/00000000000000099999-" + "ab" * 16 + ".log"
    moto.s3().put_object(Bucket=BUCKET, Key=stray, Body=b"x")
    check = _rill_check(b, tmp_path)
    assert check.returncode == 1 and f"orphan {stray}" in check.stdout, check.stdout


def _rill_check(b, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([str(rill_binary()), "check", str(b.data_dir), "--remote-config",
                           str(tmp_path / "tiered.properties")],
                          capture_output=True, text=True, timeout=60)


def test_read_committed_through_the_remote_tier_skips_aborted_transactions(
        broker_factory, tmp_path, moto, topic_name):
    moto.start()
    moto.s3().create_bucket(Bucket=BUCKET)
    b = tiered_broker(broker_factory, tmp_path, moto)
    create_topic(b.bootstrap, topic_name, config=TIERED)
    p = producer(b.bootstrap, **{"transactional.id": f"{topic_name}-tx", "linger.ms": 0,
                                 "batch.num.messages": 5})
    p.init_transactions(CLIENT_TIMEOUT_S)
    committed = []
    for t in range(20):   # 20 transactions of 20 records, every third aborted, over many segments
        p.begin_transaction()
        values = [f"t{t:02d}-{i:02d}-".encode() + b"v" * 480 for i in range(20)]
        for v in values:
            p.produce(topic_name, value=v, partition=0)
        p.flush(CLIENT_TIMEOUT_S)
        if t % 3 == 2:
            p.abort_transaction(CLIENT_TIMEOUT_S)
        else:
            p.commit_transaction(CLIENT_TIMEOUT_S)
            committed += values
    _wait("local retention", lambda: (lambda s: s if s and s[0] > 200 else None)(
        _local_segments(b, topic_name)))
    assert any(k.endswith(".txnindex") for k in moto.keys()), "aborted transactions copied"
    got = consume_partition(b.bootstrap, topic_name, 0, 0, len(committed),
                            **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == committed, "read_committed saw aborted records"
    uncommitted = consume_partition(b.bootstrap, topic_name, 0, 0, 400,
                                    **{"isolation.level": "read_uncommitted"})
    assert len([m for m in uncommitted if b"-" in m.value()]) == 400


def test_copies_keep_to_the_bandwidth_bound(broker_factory, tmp_path, moto, topic_name):
    moto.start()
    moto.s3().create_bucket(Bucket=BUCKET)
    # 200 kB/s for the broker, 100 kB/s for each of its 2 shards (one holds the partition).
    b = tiered_broker(broker_factory, tmp_path, moto,
                      extra=["remote.log.manager.copy.max.bytes.per.second=200000"])
    assert b.shards == 2
    create_topic(b.bootstrap, topic_name, config=TIERED)
    produce_all(producer(b.bootstrap, **{"linger.ms": 0, "batch.num.messages": 5}), topic_name,
                _records("d"))
    admin_address = f"127.0.0.1:{b.admin_port}"
    _wait("a first copy", lambda: metrics(admin_address)["rill_remote_copy_bytes_total"] > 0)
    first_seen, first_bytes = time.monotonic(), metrics(admin_address)["rill_remote_copy_bytes_total"]
    _wait("150 kB more copied", lambda: metrics(admin_address)["rill_remote_copy_bytes_total"]
          >= first_bytes + 150_000, timeout_s=60)
    took = time.monotonic() - first_seen
    # 150 kB at 100 kB/s: at least 1.5 s, less one segment's worth of credit (~0.2 s).
    assert took >= 1.2, f"150 kB copied in {took:.2f} s: faster than 100 kB/s"
