"""kafka-python: admin, produce (none/gzip), group consume with commit."""
import sys
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

bs = sys.argv[1]
admin = KafkaAdminClient(bootstrap_servers=bs)
try:
    admin.create_topics([NewTopic("golden-kp", 2, 1)])
except Exception as e:
    print("create:", e)
for codec in [None, "gzip"]:
    p = KafkaProducer(bootstrap_servers=bs, compression_type=codec, linger_ms=5)
    for i in range(20):
        p.send("golden-kp", key=f"k{i}".encode(), value=f"value {i}".encode(), partition=i % 2,
               headers=[("h", b"v")])
    p.flush(10)
    p.close()
c = KafkaConsumer("golden-kp", bootstrap_servers=bs, group_id="golden-kp-group", auto_offset_reset="earliest",
                  consumer_timeout_ms=8000, enable_auto_commit=False)
got = sum(1 for _ in c)
if got:
    c.commit()
c.close()
try:
    admin.delete_topics(["golden-kp"])
except Exception as e:
    print("delete:", e)
print("kafka-python consumed", got)
