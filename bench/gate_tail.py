"""Issue 26's table in one command: the gate's tail, measured as a user would.

    .venv/bin/python -m bench.gate_tail --baseline /tmp/base   # the full table (~25 min)
    .venv/bin/python -m bench.gate_tail --quick                # a smoke run of every row
    .venv/bin/python -m bench.e2e --gate-tail ...              # the same, from bench.e2e
    .venv/bin/python -m bench.gate_tail --markdown bench/results/e2e-gate-tail.json
        # a results file as BENCHMARKS.md's table

(``/tmp/base``: a git worktree of the commit before the change, e.g.
``git worktree add /tmp/base f9da150``, the parent of the pipelined steps.)

For the broker's log on the VM's disk, then on tmpfs (``/dev/shm``), each on a
broker of its own:

1. **capacity**: the shipped worker's events/s (``bench.e2e.worker_throughput``:
   20,000 demo events produced as fast as the producer goes), of this checkout and
   of the baseline's, in turn; "half capacity" below is half of this checkout's;
2. **at-least-once latency** at 1,000 and 2,000 events/s and at half capacity, the
   baseline's worker and this one's alternately, run for run: ``eviction.requested``
   sent -> ``eviction.decided`` read by a separate read-committed consumer, p50 / p99 /
   p99.9, each row with the **broker's one-hop floor** of the same run (a plain
   aiokafka producer and consumer, no worker, one record every 10 ms on a topic of
   their own alongside the load: ``bench.e2e.broker_probe``);
3. **exactly-once** at 1,000 events/s with a commit interval of 0.1 s (the default)
   and 0.02 s: the latency against the interval, and what it costs the broker in
   transactions/s. Each checkpoint is one transaction that ends with the group's
   offset commit, so the transactions are counted in the broker's own log: the
   committed offset-commit records of the workers' group (``__consumer_offsets``)
   in the row's window, and the period between two commits of one partition (the
   interval plus the commit and the step that runs it).

Beside each at-least-once rate, a **relay** row: :mod:`bench.gate_relay` in place of the
worker, writing the outputs the engine made with only the contract's order (a decision
after its session's causes are acknowledged): what that rule and the broker cost
without the guard's own work, a lower bound for any worker that keeps the order.

Then the issue's targets, met or not met, with the floors beside them:
at-least-once at 1,000 events/s with the broker on tmpfs p99 <= 50 ms; the moonshot,
p99 within 2x the broker's floor at half capacity; throughput not lower than before.
With ``--runs N`` a target is judged on the median of its N rows (each row printed).

Results: ``bench/results/e2e-gate-tail.json`` (``-quick`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import struct
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.e2e import (
    MEMORY_DIR,
    Bench,
    fresh_bench,
    gate_latency,
    save_results,
    web_env,
    worker_throughput,
)
from spanguard.streams.sim.scenarios import demo_fleet

OFFSETS_TOPIC = "__consumer_offsets"
TARGET_P99_MS = 50.0
"""At-least-once, 1,000 events/s, broker log on tmpfs (issue 26)."""
MOONSHOT_FLOOR_FACTOR = 2.0
"""Moonshot: p99 within this many times the broker's own floor p99, at half capacity."""
EO_INTERVALS = (0.1, 0.02)
BACKLOG_S = 0.5
"""A row whose last decision came more than this long after the last record was sent,
or whose median latency is above it, measured a worker that fell behind the offered
rate (a backlog: a saturated machine), not the gate's tail."""


# -- the broker's count of transactions ------------------------------------------------


def offset_commit_key(key: bytes | None) -> tuple[str, str, int] | None:
    """(group, topic, partition) of a ``__consumer_offsets`` offset-commit key (key
    versions 0 and 1); None for any other record (group metadata, version 2)."""
    if key is None or len(key) < 2:
        return None
    (version,) = struct.unpack_from(">h", key, 0)
    if version not in (0, 1):
        return None
    at = 2
    fields: list[str] = []
    for _ in range(2):
        (size,) = struct.unpack_from(">h", key, at)
        at += 2
        fields.append(key[at : at + size].decode("utf-8"))
        at += size
    (partition,) = struct.unpack_from(">i", key, at)
    return fields[0], fields[1], partition


async def offset_commits(bootstrap: str, group: str) -> list[tuple[str, int, int]]:
    """(topic, partition, broker timestamp in ms) of every committed offset commit of
    ``group``: one per checkpoint transaction of the worker (``KafkaTransport``'s writer
    commits the offset in the transaction)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([OFFSETS_TOPIC])
    finally:
        await admin.close()
    parts = [TopicPartition(OFFSETS_TOPIC, p["partition"]) for p in described["partitions"]]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        ends = await consumer.end_offsets(parts)
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        found: list[tuple[str, int, int]] = []
        for tp in parts:
            while await consumer.position(tp) < ends[tp]:
                batch = await consumer.getmany(tp, timeout_ms=500, max_records=10_000)
                for r in batch.get(tp, ()):
                    commit = offset_commit_key(r.key)
                    if commit is not None and commit[0] == group and r.value is not None:
                        found.append((commit[1], commit[2], r.timestamp))
        return found
    finally:
        await consumer.stop()


def transaction_rate(
    commits: Iterable[tuple[str, int, int]], topic: str, window_ms: Sequence[int]
) -> dict[str, Any]:
    """Transactions per second of ``topic``'s partitions within ``window_ms``, and the
    median period between two commits of the same partition."""
    start, end = window_ms
    inside = sorted((p, t) for tp, p, t in commits if tp == topic and start <= t <= end)
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(inside) if a[0] == b[0]]
    seconds = max(end - start, 1) / 1000
    return {
        "transactions": len(inside),
        "window_s": round(seconds, 2),
        "per_s": round(len(inside) / seconds, 1),
        "period_p50_ms": round(statistics.median(gaps), 1) if gaps else None,
    }


# -- the rows ---------------------------------------------------------------------------


async def latency_row(
    bench: Bench,
    sessions: int,
    rate: float,
    guarantee: str,
    tree: Path | None,
    label: str,
    relay: bool = False,
    **extra: str,
) -> dict[str, Any]:
    """One gate-latency row with its floor, its transactions/s and the load it ran under
    (with ``relay``: of :mod:`bench.gate_relay`, the floor of the contract's order)."""
    row = await gate_latency(bench, sessions, rate, guarantee, tree, relay, **extra)
    # The relay commits nothing (it is no checkpointing worker).
    commits = [] if relay else await offset_commits(bench.bootstrap, row["group"])
    row["rate_label"] = label
    row["behind_s"] = round((row["window_ms"][1] - row["last_sent_ms"]) / 1000, 2)
    row["transactions"] = transaction_rate(
        commits, row["group"].removesuffix("-app") + ".events", row["window_ms"]
    )
    interval = extra.get("SPANGUARD_COMMIT_INTERVAL")
    row["commit_interval_s"] = float(interval) if interval is not None else None
    row["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(one_line(row), flush=True)
    return row


def medium_rows(
    bench: Bench, trees: Sequence[Path | None], sessions: int, events: int, runs: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Capacities, then every latency row, on one broker."""
    lines = demo_fleet(events // 20)
    capacities = []
    for tree in trees:
        cap = worker_throughput(bench, lines, 1, "capacity", tree, **web_env())
        cap["broker_log"] = bench.log_medium
        cap["load_avg_1m"] = round(os.getloadavg()[0], 2)
        print(
            f"capacity {cap['worker']:>8} broker log on {bench.log_medium}: "
            f"{cap['events_per_s']} events/s (load {cap['load_avg_1m']})",
            flush=True,
        )
        capacities.append(cap)
    half = round(capacities[-1]["events_per_s"] / 2)
    rates = [(1000.0, "1000"), (2000.0, "2000"), (float(half), "half")]
    rows = []
    for _ in range(runs):
        for rate, label in rates:
            for tree in trees:
                rows.append(
                    asyncio.run(
                        latency_row(
                            bench, sessions, rate, "at_least_once", tree, label, **web_env()
                        )
                    )
                )
            rows.append(
                asyncio.run(latency_row(bench, sessions, rate, "at_least_once", None, label, True))
            )
        for interval in EO_INTERVALS:
            rows.append(
                asyncio.run(
                    latency_row(
                        bench,
                        sessions,
                        1000.0,
                        "exactly_once",
                        None,
                        "1000",
                        SPANGUARD_COMMIT_INTERVAL=str(interval),
                        **web_env(),
                    )
                )
            )
    return capacities, rows


# -- the report -------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One target of the issue against its figure (``met`` None: not measured)."""

    name: str
    figure: str
    target: str
    met: bool | None
    backlog: str = ""
    """Why a judged row measured a backlog, if one did."""

    def line(self) -> str:
        state = {True: "met", False: "NOT met", None: "not measured"}[self.met]
        warning = (
            f" [BACKLOG: {self.backlog}; this measures a saturated machine, not the gate]"
            if self.backlog
            else ""
        )
        return f"{self.name}: {self.figure} (target {self.target}): {state}{warning}"


def _behind(rows: Sequence[dict[str, Any]]) -> str:
    """Why the rows measured a backlog (see ``BACKLOG_S``), or ""."""
    behind = max((r.get("behind_s", 0.0) for r in rows), default=0.0)
    p50 = max((r["p50_ms"] for r in rows), default=0.0)
    if behind > BACKLOG_S:
        return f"the worker ended {behind:g} s behind the offered rate"
    if p50 > BACKLOG_S * 1000:
        return f"p50 {p50:g} ms"
    return ""


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 1)


def _rows(
    rows: Sequence[dict[str, Any]], medium: str, label: str, worker: str = "current"
) -> list[dict[str, Any]]:
    return [
        r
        for r in rows
        if r["guarantee"] == "at_least_once"
        and r["broker_log"] == medium
        and r["rate_label"] == label
        and r["worker"] == worker
    ]


def verdicts(rows: Sequence[dict[str, Any]], capacities: Sequence[dict[str, Any]]) -> list[Verdict]:
    """The issue's targets, judged on the median of the matching rows of this checkout."""
    out: list[Verdict] = []
    media = sorted({r["broker_log"] for r in rows}, key=lambda m: m != "tmpfs")
    for medium in media:
        at = _rows(rows, medium, "1000")
        if at:
            p99 = _median([r["p99_ms"] for r in at])
            floor = _median([r["broker_floor"]["p99_ms"] for r in at])
            relayed = [r["p99_ms"] for r in _rows(rows, medium, "1000", "relay")]
            relay = f", the order alone (relay) p99 {_median(relayed)} ms" if relayed else ""
            out.append(
                Verdict(
                    f"at-least-once, 1,000 events/s, broker log on {medium}: p99",
                    f"{p99} ms, broker floor p99 {floor} ms{relay}",
                    f"<= {TARGET_P99_MS:.0f} ms"
                    + ("" if medium == "tmpfs" else "; the issue's is on tmpfs"),
                    p99 <= TARGET_P99_MS,
                    _behind(at),
                )
            )
    for medium in media:
        half = _rows(rows, medium, "half")
        if half:
            p99 = _median([r["p99_ms"] for r in half])
            floor = _median([r["broker_floor"]["p99_ms"] for r in half])
            rate = half[0]["rate"]
            out.append(
                Verdict(
                    f"moonshot, half capacity ({rate:,.0f} events/s), broker log on {medium}: p99",
                    f"{p99} ms, broker floor p99 {floor} ms ({p99 / floor:.1f}x)"
                    if floor
                    else f"{p99} ms, broker floor p99 {floor} ms",
                    f"<= {MOONSHOT_FLOOR_FACTOR:g} x floor "
                    f"= {MOONSHOT_FLOOR_FACTOR * floor:.1f} ms",
                    p99 <= MOONSHOT_FLOOR_FACTOR * floor,
                    _behind(half),
                )
            )
    by_medium: dict[str, dict[str, int]] = {}
    for cap in capacities:
        by_medium.setdefault(cap["broker_log"], {})[cap["worker"]] = cap["events_per_s"]
    for medium, caps in by_medium.items():
        now = caps.get("current")
        before = [v for k, v in caps.items() if k != "current"]
        name = f"throughput, broker log on {medium}: this checkout / baseline"
        if now is None or not before:
            out.append(Verdict(name, f"{now} events/s, no baseline (--baseline)", ">= 1", None))
        else:
            out.append(
                Verdict(
                    name,
                    f"{now:,} / {before[0]:,} events/s = {now / before[0]:.2f}",
                    ">= 1 (same run)",
                    now >= before[0],
                )
            )
    return out


def _period(tx: dict[str, Any]) -> str:
    """The median commit period, or why there is none (no partition committed twice)."""
    period = tx["period_p50_ms"]
    return "no partition committed twice" if period is None else f"{period} ms"


def exactly_once_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Exactly-once: the decision's latency against the commit interval, and the
    transactions/s it costs the broker (reported, no target)."""
    out = []
    for r in rows:
        if r["guarantee"] != "exactly_once":
            continue
        tx, floor = r["transactions"], r["broker_floor"]
        interval_ms = r["commit_interval_s"] * 1000
        beyond = (
            ""
            if tx["period_p50_ms"] is None
            else f" = the interval + {tx['period_p50_ms'] - interval_ms:.0f} ms of commit and step"
        )
        out.append(
            f"exactly-once, {r['rate']:,.0f} events/s, broker log on {r['broker_log']}, "
            f"commit interval {r['commit_interval_s']:g} s: p50/p99/p99.9 "
            f"{r['p50_ms']}/{r['p99_ms']}/{r['p999_ms']} ms; a partition commits every "
            f"{_period(tx)} (p50){beyond}, {tx['per_s']} transactions/s "
            f"({tx['transactions']} in {tx['window_s']} s); "
            f"broker floor p50/p99 {floor['p50_ms']}/{floor['p99_ms']} ms"
        )
    return out


def one_line(row: dict[str, Any]) -> str:
    """A latency row as one line of the table."""
    floor, tx = row["broker_floor"], row["transactions"]
    interval = row.get("commit_interval_s")
    guarantee = row["guarantee"] + (f" {interval:g}s" if interval else "")
    return (
        f"{row['broker_log']:>5} {guarantee:>19} {row['rate']:>6,.0f}/s {row['worker']:>12}: "
        f"p50/p99/p99.9 {row['p50_ms']}/{row['p99_ms']}/{row['p999_ms']} ms, "
        f"broker floor {floor['p50_ms']}/{floor['p99_ms']}/{floor['p999_ms']} ms, "
        f"{tx['per_s']} tx/s, {row.get('behind_s')} s behind at the end, "
        f"load {row.get('load_avg_1m')}"
    )


def report(rows: Sequence[dict[str, Any]], capacities: Sequence[dict[str, Any]]) -> list[str]:
    """Every row, then the targets met or not met and the exactly-once figures."""
    lines = [one_line(r) for r in rows]
    lines.append("")
    lines.extend(v.line() for v in verdicts(rows, capacities))
    lines.extend(exactly_once_lines(rows))
    return lines


def markdown(rows: Sequence[dict[str, Any]], capacities: Sequence[dict[str, Any]]) -> list[str]:
    """The rows as BENCHMARKS.md's table, the capacities first, then the verdicts."""

    def ms(d: dict[str, Any]) -> str:
        return f"{d['p50_ms']} / {d['p99_ms']} / {d['p999_ms']}"

    out = [
        "| broker log | worker | capacity (events/s) | load (1 min) |",
        "|---|---|---|---|",
        *(
            f"| {c['broker_log']} | {c['worker']} | {c['events_per_s']:,} | {c['load_avg_1m']} |"
            for c in capacities
        ),
        "",
        "| broker log | guarantee | offered (events/s) | worker | p50 / p99 / p99.9 ms "
        "| broker floor p50 / p99 / p99.9 ms | transactions/s (commit period p50) | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        interval = r.get("commit_interval_s")
        guarantee = r["guarantee"].replace("_", "-") + (
            f", interval {interval:g} s" if interval else ""
        )
        offered = f"{r['rate']:,.0f}" + (
            " (half capacity)" if r.get("rate_label") == "half" else ""
        )
        tx = r["transactions"]
        out.append(
            f"| {r['broker_log']} | {guarantee} | {offered} | {r['worker']} | {ms(r)} "
            f"| {ms(r['broker_floor'])} | {tx['per_s']} ({_period(tx)}) "
            f"| {r.get('load_avg_1m')} |"
        )
    out.append("")
    out.extend(f"- {v.line()}" for v in verdicts(rows, capacities))
    out.extend(f"- {line}" for line in exactly_once_lines(rows))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small rows: proves the command")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="the checkout to compare with (a git worktree of the commit before)",
    )
    parser.add_argument("--runs", type=int, default=1, help="rows per rate and worker")
    parser.add_argument("--sessions", type=int, help="sessions per latency row [2000; quick 100]")
    parser.add_argument("--disk-only", action="store_true", help="no tmpfs broker")
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="RESULTS",
        help="print the table of a results file for BENCHMARKS.md, measure nothing",
    )
    args = parser.parse_args(argv)
    if args.markdown is not None:
        saved = json.loads(args.markdown.read_text())
        print("\n".join(markdown(saved["rows"], saved["capacities"])))
        return
    if args.baseline is not None and not (args.baseline / "spanguard").is_dir():
        parser.error(f"{args.baseline} is not a spanguard checkout")
    sessions = args.sessions or (100 if args.quick else 2000)
    events = 4_000 if args.quick else 20_000
    trees: tuple[Path | None, ...] = (None,) if args.baseline is None else (args.baseline, None)
    media: list[Path | None] = [None]
    if MEMORY_DIR.is_dir() and not args.disk_only:
        media.append(MEMORY_DIR)
    capacities: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    started = datetime.now(UTC).isoformat(timespec="seconds")
    for parent in media:
        with fresh_bench(parent) as bench:
            caps, medium = medium_rows(bench, trees, sessions, events, args.runs)
            capacities += caps
            rows += medium
    lines = report(rows, capacities)
    print("\n".join(lines))
    results = {
        "benchmark": "gate_tail",
        "command": " ".join(
            ["python -m bench.gate_tail", *(sys.argv[1:] if argv is None else argv)]
        ),
        "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg_at_end": os.getloadavg(),
        },
        "capacities": capacities,
        "rows": rows,
        "report": lines,
    }
    save_results("e2e-gate-tail-quick.json" if args.quick else "e2e-gate-tail.json", results)


if __name__ == "__main__":
    main()
