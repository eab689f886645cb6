#!/usr/bin/env python3
"""Loopback capture proxy: forwards Kafka traffic and stores each client REQUEST frame.

Usage: proxy.py LISTEN_PORT BROKER_PORT OUT_DIR LABEL [PER_KIND_MAX]

Every request frame (size prefix stripped) is written to
OUT_DIR/<LABEL>-<api_key>-v<api_version>-<n>.bin, keeping at most PER_KIND_MAX frames
per (api key, version) (6x that for Produce, so every codec is kept). Binds 127.0.0.1 only.

Responses pass through unchanged except one repair: an ApiVersions v3+ response whose
top-level tag section is not empty gets it emptied, because librdkafka < 2.2 mis-parses
non-empty tag sections and would otherwise never send anything but
ApiVersions to the capture broker. Only requests are stored, and they are never modified.
"""
import asyncio
import os
import struct
import sys

LISTEN_PORT, BROKER_PORT = int(sys.argv[1]), int(sys.argv[2])
OUT_DIR, LABEL = sys.argv[3], sys.argv[4]
PER_KIND_MAX = int(sys.argv[5]) if len(sys.argv) > 5 else 2
counts = {}


def store(frame: bytes) -> None:
    if len(frame) < 8:
        return
    api_key, api_version = struct.unpack(">hh", frame[:4])
    kind = (api_key, api_version)
    n = counts.get(kind, 0)
    # Produce gets more room so that every compression codec a driver sends is kept.
    if n >= (PER_KIND_MAX * 6 if api_key == 0 else PER_KIND_MAX):
        return
    counts[kind] = n + 1
    name = f"{LABEL}-{api_key:02d}-v{api_version}-{n}.bin"
    with open(os.path.join(OUT_DIR, name), "wb") as f:
        f.write(frame)


def empty_api_versions_tags(frame: bytes) -> bytes:
    """ApiVersions v3 response body (header v0): cut everything after throttle_time_ms, add tag 0."""
    pos = 4 + 2  # correlation id, error code
    count, pos = uvarint(frame, pos)
    pos += max(count - 1, 0) * 7  # api_key, min, max, empty tags
    pos += 4  # throttle_time_ms
    if pos >= len(frame) or frame[pos:] == b"\x00":
        return frame
    return frame[:pos] + b"\x00"


def uvarint(buf: bytes, pos: int):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


async def client_to_broker(reader, writer, flexible_api_versions):
    try:
        while True:
            size_bytes = await reader.readexactly(4)
            (size,) = struct.unpack(">i", size_bytes)
            frame = await reader.readexactly(size)
            store(frame)
            api_key, api_version, correlation_id = struct.unpack(">hhi", frame[:8])
            if api_key == 18 and api_version >= 3:
                flexible_api_versions.add(correlation_id)
            writer.write(size_bytes + frame)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def broker_to_client(reader, writer, flexible_api_versions):
    try:
        while True:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.readexactly(size)
            (correlation_id,) = struct.unpack(">i", frame[:4])
            if correlation_id in flexible_api_versions:
                flexible_api_versions.discard(correlation_id)
                frame = empty_api_versions_tags(frame)
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def handle(client_reader, client_writer):
    broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", BROKER_PORT)
    flexible_api_versions = set()
    await asyncio.gather(
        client_to_broker(client_reader, broker_writer, flexible_api_versions),
        broker_to_client(broker_reader, client_writer, flexible_api_versions),
    )


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", LISTEN_PORT)
    async with server:
        await server.serve_forever()


asyncio.run(main())
