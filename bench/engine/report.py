"""The machine the figures come from, and the printed table of every figure against its target."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from bench.engine.scale import (
    TARGET_EVENTS_PER_S,
    TARGET_GATE_NEVER_SLOWER,
    TARGET_GATE_SPEEDUP,
    TARGET_REWRITE_MS,
    TARGET_SIZE_RATIO,
    Json,
)


def machine() -> Json:
    """What the figures were measured on."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count() or 0
    return {
        "nproc": nproc,
        "cpu_model": model,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def print_report(report: Json) -> None:
    """The human-readable table."""
    mixed, size, gate = (report["figures"][k] for k in ("mixed", "size", "gate"))
    unique = report["figures"]["mixed_unique"]
    m = report["machine"]
    print(f"\nspanguard engine benchmark ({report['mode']}), {report['date']}")
    print(f"machine: {m['nproc']} cpu, {m['cpu_model']}, Python {m['python']}")
    print(f"load average at start: {m['loadavg_at_start']}\n")
    rows = [
        ("1. mixed workload throughput", "", "", ""),
        (
            f"   {mixed['sessions']} sessions, {mixed['events']} events",
            f"{mixed['events_per_s']:,} ev/s ({mixed['us_per_event']} us/ev)",
            f">= {TARGET_EVENTS_PER_S:,.0f} ev/s",
            _met(mixed["met"]),
        ),
        (
            f"   same, CPython's default GC {tuple(mixed['python_default_gc']['gc_thresholds'])}",
            f"{mixed['python_default_gc']['events_per_s']:,} ev/s",
            "(spanguard sets " + str(tuple(mixed["gc_thresholds"])) + ")",
            "",
        ),
        (
            f"   same, unique texts (scan cache off), {unique['events']} events",
            f"{unique['events_per_s']:,} ev/s ({unique['us_per_event']} us/ev)",
            f">= {TARGET_EVENTS_PER_S:,.0f} ev/s",
            _met(unique["met"]),
        ),
        ("2. per-event cost vs session size", "", "", ""),
        (f"   {size['small']['spans']} spans", f"{size['small']['us_per_event']} us/ev", "", ""),
        (f"   {size['big']['spans']} spans", f"{size['big']['us_per_event']} us/ev", "", ""),
        (
            f"   ratio {size['big']['spans']}/{size['small']['spans']}",
            f"{size['ratio']}x",
            f"<= {TARGET_SIZE_RATIO}x",
            _met(size["met"]),
        ),
    ]
    for label in ("small", "big"):
        rw = size[label]["rewrite"]
        big = label == "big"
        rows.append(
            (
                f"   rewrite, {rw['snapshot_spans']}-span snapshot, 3 spans changed",
                f"{rw['ms_per_rewrite']} ms ({rw['us_per_snapshot_span']} us/span)",
                f"<= {TARGET_REWRITE_MS:g} ms" if big else "",
                _met(rw["ms_per_rewrite"] <= TARGET_REWRITE_MS) if big else "",
            )
        )
    rows.append((f"3. gate vs seed-style gate ({gate['spans']} spans)", "", "", ""))
    for name, case in gate["cases"].items():
        target = TARGET_GATE_SPEEDUP if "selected" not in name else TARGET_GATE_NEVER_SLOWER
        rows.append(
            (
                f"   {name}: {case['committed']} committed, {case['pinned']} pinned",
                f"warm {case['speedup_gate']}x, event {case['speedup_event']}x,"
                f" cold {case['speedup_cold']}x (engine {_us(case['engine_gate_us'])}"
                f" / {_us(case['engine_event_us'])} / {_us(case['engine_gate_cold_us'])},"
                f" naive {_us(case['naive_gate_us'])})",
                f">= {target:g}x",
                _met(case["naive_gate_us"] / case["engine_gate_us"] >= target),
            )
        )
    decode, memory = report["figures"]["decode"], report["figures"]["memory"]
    rows.append(("4. decode (CPU time per call)", "", "", ""))
    for kind, value in decode["us_per_decode"].items():
        rows.append(
            (
                f"   {kind}",
                f"{value} us",
                f"<= {decode['target_us']:g} us",
                _met(value <= decode["target_us"]),
            )
        )
    rows.append(("5. memory", "", "", ""))
    rows.append(
        (
            f"   {memory['live_spans']:,} live spans, {memory['sessions']} sessions",
            f"{memory['bytes_per_live_span']} B/span",
            f"<= {memory['target']:g} B",
            _met(memory["met"]),
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    header = ("measure", "figure", "target", "")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    for figures, which in ((mixed, ""), (unique, ", unique texts")):
        print(f"\nmixed workload{which}, cost by input type (median run):")
        for kind, row in figures["per_type"].items():
            print(
                f"  {kind:20s} {row['events']:>7} events  {row['us_per_event']:>8.1f} us/event"
                f"  {row['share_of_time']:>6.1%} of the time"
            )
    print(f"\ninput mix: {mixed['input_mix']}")
    print(f"output mix: {mixed['output_mix']}")
    print(f"gate method: {gate['method']}")
    for key, order in (("profile", "own time"), ("profile_cumulative", "cumulative time")):
        if report.get(key):
            print(f"\ncProfile of the mixed workload (top 15 by {order}):")
            for line in report[key]:
                print("  " + line)
    print("\nissue 11's targets:")
    for target in report["targets"]:
        print(
            f"  {_met(target['met']):7s}  {target['name']}: {target['value']} "
            f"(target {target['target']})"
        )


def _us(value: float) -> str:
    return f"{value / 1000:.1f} ms" if value >= 1000 else f"{value:.0f} us"


def _met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def issue_targets(figures: Json) -> list[Json]:
    """Every target of issue 11 with its figure from this run, met or not."""
    mixed, size, gate = figures["mixed"], figures["size"], figures["gate"]
    decode, memory = figures["decode"], figures["memory"]
    rewrite_ms = size["big"]["rewrite"]["ms_per_rewrite"]
    targets: list[Json] = [
        {
            "name": "mixed workload throughput (events/s, one core)",
            "value": mixed["events_per_s"],
            "target": f">= {TARGET_EVENTS_PER_S:,.0f}",
            "met": mixed["met"],
        },
        {
            "name": "the same, unique texts (scan cache off)",
            "value": figures["mixed_unique"]["events_per_s"],
            "target": f">= {TARGET_EVENTS_PER_S:,.0f}",
            "met": figures["mixed_unique"]["met"],
        },
        {
            "name": f"per-event cost ratio, {size['big']['spans']:,} vs "
            f"{size['small']['spans']} spans",
            "value": size["ratio"],
            "target": f"<= {TARGET_SIZE_RATIO}",
            "met": size["met"],
        },
        {
            "name": "gate vs seed-style rescan, small selections (worst of threshold, keep_top_k)",
            "value": gate["speedup"],
            "target": f">= {TARGET_GATE_SPEEDUP:.0f}x",
            "met": gate["met"],
        },
        {
            "name": "gate vs seed-style rescan, any selection (worst case: half the session)",
            "value": gate["worst_speedup_any_selection"],
            "target": f">= {TARGET_GATE_NEVER_SLOWER:g}x",
            "met": gate["never_slower_met"],
        },
        *(
            {
                "name": f"the same, {label}",
                "value": gate[f"worst_speedup_{kind}_any_selection"],
                "target": f">= {TARGET_GATE_NEVER_SLOWER:g}x",
                "met": gate[f"worst_speedup_{kind}_any_selection"] >= TARGET_GATE_NEVER_SLOWER,
            }
            for kind, label in (
                ("event", "whole event (decode, duplicate window, gate)"),
                ("cold", "cold (right after a full collection)"),
            )
        ),
        {
            "name": f"rewrite of a {size['big']['rewrite']['snapshot_spans']:,}-span snapshot "
            "changing 3 spans (ms)",
            "value": rewrite_ms,
            "target": f"<= {TARGET_REWRITE_MS:g}",
            "met": rewrite_ms <= TARGET_REWRITE_MS,
        },
    ]
    for kind, value in decode["us_per_decode"].items():
        targets.append(
            {
                "name": f"decode + validate a {kind} (us, CPU)",
                "value": value,
                "target": f"<= {decode['target_us']:g}",
                "met": value <= decode["target_us"],
            }
        )
    targets.append(
        {
            "name": f"bytes per live span, {memory['live_spans']:,} spans (tracemalloc)",
            "value": memory["bytes_per_live_span"],
            "target": f"<= {memory['target']:g}",
            "met": memory["met"],
        }
    )
    return targets
