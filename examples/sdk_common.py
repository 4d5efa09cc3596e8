"""Shared by the SDK examples: connect to `make demo`'s broker, or run offline.

``--bootstrap`` (default 127.0.0.1:9092) and ``--prefix`` (default: the newest
``demo<time>`` prefix on that broker, the one `make demo` just created);
``--offline`` runs the engine in process instead (no broker).
"""

from __future__ import annotations

import argparse
import asyncio

from aiokafka import AIOKafkaConsumer

from streams.sdk import SpanguardClient


def parser(description: str) -> argparse.ArgumentParser:
    """The examples' command line."""
    parse = argparse.ArgumentParser(description=description)
    parse.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    parse.add_argument("--prefix", default=None, help="topic prefix (default: newest demo*)")
    parse.add_argument("--offline", action="store_true", help="engine in process, no broker")
    return parse


async def newest_demo_prefix(bootstrap: str) -> str:
    """The newest ``demo<time>`` topic prefix on the broker (what `make demo` creates)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        topics = await consumer.topics()
    finally:
        await consumer.stop()
    prefixes = sorted(t.removesuffix(".decisions") for t in topics if t.endswith(".decisions"))
    demos = [p for p in prefixes if p.startswith("demo")]
    if not demos:
        raise SystemExit(f"no demo topics on {bootstrap}: run `make demo` first, or --offline")
    return demos[-1]


async def make_client(args: argparse.Namespace) -> SpanguardClient:
    """An offline client, or a connected Kafka client (prefix discovered when not given)."""
    if args.offline:
        print("offline: the engine runs in this process")
        return SpanguardClient.offline()
    prefix = args.prefix or await newest_demo_prefix(args.bootstrap)
    print(f"spanguard on {args.bootstrap}, topics {prefix}.*")
    client = SpanguardClient.kafka(args.bootstrap, prefix, timeout=10)
    await client.connect()
    return client


def run(main: object) -> None:
    """``asyncio.run`` for the examples."""
    asyncio.run(main)  # type: ignore[arg-type]
