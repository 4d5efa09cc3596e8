"""What the demo prints: one line per output that says what it is about, and the
demo fleet moved into wall time.

Lines are :class:`rich.text.Text` built from plain strings, so nothing in the
data (``refused=[u5:PINNED]``, a span id with brackets) is read as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
from rich.text import Text

from spanguard.schemas import OutputEvent

MAX_LISTED = 6
"""Ids listed per line before "+N more"."""
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "white"}


def in_wall_time(lines: Iterable[bytes]) -> Iterator[bytes]:
    """Each line with its ``ts`` set to the moment it is taken (lazily: a producer
    that paces its sends stamps each event when it sends it). Lines that are not
    JSON objects pass unchanged."""
    for line in lines:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            yield line
            continue
        if isinstance(event, dict) and "ts" in event:
            event["ts"] = (
                datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            )
            yield orjson.dumps(event)
        else:
            yield line


def listed(items: Iterable[str], limit: int = MAX_LISTED) -> str:
    """``a, b, c`` (the first ``limit``, then ``+N more``)."""
    values = list(items)
    shown = ", ".join(values[:limit])
    return shown + (f" +{len(values) - limit} more" if len(values) > limit else "")


def fault_subject(data: dict[str, Any]) -> str:
    """What a fault is about: its spans, or for faults about the session as a whole
    (drift, sequence gaps, a stalled pruner) what its evidence says."""
    evidence = data.get("evidence") or {}
    kind = data["kind"]
    if kind == "SEQUENCE_GAP":
        return (
            f"seq {evidence.get('actual')} arrived, {evidence.get('expected')} expected "
            f"({evidence.get('missing')} missing)"
        )
    if kind == "OUT_OF_ORDER":
        return f"seq {evidence.get('actual')} arrived after {evidence.get('expected', '?')}"
    if kind == "MONOTONIC_DRIFT":
        series = evidence.get("series") or []
        last = series[-1] if series else {}
        return (
            f"mean score rose while tokens fell over {evidence.get('consecutive')} rewrites "
            f"in a row (last: tokens {last.get('tokens_before')} -> {last.get('tokens_after')})"
        )
    spans = data.get("span_ids") or []
    if spans:
        return f"spans {listed(spans)}"
    scalars = [f"{k}={v}" for k, v in evidence.items() if isinstance(v, (str, int, float, bool))]
    return listed(scalars, 4) if scalars else "the session"


def demo_line(event: OutputEvent | dict[str, Any]) -> Text:
    """One line for an output (a contract model or its JSON)."""
    data: dict[str, Any] = (
        event if isinstance(event, dict) else event.model_dump(mode="json", exclude_none=False)
    )
    kind = data["type"]
    who = f"{data.get('tenant')}/{data.get('session_id')}"
    line = Text()
    if kind == "integrity.fault":
        severity = data["severity"]
        line.append(f"{severity.upper():9}", SEVERITY_STYLE.get(severity, "white"))
        line.append(f"{data['kind']:<29}{who}  {fault_subject(data)}")
    elif kind == "span.pinned":
        mention = data.get("mention") or {}
        line.append("PIN      ", "cyan")
        line.append(
            f"{data['span_id']:<29}{who}  kept for {listed(data.get('pinned_for') or [])}"
            + (f" (mention of type {mention['type']})" if mention.get("type") else "")
        )
    elif kind == "eviction.decided":
        refused = [f"{r['span_id']}:{r['reason']}" for r in data.get("refused") or []]
        line.append("DECISION ", "green")
        line.append(
            f"{data['action']:<29}{who}  committed={len(data['committed'])} "
            f"refused=[{listed(refused)}] dropped={len(data['dropped'])}"
        )
    elif kind == "fleet.alert":
        style = (
            SEVERITY_STYLE.get(data["severity"], "white") if data["status"] == "firing" else "green"
        )
        line.append(f"ALERT    {data['status'].upper():9}", style)
        line.append(
            f"{data['rule']} ({data['severity']}) tenant={data['tenant']} count={data['count']}"
            + (f" sessions: {listed(data['sessions'], 3)}" if data.get("sessions") else "")
        )
    elif kind == "scores.recompute_requested":
        line.append("RECOMPUTE", "magenta")
        line.append(f" {'':<28}{who}  spans {listed(data['span_ids'])}")
    elif kind == "event.rejected":
        line.append("REJECTED ", "red")
        line.append(f"{data['reason']:<29}{who}  {str(data.get('detail', ''))[:80]}")
    else:
        line.append(f"{kind} {who}")
    return line
