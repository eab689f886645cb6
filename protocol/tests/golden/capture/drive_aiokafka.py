"""aiokafka: produce (none/gzip), group consume with commit."""
import asyncio
import sys
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

bs = sys.argv[1]


async def main():
    for codec in [None, "gzip"]:
        p = AIOKafkaProducer(bootstrap_servers=bs, compression_type=codec)
        await p.start()
        for i in range(20):
            await p.send_and_wait("golden-aio", f"value {i}".encode(), key=f"k{i}".encode(),
                                  headers=[("h", b"v")])
        await p.stop()
    c = AIOKafkaConsumer("golden-aio", bootstrap_servers=bs, group_id="golden-aio-group",
                         auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    got = 0
    try:
        while got < 41:
            batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 10)
            got += sum(len(v) for v in batch.values())
        await c.commit()
    except asyncio.TimeoutError:
        pass
    await c.stop()
    print("aiokafka consumed", got)
    # Last: the capture broker may refuse InitProducerId v0; the request frame is still captured.
    p = AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True)
    try:
        await p.start()
        await p.send_and_wait("golden-aio", b"idempotent")
    except Exception as e:  # noqa: BLE001
        print("idempotent:", e)
    finally:
        await p.stop()


asyncio.run(main())
