"""``GET /fleet``: the tenants' windows, the active alerts and the worst sessions.

Each worker holds the tenants of its own partitions of ``<prefix>.fleet``;
the view also lists each tenant's compacted sessions with their worst
compaction outcome, which the dashboard (and ``?outcome=``) filters by.
:func:`local_view` is that part, :func:`merge_views` joins the parts of every
worker into the fleet (tenants are disjoint between workers). Each part already
sums its tenants into the chart's series (faults per window, by kind) and the
totals, so the merged answer stays small however many tenants there are: per
tenant it lists only the newest ``windows`` windows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from spanguard.streams.fleet.aggregates import (
    CLEAN,
    CRITICAL,
    LOST,
    OUTCOMES,
    SAVED,
    THRASHING,
    WARNING,
    Window,
    WindowCounts,
    outcome_rank,
    worst_outcome,
)
from spanguard.streams.fleet.evaluator import FleetEvaluator
from spanguard.streams.fleet.times import to_datetime
from spanguard.streams.fleet.topk import SpaceSaving

WORST_PER_TENANT = 3
"""Worst sessions listed per tenant (every listed tenant gets its own, so a quiet
tenant is never pushed out of the list by a noisy one)."""
SERIES_WINDOWS = 30
"""Windows in the chart's series (the newest ones)."""
MIN_SERIES_WINDOWS = 10
"""Windows the chart's axis spans at least."""
MAX_TENANTS = 200
"""Tenants listed by default (the most faults in their newest window first)."""

COMPACTED_PER_TENANT = 20
"""Compacted sessions listed per tenant (the worst first)."""

_TOTALS = (
    "faults",
    "events",
    "sessions",
    "cycles",
    "healthy_cycles",
    "refused",
    "pins",
    "compactions",
    "tokens_saved",
    "keys_lost",
    "thrashing_sessions",
    "expired",
    *(f"compactions_{o}" for o in OUTCOMES),
)
SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


def iso(ts: float | None) -> str | None:
    """Seconds since the epoch -> RFC 3339 UTC text."""
    if ts is None:
        return None
    return to_datetime(ts).isoformat().replace("+00:00", "Z")


def local_view(
    evaluator: FleetEvaluator, windows: int = 1, allowed: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """This worker's tenants (those ``allowed``, all by default), each with its newest
    ``windows`` windows, plus their share of the series, totals, alerts and worst
    sessions (computed over those tenants only)."""
    size = evaluator.settings.window_seconds
    tenants = []
    alerts = []
    worst: list[dict[str, Any]] = []
    compacted: list[dict[str, Any]] = []
    series: dict[float, dict[str, int]] = {}
    severities: dict[str, str] = {}
    totals = dict.fromkeys(_TOTALS, 0)
    for name in sorted(evaluator.tenants):
        if allowed is not None and not allowed(name):
            continue
        state = evaluator.tenants[name]
        recent = sorted(state.windows)[-SERIES_WINDOWS:]
        for start in recent:
            counts = state.windows[start]
            bucket = series.setdefault(start, {})
            for kind, n in counts.by_kind().items():
                bucket[kind] = bucket.get(kind, 0) + n
            for key in counts.faults:
                kind, _, severity = key.partition("|")
                if SEVERITY_RANK.get(severity, 0) >= SEVERITY_RANK.get(
                    severities.get(kind, ""), -1
                ):
                    severities[kind] = severity
            totals["faults"] += counts.fault_total
            totals["refused"] += counts.refused
            totals["pins"] += counts.pins
            totals["events"] += counts.events
            totals["sessions"] += counts.sessions
            totals["cycles"] += counts.cycles
            totals["healthy_cycles"] += counts.healthy
            totals["compactions"] += counts.compaction_total
            totals["tokens_saved"] += counts.tokens_saved
            totals["keys_lost"] += counts.keys_lost
            totals["thrashing_sessions"] += counts.thrashing_sessions
            totals["expired"] += counts.expired
            for outcome in OUTCOMES:
                totals[f"compactions_{outcome}"] += counts.compactions.get(outcome, 0)
        compacted.extend(_compacted_sessions(name, [state.windows[s] for s in recent]))
        rows = []
        for start in recent[-windows:] if windows > 0 else []:
            window = Window(start, start + size)
            rows.append(
                {
                    "start": iso(window.start),
                    "end": iso(window.end),
                    "start_ts": window.start,
                    "closed": window.end <= state.closed_through,
                    **state.windows[start].summary(),
                }
            )
        tenants.append(
            {
                "tenant": name,
                "watermark": iso(state.watermark),
                "windows": rows,
                "active_alerts": len(state.book.active()),
            }
        )
        for alert in state.book.active():
            alerts.append(
                {
                    "tenant": name,
                    "rule": alert.rule,
                    "severity": alert.severity.value,
                    "status": alert.status,
                    "since": iso(alert.first_window.start),
                    "window": {
                        "start": iso(alert.last_window.start),
                        "end": iso(alert.last_window.end),
                    },
                    "count": alert.count,
                    "sessions": alert.sessions,
                }
            )
        merged = SpaceSaving.merged((state.windows[s].top for s in recent), WORST_PER_TENANT)
        worst.extend(
            {"tenant": name, "session_id": session, "score": score, "error": error}
            for session, score, error in merged.top(WORST_PER_TENANT)
        )
    return {
        "window_seconds": size,
        "tenants": tenants,
        "alerts": alerts,
        "worst": worst,
        "compacted": compacted,
        "series": [[start, kinds] for start, kinds in sorted(series.items())],
        "severities": severities,
        "totals": totals,
    }


def _compacted_sessions(tenant: str, windows: Sequence[WindowCounts]) -> list[dict[str, Any]]:
    """The tenant's compacted sessions over ``windows`` (figures summed), the worst
    :data:`COMPACTED_PER_TENANT` first."""
    summed: dict[str, list[int]] = {}
    for counts in windows:
        for session, figures in counts.compacted.items():
            known = summed.setdefault(session, [0] * len(figures))
            for i, n in enumerate(figures):
                known[i] += n
    rows = [
        {
            "tenant": tenant,
            "session_id": session,
            "outcome": worst_outcome(figures),
            "compactions": figures[CLEAN] + figures[WARNING] + figures[CRITICAL],
            "clean": figures[CLEAN],
            "warning": figures[WARNING],
            "critical": figures[CRITICAL],
            "thrashing": figures[THRASHING],
            "tokens_saved": figures[SAVED],
            "keys_lost": figures[LOST],
        }
        for session, figures in summed.items()
    ]
    rows.sort(key=_compacted_order)
    return rows[:COMPACTED_PER_TENANT]


def _compacted_order(row: dict[str, Any]) -> tuple[int, int, int, int, str, str]:
    """Worst outcome first, then thrashing, critical and all compactions, then names."""
    outcome = row.get("outcome")
    rank = outcome_rank(outcome) if outcome is not None else -1
    return (
        -rank,
        -int(row["thrashing"]),
        -int(row["critical"]),
        -int(row["compactions"]),
        row["tenant"],
        row["session_id"],
    )


def merge_views(
    parts: Sequence[dict[str, Any]],
    unreachable: int = 0,
    max_tenants: int = MAX_TENANTS,
    outcome: str | None = None,
) -> dict[str, Any]:
    """The fleet view from every worker's :func:`local_view`; ``outcome``
    (``clean``, ``warning``, ``critical``) keeps only the compacted sessions whose
    worst compaction had it."""
    size = next((p["window_seconds"] for p in parts if "window_seconds" in p), 60.0)
    tenants: dict[str, dict[str, Any]] = {}
    for part in parts:
        for tenant in part.get("tenants", []):
            tenants.setdefault(tenant["tenant"], tenant)
    alerts = [a for p in parts for a in p.get("alerts", [])]
    alerts.sort(key=lambda a: (-_severity_rank(a["severity"]), a["tenant"], a["rule"]))
    ordered = sorted(tenants.values(), key=lambda t: (-_newest_faults(t), t["tenant"]))
    listed = {t["tenant"] for t in ordered[:max_tenants]}
    worst = [w for p in parts for w in p.get("worst", []) if w["tenant"] in listed]
    worst.sort(key=lambda w: (-w["score"], w["tenant"], w["session_id"]))
    compacted = [
        c
        for p in parts
        for c in p.get("compacted", [])
        if c["tenant"] in listed and (outcome is None or c.get("outcome") == outcome)
    ]
    compacted.sort(key=_compacted_order)
    totals = dict.fromkeys(_TOTALS, 0)
    for part in parts:
        for key in _TOTALS:
            totals[key] += int(part.get("totals", {}).get(key, 0))
    return {
        "window_seconds": size,
        "tenant_count": len(ordered),
        "tenants": ordered[:max_tenants],
        "alerts": alerts,
        "worst_sessions": worst,
        "worst_per_tenant": WORST_PER_TENANT,
        "compacted_sessions": compacted,
        "compacted_per_tenant": COMPACTED_PER_TENANT,
        "compaction_outcome": outcome,
        "series": _series(parts, size),
        "totals": {
            "tenants": len(ordered),
            "faults": totals["faults"],
            "events": totals["events"],
            "session_windows": totals["sessions"],
            "cycles": totals["cycles"],
            "refused": totals["refused"],
            "pins": totals["pins"],
            "healthy_share": (
                totals["healthy_cycles"] / totals["cycles"] if totals["cycles"] else None
            ),
            "compactions": totals["compactions"],
            "compactions_by_outcome": {o: totals[f"compactions_{o}"] for o in OUTCOMES},
            "tokens_saved": totals["tokens_saved"],
            "keys_lost": totals["keys_lost"],
            "thrashing_sessions": totals["thrashing_sessions"],
            "sessions_expired": totals["expired"],
        },
        "workers": len(parts),
        "unreachable_workers": unreachable,
    }


def _series(parts: Sequence[dict[str, Any]], size: float) -> dict[str, Any]:
    summed: dict[float, dict[str, int]] = {}
    for part in parts:
        for start, kinds in part.get("series", []):
            bucket = summed.setdefault(float(start), {})
            for kind, n in kinds.items():
                bucket[kind] = bucket.get(kind, 0) + int(n)
    # A continuous axis ending at the newest window: windows in which nothing
    # happened are zeros, not gaps. It starts at the first window with data (at
    # least MIN_SERIES_WINDOWS back, at most SERIES_WINDOWS), so a young fleet's
    # bars are not squeezed against the right edge of an empty half hour.
    last = max(summed, default=None)
    starts: list[float] = []
    if last is not None:
        first = min(summed)
        count = min(SERIES_WINDOWS, max(MIN_SERIES_WINDOWS, round((last - first) / size) + 1))
        starts = [last - size * i for i in reversed(range(count))]
    per_minute = 60.0 / size
    by_kind: dict[str, list[float]] = {}
    for at, start in enumerate(starts):
        for kind, n in summed.get(start, {}).items():
            by_kind.setdefault(kind, [0.0] * len(starts))[at] = n * per_minute
    severities: dict[str, str] = {}
    for part in parts:
        for kind, severity in part.get("severities", {}).items():
            if SEVERITY_RANK.get(severity, 0) >= SEVERITY_RANK.get(severities.get(kind, ""), -1):
                severities[kind] = severity
    # Most severe kinds first (the chart stacks them at the bottom, the legend lists
    # them first), then by name.
    order = sorted(by_kind, key=lambda k: (-SEVERITY_RANK.get(severities.get(k, ""), 0), k))
    return {
        "starts": [iso(s) for s in starts],
        "window_seconds": size,
        "faults_per_minute_by_kind": {kind: by_kind[kind] for kind in order},
        "severity_by_kind": {kind: severities.get(kind, "warning") for kind in order},
    }


def _newest_faults(tenant: dict[str, Any]) -> int:
    rows = tenant.get("windows") or []
    return int(rows[-1]["faults"]) if rows else 0


def _severity_rank(severity: str) -> int:
    return SEVERITY_RANK.get(severity, 0)
