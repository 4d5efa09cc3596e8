"""Shared by the SDK examples: connect to `make demo`'s broker, or run offline.

``--bootstrap`` (default 127.0.0.1:9092) and ``--prefix`` (default: the newest
``demo<time>`` prefix on that broker, the one `make demo` just created);
``--offline`` runs the engine in process instead (no broker).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer

from spanguard.streams.sdk import CompactionOutcome, SpanguardClient

TURNS = [
    "Hi! I need help with a billing problem.",
    "My account 8841-C was charged twice for the same order.",
    "Unrelated: what is a good name for a cat? " * 6,
    "And how warm will it be tomorrow? " * 6,
    "Thanks. Please close that account today.",
]
"""The user's turns: the first is the task (protected by default: it stays verbatim);
the last one refers to the account of the second ("that account"): pinned."""


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


async def play(runnable: Any, thread_id: str) -> dict[str, Any]:
    """Send :data:`TURNS` to a LangChain agent or LangGraph graph, on one thread (its
    checkpointer keeps the state between turns); returns the last state."""
    from langchain_core.messages import HumanMessage

    config: Any = {"configurable": {"thread_id": thread_id}}
    result: dict[str, Any] = {}
    for text in TURNS:
        result = await runnable.ainvoke({"messages": [HumanMessage(text)]}, config)
    return result


def report(outcomes: Iterable[CompactionOutcome], state: Mapping[str, Any]) -> None:
    """Print what the guard did to each compaction, the context now and the faults."""
    for outcome in outcomes:
        decision = outcome.decision
        print(f"compaction applied={outcome.applied} kept={list(outcome.kept)}")
        if outcome.vetoed_by:
            print(f"  vetoed: {outcome.note}")
        if outcome.refused:
            print(f"  kept because: {dict(outcome.refused)}")
        if decision is not None:  # the gate's, for what no summary replaces
            print(f"  decision {decision.action} committed={list(decision.committed)}")
            print(f"  refused={decision.refused} timed_out={decision.timed_out} {decision.note}")
        if outcome.compaction is not None:
            record = outcome.compaction
            print(
                f"  context.compacted: merged={record.merged} removed={record.removed} "
                f"tokens {record.tokens_before} -> {record.tokens_after}"
            )
    print("context now:")
    for message in state["messages"]:
        print(f"  {message.type:>5}: {message.text[:70]!r}")
    print(f"faults: {[f['kind'] for f in state.get('spanguard_faults', [])]}")


def run(main: object) -> None:
    """``asyncio.run`` for the examples."""
    asyncio.run(main)  # type: ignore[arg-type]
