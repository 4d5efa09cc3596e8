"""Input lines for the reference model and the differential test.

:class:`SessionWriter` writes one session's events (``seq`` and event ids
filled in); :func:`random_session` drives it with random operations over a
small pool of span ids and identifiers, so that rewrites collide with
evictions, anaphors lose their antecedents and counters climb far more often
than in realistic traffic.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

IDENTIFIERS = ("8841-C", "INC-4411", "ops@example.com", "/var/log/app.log", "B-77")
TYPES = ("account", "incident", "ticket", "vendor")
QUERIES = (None, None, None, "a" * 64, "b" * 64)
NAMED = (
    # Names (contract 1.2) in both cases, shortened, and phrases naming their type...
    "I'd suggest Warkworth House, it is quiet.",
    "What is the phone number of warkworth house?",
    "Is the Warkworth still free?",
    "The Acorn Guest House has parking.",
    "Book the acorn guest house for two nights.",
    "Does the Acorn take dogs?",
    "That house looks nice.",
    "I would rather stay at the guest house.",
    "There is also a place called allenbell.",
    # ...codes, phones and tool results, and a city used as a location.
    "Your reference is EZNVJAPG.",
    "The phone number is 01223 356354.",
    'get_reservation: {"reservation_id": "NO6JO3", "hotel_name": "Warkworth House", "price": 1268}',
    "Take a train to Cambridge at 10:30.",
)


def sha(text: str) -> str:
    """The contract's text hash."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SessionWriter:
    """Builds the JSON lines of one session, in order."""

    def __init__(self, session_id: str = "s1", tenant: str = "acme", ids: str = "") -> None:
        self.session_id = session_id
        self.tenant = tenant
        self.ids = ids or session_id
        """Prefix of the event ids (another writer of the same session needs its own)."""
        self.seq = 0
        self.lines: list[bytes] = []

    def event(self, kind: str, seq: int | None = None, **fields: Any) -> bytes:
        """Append an event of ``kind`` (the next ``seq`` unless given) and return its line."""
        if seq is None:
            seq = self.seq
            self.seq += 1
        body = {
            "type": kind,
            "schema_version": 1,
            "event_id": f"{self.ids}-e{len(self.lines)}",
            "session_id": self.session_id,
            "tenant": self.tenant,
            "seq": seq,
            "turn": seq // 3,
            "ts": "2026-12-01T00:00:00Z",
            **fields,
        }
        line = json.dumps(body).encode()
        self.lines.append(line)
        return line

    def add(self, span_id: str, text: str, position: int, tokens: int = 10, **extra: Any) -> bytes:
        """A ``span.added`` with text."""
        return self.event(
            "span.added", span_id=span_id, text=text, position=position, tokens=tokens, **extra
        )

    def score(self, *scores: tuple[str, float, str | None], query: str | None = None) -> bytes:
        """A ``scores.computed`` of ``(span_id, score, hash or None)``, all for ``query``."""
        body = [
            {"score_id": f"sc{len(self.lines)}-{i}", "span_id": span_id, "score": value}
            | ({"text_sha256": digest} if digest is not None else {})
            | ({"query_sha256": query} if query is not None else {})
            for i, (span_id, value, digest) in enumerate(scores)
        ]
        return self.event("scores.computed", scorer="m1", scores=body)

    def rewrite(self, context: list[dict[str, Any]], **extra: Any) -> bytes:
        """A ``context.rewritten`` with the complete ``context``."""
        return self.event(
            "context.rewritten", rewrite_id=f"rw{len(self.lines)}", context=context, **extra
        )

    def evict(self, **extra: Any) -> bytes:
        """An ``eviction.requested``: ``candidates=[...]`` or ``policy={...}``."""
        return self.event("eviction.requested", request_id=f"req{len(self.lines)}", **extra)


def named_rewrite(summary_first: bool) -> SessionWriter:
    """A session whose rewrite creates a summary introducing a name through a tool
    result (``"hotel_name": "Golden Lodge"``) and modifies a span to repeat it in
    lower case ("the golden lodge": ordinary words, a name only as a repeat of the
    book), the summary first or last in the snapshot; then the summary is a
    candidate for eviction. Contract 1.2 extracts a rewrite's entries in snapshot
    order: only with the summary first does the repeat hold the name (and pin it)."""
    w = SessionWriter()
    w.add("u1", "Hello there.", 0)
    w.add("u2", "I need a room for tonight.", 1)
    found = 'find_hotel: {"hotel_name": "Golden Lodge", "price": 120}'
    summary = {"span_id": "sum1", "text": found, "tokens": 5}
    modified = {"span_id": "u2", "text": "Is the golden lodge still free tonight?", "tokens": 7}
    context = [summary, modified] if summary_first else [modified, summary]
    w.rewrite(
        [{"span_id": "u1", "text": "Hello there.", "tokens": 10}, *context],
        declared_modified=["u2"],
    )
    w.evict(candidates=["sum1"], basis="recency")
    return w


def _text(rng: random.Random) -> str:
    """Agent-like text holding 0-2 identifiers and maybe an anaphor."""
    words = ["Checked", "the", "logs", "and", "replied."]
    for _ in range(rng.randint(0, 2)):
        words += [rng.choice(TYPES), rng.choice(IDENTIFIERS), "is", "open."]
    if rng.random() < 0.5:
        words += ["Please", "look", "at", rng.choice(("that", "the", "this")), rng.choice(TYPES)]
    if rng.random() < 0.5:
        words.append(rng.choice(NAMED))
    return " ".join(words)


ROLES = ("user", "assistant", "tool", None)
STRATEGIES = (None, "summarize", "sliding_window", "clear_tool_results")
TRIGGERS = (None, "threshold", "overflow", "manual")


class _Harness:
    """What the random harness believes is live: text and tokens, and (contract 1.2)
    the tool calls each span makes or answers."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[str, int]] = {}
        self.calls: dict[str, tuple[tuple[str, ...], str | None]] = {}
        self.gone: list[str] = []
        self.next_call = 0

    def group(self, span_id: str) -> set[str]:
        """The live spans the harness knows to share call ids with ``span_id``."""
        found = {span_id}
        while True:
            ids = {c for s in found for c in self._ids(s)}
            more = {s for s in self.live if self._ids(s) & ids} | found
            if more == found:
                return found
            found = more

    def _ids(self, span_id: str) -> set[str]:
        made, answered = self.calls.get(span_id, ((), None))
        return set(made) | ({answered} if answered is not None else set())

    def leave(self, span_id: str) -> None:
        if self.live.pop(span_id, None) is not None:
            self.gone.append(span_id)


def _span_fields(rng: random.Random, harness: _Harness, first: bool) -> dict[str, Any]:
    """Contract 1.2 fields of a new span: a role, maybe protection, maybe tool calls
    (new ids, or now and then one already used) or the answer to one (a call live or
    gone, answered once or twice)."""
    roll = rng.random()
    if first and rng.random() < 0.5:
        return {"role": "system", "protected": True}
    fields: dict[str, Any] = {}
    role = rng.choice(ROLES)
    if role is not None:
        fields["role"] = role
    if rng.random() < 0.06:
        fields["protected"] = True
    made = [c for s in harness.calls for c in harness.calls[s][0]]
    if roll < 0.2:
        ids = []
        for _ in range(rng.choice((1, 1, 2))):
            if made and rng.random() < 0.05:
                ids.append(rng.choice(made))
            else:
                ids.append(f"call_{harness.next_call}")
                harness.next_call += 1
        fields["tool_call_ids"] = ids
        fields["role"] = "assistant"
    elif roll < 0.4 and made:
        recent = made[-4:]
        fields["tool_call_id"] = rng.choice(recent if rng.random() < 0.9 else made)
        fields["role"] = "tool"
        if rng.random() < 0.03:
            fields["tool_call_ids"] = [f"call_{harness.next_call}"]  # answers and calls again
            harness.next_call += 1
    return fields


def random_session(
    rng: random.Random, session_id: str, events: int, tenant: str | None = None
) -> list[bytes]:
    """A random session of about ``events`` lines (see the module docstring).

    Contract 1.2: spans carry roles, some are protected (often a system prompt
    first), assistants make tool calls that later spans answer; rewrites name a
    strategy and a trigger, summarise both halves of a pair or one, rewrite or drop
    protected spans, and come in bursts of thin rewrites that hardly shrink."""
    writer = SessionWriter(session_id, tenant or rng.choice(("acme", "globex")))
    harness = _Harness()
    live = harness.live  # span id -> (text, tokens), as the harness sees it
    gone = harness.gone  # span ids the harness saw leave
    next_span = 0
    burst = 0  # thin rewrites still to come in a row
    for _ in range(events):
        roll = rng.random()
        if burst:
            roll = 0.6
        if roll < 0.35 or not live:
            span_id = f"u{next_span}" if rng.random() < 0.9 else f"u{rng.randint(0, next_span)}"
            next_span += 1
            text = _text(rng)
            tokens = rng.randint(0, 60)
            extra: dict[str, Any] = _span_fields(rng, harness, not writer.lines)
            if rng.random() < 0.1 and live:
                pool = sorted(live) + gone[-3:]
                extra["derived_from"] = rng.sample(pool, k=min(len(pool), 2))
            if rng.random() < 0.1:
                extra["mentions"] = [{"key": rng.choice(IDENTIFIERS)}]
            elif rng.random() < 0.1:
                extra["mentions"] = [{"type": rng.choice(TYPES)}]
            if rng.random() < 0.1:
                extra["introduces"] = [{"key": rng.choice(IDENTIFIERS), "type": rng.choice(TYPES)}]
            writer.add(span_id, text, rng.randint(0, 20), tokens, **extra)
            if span_id not in live:
                made = tuple(extra.get("tool_call_ids", ()))
                harness.calls[span_id] = (made, extra.get("tool_call_id"))
            live[span_id] = (text, tokens)
        elif roll < 0.55:
            picks = rng.sample(sorted(live), k=rng.randint(1, len(live)))
            if rng.random() < 0.1:
                picks.append(picks[0])  # two scores for one span in one pass
            scores = []
            for span_id in picks:
                text = live[span_id][0]
                choice = rng.random()
                digest = sha(text) if choice < 0.8 else (None if choice < 0.9 else sha("old"))
                scores.append((span_id, round(rng.uniform(0, 1), 3), digest))
            writer.score(*scores, query=rng.choice(QUERIES))
        elif roll < 0.75:
            if burst:
                burst -= 1
            elif rng.random() < 0.08:
                burst = rng.randint(2, 6)
            _random_rewrite(rng, writer, harness, thin=bool(burst) or rng.random() < 0.2)
            next_span += 1
        elif roll < 0.93:
            extra = {}
            if rng.random() < 0.7:
                pool = [*sorted(live), f"u{next_span + 5}"]
                picks = rng.sample(pool, k=rng.randint(0, min(3, len(pool))))
                if picks and picks[0] in live and rng.random() < 0.3:
                    picks += sorted(harness.group(picks[0]) - set(picks))  # a whole pair
                extra["candidates"] = picks
                if rng.random() < 0.3:
                    extra["basis"] = "recency"
            elif rng.random() < 0.5:
                extra["policy"] = {"threshold": round(rng.uniform(0, 1), 2)}
            else:
                extra["policy"] = {"keep_top_k": rng.randint(0, 4)}
            query = rng.choice(QUERIES)
            writer.evict(**extra, **({"query_sha256": query} if query else {}))
            # The harness does not know what was committed; it forgets what it asked for.
            for span_id in extra.get("candidates", []):
                if rng.random() < 0.5 and span_id in live:
                    harness.leave(span_id)
        elif roll < 0.96:
            writer.seq += rng.choice((-2, 2))
            writer.seq = max(0, writer.seq)
        elif roll < 0.98 and writer.lines:
            writer.lines.append(rng.choice(writer.lines))  # a re-delivery
        else:
            _bad_line(rng, writer, sorted(live))
    if rng.random() < 0.3:
        writer.event("session.closed")
        writer.add("late", "after the close", 0)
    return writer.lines


def _random_rewrite(
    rng: random.Random, writer: SessionWriter, harness: _Harness, thin: bool
) -> None:
    """A ``context.rewritten`` of what the harness believes is live. A thin one keeps
    (nearly) every span and its tokens; otherwise spans are dropped (now and then a
    whole tool pair group, now and then one half), merged or summarised."""
    live, gone = harness.live, harness.gone
    context: list[dict[str, Any]] = []
    order = sorted(live)
    rng.shuffle(order)
    if thin:
        removed = [s for s in order if rng.random() < 0.03]
    else:
        removed = [s for s in order if rng.random() < 0.2]
        if order and rng.random() < 0.3:
            removed = sorted(set(removed) | harness.group(rng.choice(order)))
    kept = [s for s in order if s not in removed]
    for span_id in kept:
        text, tokens = live[span_id]
        if rng.random() < (0.1 if thin else 0.3):
            text = _text(rng)
            tokens = max(0, tokens + rng.randint(-2, 3)) if thin else rng.randint(0, 60)
        entry: dict[str, Any] = {"span_id": span_id, "tokens": tokens}
        entry |= {"text": text} if rng.random() < 0.8 else {"text_sha256": sha(text)}
        if rng.random() < 0.05:
            entry["introduces"] = [{"key": rng.choice(IDENTIFIERS), "type": "vendor"}]
        context.append(entry)
        live[span_id] = (text, tokens)
    if gone and rng.random() < 0.1:
        back = rng.choice(gone)  # a span the harness saw leave comes back
        context.append({"span_id": back, "text": "back again", "tokens": 5})
        live[back] = ("back again", 5)
    if removed and context and rng.random() < 0.15:
        context[0]["derived_from"] = removed  # merged into a kept span
    elif removed and rng.random() < 0.8:
        summary = "" if rng.random() < 0.15 else _text(rng)
        if rng.random() < 0.3:
            summary = " ".join(IDENTIFIERS) + " " + summary  # a summary that keeps the keys
        tokens = rng.choice((1, 2, 20, 200))
        entry = {"span_id": f"sum{len(writer.lines)}", "tokens": tokens, "derived_from": removed}
        if gone and rng.random() < 0.2:
            entry["derived_from"] = [*removed, rng.choice(gone)]  # a parent gone earlier
        entry |= {"text": summary} if rng.random() < 0.8 else {"text_sha256": sha(summary)}
        entry.update(_snapshot_score(rng, summary))
        context.insert(rng.randint(0, len(context)), entry)
        live[entry["span_id"]] = (summary, tokens)
        harness.calls.pop(entry["span_id"], None)
    for span_id in removed:
        harness.leave(span_id)
    extra: dict[str, Any] = {}
    if rng.random() < 0.5:
        extra["declared_modified"] = [e["span_id"] for e in context if rng.random() < 0.5]
    if rng.random() < 0.5:
        extra["scores_invalidated"] = [f"sc{i}-0" for i in range(len(writer.lines))]
    if rng.random() < 0.3:
        extra["base_seq"] = max(0, writer.seq - rng.randint(1, 4))
    strategy, trigger = rng.choice(STRATEGIES), rng.choice(TRIGGERS)
    extra |= {"strategy": strategy} if strategy else {}
    extra |= {"trigger": trigger} if trigger else {}
    writer.rewrite(context, **extra)


def _bad_line(rng: random.Random, writer: SessionWriter, live: list[str]) -> None:
    """One input the contract rejects (or, for a span id that is live, ``SPAN_EXISTS``)."""
    choice = rng.randrange(8)
    if choice == 0:
        writer.lines.append(b'{"type": "span.added", "schema_version": 2}')
    elif choice == 1:
        writer.lines.append(b'{"type": "span.added", "schema_version"')
    elif choice == 2:
        writer.lines.append(b"[1, 2]")
    elif choice == 3:
        writer.event("span.moved", span_id="u0")
    elif choice == 4:
        writer.add("bad", "text", 0, text_sha256=sha("other text"))
    elif choice == 5:
        line = writer.score(("u0", 0.5, sha("x")))
        writer.lines[-1] = line.replace(b"0.5", b"NaN")
    elif choice == 6:
        writer.event("eviction.requested", request_id="r", policy={"keep_top_k": -1})
    elif live:
        writer.add(rng.choice(live), "again", 0)


def interleave(rng: random.Random, sessions: list[list[bytes]]) -> list[bytes]:
    """The sessions' lines merged in a random order that keeps each session's own."""
    cursors = [0] * len(sessions)
    merged: list[bytes] = []
    while True:
        open_sessions = [i for i, lines in enumerate(sessions) if cursors[i] < len(lines)]
        if not open_sessions:
            return merged
        pick = rng.choice(open_sessions)
        merged.append(sessions[pick][cursors[pick]])
        cursors[pick] += 1


def _snapshot_score(rng: random.Random, text: str) -> dict[str, Any]:
    """Maybe a ``score`` inside a snapshot entry: good, unhashed, stale or not a number."""
    roll = rng.random()
    if roll < 0.7:
        return {}
    if roll < 0.8:
        return {"score": {"score_id": "x", "score": 0.9, "text_sha256": sha(text)}}
    if roll < 0.9:
        return {"score": {"score_id": "x", "score": 0.9}}
    if roll < 0.95:
        return {"score": {"score_id": "x", "score": 0.9, "text_sha256": sha("old")}}
    return {"score": {"score_id": "x", "score": "high", "text_sha256": sha(text)}}
