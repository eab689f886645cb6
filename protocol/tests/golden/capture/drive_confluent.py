"""confluent-kafka (current librdkafka): admin, produce with every codec, idempotence, group consume."""
import sys
import time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

bs = sys.argv[1]
admin = AdminClient({"bootstrap.servers": bs})
for f in admin.create_topics([NewTopic("golden-ck", 2, 1)]).values():
    try:
        f.result(10)
    except Exception as e:  # already exists is fine
        print("create:", e)
try:
    for f in admin.describe_configs([ConfigResource("topic", "golden-ck")]).values():
        f.result(10)
except Exception as e:
    print("describe_configs:", e)
try:
    admin.describe_cluster().result(10)
except Exception as e:
    print("describe_cluster:", e)
for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    p = Producer({"bootstrap.servers": bs, "compression.type": codec, "enable.idempotence": codec == "zstd",
                  "linger.ms": 5})
    for i in range(20):
        p.produce("golden-ck", key=f"k{i}", value=f"{codec} value {i}" * 3, partition=i % 2,
                  headers=[("h", b"v")])
    p.flush(10)
c = Consumer({"bootstrap.servers": bs, "group.id": "golden-ck-group", "auto.offset.reset": "earliest",
              "enable.auto.commit": False})
c.subscribe(["golden-ck"])
deadline, got = time.time() + 15, 0
while time.time() < deadline and got < 200:
    m = c.poll(0.5)
    if m is not None and not m.error():
        got += 1
if got:
    c.commit(asynchronous=False)
c.offsets_for_times([TopicPartition("golden-ck", 0, int(time.time() * 1000) - 60000)], 5)
c.committed([TopicPartition("golden-ck", 0)], 5)
c.close()
try:
    for f in admin.create_partitions([NewPartitions("golden-ck", 3)]).values():
        f.result(10)
except Exception as e:
    print("create_partitions:", e)
try:
    list(admin.list_consumer_groups().result(10).valid)
    admin.describe_consumer_groups(["golden-ck-group"])["golden-ck-group"].result(10)
except Exception as e:
    print("groups:", e)
for f in admin.delete_topics(["golden-ck"]).values():
    try:
        f.result(10)
    except Exception as e:
        print("delete:", e)
print("confluent consumed", got)
