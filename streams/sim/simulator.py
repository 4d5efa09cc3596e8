"""``spanguard simulate``: a deterministic synthetic fleet of agent sessions.

Each session plays an agent loop the way a harness would publish it: user
turns, tool results and replies that introduce identifiers (``order 55012``,
``account 8841-C``, ``ticket INC-4411``, ``file src/app/main.py``) and refer
back to them later ("that account", a repeated ``INC-4411``), scoring passes
bound to the exact text, compactions (summaries of old turns with
``derived_from``, paraphrases; declared and invalidated, then re-scored before
the pruner acts) and eviction requests by threshold, ``keep_top_k`` and
candidates. A share of the sessions gets faults injected at known events.

How the truth stays exact: every step is planned on a copy of the session's
:class:`~streams.sim.truth.ContextModel` (the contract, re-implemented from the
generator's own knowledge of what each text holds). A step is kept only when
the faults the model predicts are exactly the ones the step means to inject
(none for a healthy step); otherwise it is re-drawn or skipped. The engine is
never called.

Determinism: everything is drawn from ``random.Random`` instances seeded from
``--seed``; the same configuration gives byte-identical events and truth.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import orjson

from schemas import FaultKind, RejectReason, text_sha256
from streams.engine.trace import SessionScript
from streams.sim.truth import (
    ContextModel,
    DeadLetterTruth,
    Decision,
    EvictionTruth,
    FaultTruth,
    FleetTruth,
    Hold,
    Predicted,
    RewriteEntry,
    ScoreEntry,
    SessionTruth,
    SnapshotClaim,
)

Json = dict[str, Any]

INJECTIONS: tuple[str, ...] = (
    "REWRITE_WITHOUT_INVALIDATION",
    "UNDECLARED_MODIFICATION",
    "SCORE_PROVENANCE_GAP",
    "STALE_SCORE",
    "REWRITE_OF_REWRITE",
    "POISONED_SPAN",
    "MONOTONIC_DRIFT",
    "UNGATED_EVICTION",
    "REFERENT_DROPPED",
    "SEQUENCE_GAP",
    "ORPHANED_PARENT",
    "PRUNING_STALLED",
    "SUMMARY_BALLOONING",
    "EMPTY_SUMMARY",
    "MALFORMED",
)
"""Names of the fault mix: each injects the fault kind of the same name
(``POISONED_SPAN`` also raises the ``REWRITE_OF_REWRITE`` on its way to a
counter of 3), ``MALFORMED`` one record the engine must dead-letter."""

MALFORMED_REASONS: tuple[RejectReason, ...] = (
    RejectReason.INVALID_JSON,
    RejectReason.NOT_AN_OBJECT,
    RejectReason.UNSUPPORTED_SCHEMA_VERSION,
    RejectReason.UNKNOWN_TYPE,
    RejectReason.MISSING_FIELD,
    RejectReason.INVALID_FIELD,
    RejectReason.HASH_MISMATCH,
    RejectReason.NON_FINITE_SCORE,
    RejectReason.SPAN_EXISTS,
    RejectReason.SESSION_CLOSED,
)

TENANT_NAMES = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell")
EPOCH = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SCORE_MIN, SCORE_MAX = 0.02, 0.98
# The engine defaults the model assumes (written into the truth file).
ENGINE_ASSUMPTIONS: dict[str, Any] = {
    "drift_tolerance": 0.05,
    "rewrite_of_rewrite_at": 2,
    "poisoned_at": 3,
    "poisoned": "drop",
    "stall_after": 3,
    "protect_lineage": False,
}


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What ``spanguard simulate`` generates."""

    sessions: int = 50
    tenants: int = 3
    events_per_session: int = 60
    seed: int = 7
    fault_rate: float = 0.3
    faults: tuple[tuple[str, int], ...] = tuple((name, 1) for name in INJECTIONS)
    max_injections: int = 2

    def describe(self) -> dict[str, Any]:
        """The configuration as it is written into the truth file."""
        return {
            "sessions": self.sessions,
            "tenants": self.tenants,
            "events_per_session": self.events_per_session,
            "seed": self.seed,
            "fault_rate": self.fault_rate,
            "faults": dict(self.faults),
            "max_injections": self.max_injections,
            "engine_assumptions": ENGINE_ASSUMPTIONS,
        }


def parse_fault_mix(text: str) -> tuple[tuple[str, int], ...]:
    """``"STALE_SCORE=2,UNGATED_EVICTION"`` -> ``(("STALE_SCORE", 2), ("UNGATED_EVICTION", 1))``.

    ``all`` (or an empty string) is every injection once; raises ``ValueError``
    on an unknown name or a weight that is not a positive integer.
    """
    if not text.strip() or text.strip().lower() == "all":
        return tuple((name, 1) for name in INJECTIONS)
    mix: dict[str, int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, _, weight = item.partition("=")
        name = name.strip().upper()
        if name not in INJECTIONS:
            raise ValueError(f"unknown fault {name!r}; choose from {', '.join(INJECTIONS)}")
        try:
            value = int(weight) if weight.strip() else 1
        except ValueError as exc:
            raise ValueError(f"weight of {name} must be an integer, got {weight!r}") from exc
        if value < 0:
            raise ValueError(f"weight of {name} must be >= 0")
        mix[name] = mix.get(name, 0) + value
    return tuple((name, weight) for name, weight in mix.items() if weight > 0)


# --------------------------------------------------------------------------
# Texts: templates that know which identifiers and anaphors they contain
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entity:
    """An identifier of the conversation: ``noun`` names it in text (its type),
    ``cls`` is the type it gets when it stands alone (``id`` or ``path``)."""

    noun: str
    surface: str
    cls: str

    @property
    def key(self) -> str:
        """The contract's key: the identifier case-folded."""
        return self.surface.casefold()


@dataclass(frozen=True, slots=True)
class Text:
    """A span text and the referents the generator knows it holds."""

    text: str
    holds: tuple[Hold, ...]
    anaphors: tuple[str, ...]

    @property
    def sha256(self) -> str:
        """The contract's hash of the text."""
        return text_sha256(self.text)

    @property
    def tokens(self) -> int:
        """A token estimate (about 1.3 per word)."""
        return max(1, round(len(self.text.split()) * 1.3))


# <e0>: entity 0 with its noun ("order 55012": typed by the noun);
# <k0>: entity 0 alone (the template puts a stop word before it, so its type is
#       its class); <a0:that>: a determiner phrase naming entity 0's type.
_MARK = re.compile(r"<([eka])(\d)(?::([a-z ]+))?>")
_TOOL_PREFIX = re.compile(r"[a-z]+_[a-z_]*:")


def compose(template: str, slots: Sequence[Entity], known: Container[str]) -> Text:
    """Render ``template`` and record what it holds.

    An anaphor phrase counts only when its type is already known in the session
    (``known``) and this text has not introduced that type before the phrase:
    the contract's rule, which the extractor implements.
    """
    parts: list[str] = []
    holds: list[Hold] = []
    anaphors: list[str] = []
    introduced: set[str] = set()
    pos = 0
    for match in _MARK.finditer(template):
        parts.append(template[pos : match.start()])
        kind, index, det = match.group(1), int(match.group(2)), match.group(3)
        entity = slots[index]
        if kind == "e":
            parts.append(f"{entity.noun} {entity.surface}")
            holds.append((entity.key, entity.noun))
            introduced.add(entity.noun)
        elif kind == "k":
            parts.append(entity.surface)
            holds.append((entity.key, entity.cls))
            introduced.add(entity.cls)
        else:
            parts.append(f"{det} {entity.noun}")
            if entity.noun in known and entity.noun not in introduced:
                anaphors.append(entity.noun)
        pos = match.end()
    parts.append(template[pos:])
    text = "".join(parts)
    if not _TOOL_PREFIX.match(text):  # "lookup_order: ..." stays as the tool wrote it
        text = text[:1].upper() + text[1:]
    return Text(text, tuple(dict.fromkeys(holds)), tuple(anaphors))


@dataclass(frozen=True, slots=True)
class Beat:
    """One kind of message: its long, short and tiny forms (a paraphrase moves
    one form down) and its entity slots (``+kind`` a new entity, ``kind`` an
    earlier one)."""

    role: str
    forms: tuple[str, ...]
    slots: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Domain:
    """A family of conversations: its entity kinds and its messages."""

    name: str
    referent_dense: bool
    kinds: dict[str, tuple[str, Callable[[random.Random], str]]]
    """kind -> (class when alone, factory of a surface)."""
    opening: tuple[Beat, ...]
    user: tuple[Beat, ...]
    tool: tuple[Beat, ...]
    assistant: tuple[Beat, ...]


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(10 ** (n - 1), 10**n - 1))


def _account(rng: random.Random) -> str:
    return f"{_digits(rng, 4)}-{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}"


def _path(rng: random.Random) -> str:
    folder = rng.choice(["src/app", "src/api", "src/db", "src/core", "lib/auth", "tests"])
    name = rng.choice(["main", "models", "views", "auth", "cache", "routes", "utils", "jobs"])
    return f"{folder}/{'test_' if folder == 'tests' else ''}{name}.py"


def _booking(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return (
        rng.choice(letters)
        + rng.choice(letters)
        + str(rng.randint(2, 9))
        + rng.choice(letters)
        + _digits(rng, 2)
    )


SUPPORT = Domain(
    name="support",
    referent_dense=True,
    kinds={
        "order": ("id", lambda r: _digits(r, 5)),
        "account": ("id", _account),
        "ticket": ("id", lambda r: f"INC-{_digits(r, 4)}"),
    },
    opening=(
        Beat(
            "user",
            (
                "Hi, I was charged twice for <e0> last week and would like my money back.",
                "Charged twice for <e0>; wants money back.",
                "<e0>: charged twice.",
            ),
            ("+order",),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "It is <e0>, the one flagged last week by your fraud team.",
                "Customer named <e0>, flagged last week.",
                "<e0> flagged.",
            ),
            ("+account",),
        ),
        Beat(
            "user",
            (
                "Did <a0:that> clear KYC yet? I need it settled before Friday.",
                "Asked whether <a0:that> cleared KYC.",
                "KYC for <a0:that>?",
            ),
            ("account",),
        ),
        Beat(
            "user",
            (
                "Any news on <k0>? It has been open for a while.",
                "Asked for news on <k0>.",
                "News on <k0>?",
            ),
            ("ticket",),
        ),
        Beat(
            "user",
            (
                "Please make sure <a0:the> is refunded in full, not just one charge.",
                "Wants <a0:the> refunded in full.",
                "Refund <a0:the> in full.",
            ),
            ("order",),
        ),
        Beat(
            "user",
            (
                "There is also <e0> from March with the same problem.",
                "Also <e0>, same problem.",
                "Also <e0>.",
            ),
            ("+order",),
        ),
        Beat(
            "user",
            (
                "How long does the review usually take?",
                "Asked how long the review takes.",
                "Review time?",
            ),
        ),
        Beat("user", ("Okay, thanks for checking.", "Thanked the agent.", "Thanks.")),
        Beat(
            "user",
            (
                "My partner also pays with <e0>, is that a problem?",
                "Partner also uses <e0>.",
                "Shared: <e0>.",
            ),
            ("account",),
        ),
        Beat(
            "user",
            (
                "Is <e0> the only one affected?",
                "Asked if only <e0> is affected.",
                "Only <e0>?",
            ),
            ("order",),
        ),
    ),
    tool=(
        Beat(
            "tool",
            (
                "lookup_order: <e0> shipped Monday, two charges of 49.00 EUR on card ending 4421.",
                "<e0> shipped, two charges of 49.00 EUR.",
                "<e0>: two charges.",
            ),
            ("order",),
        ),
        Beat(
            "tool",
            (
                "kyc_status: <e0> pending review; opened <e1> for the refund request.",
                "<e0> pending review, <e1> opened.",
                "<e0> pending; <e1>.",
            ),
            ("account", "+ticket"),
        ),
        Beat(
            "tool",
            (
                "ticket_status: <e0> assigned to payments, priority high.",
                "<e0> with payments, high priority.",
                "<e0>: payments.",
            ),
            ("ticket",),
        ),
        Beat(
            "tool",
            (
                "customer_lookup: profile linked to <e0>, created in 2019.",
                "Profile linked to <e0>.",
                "<e0> linked.",
            ),
            ("+account",),
        ),
        Beat(
            "tool",
            (
                "refund_status: <e0> refund queued, 49.00 EUR.",
                "<e0> refund queued.",
                "<e0> queued.",
            ),
            ("order",),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "I can see two charges on <a0:that> and will look into it now.",
                "Two charges confirmed on <a0:that>.",
                "Charges on <a0:that>.",
            ),
            ("order",),
        ),
        Beat(
            "assistant",
            (
                "Your profile is under a routine review; <a0:the> should clear soon.",
                "Said <a0:the> should clear soon.",
                "<a0:the> clearing soon.",
            ),
            ("account",),
        ),
        Beat(
            "assistant",
            (
                "The refund is filed under <k0>; updates will follow by mail.",
                "Refund filed under <k0>.",
                "Filed under <k0>.",
            ),
            ("ticket",),
        ),
        Beat(
            "assistant",
            (
                "I have escalated <a0:the> to the payments desk.",
                "Escalated <a0:the>.",
                "<a0:the> escalated.",
            ),
            ("ticket",),
        ),
        Beat("assistant", ("Usually two business days.", "Two business days.", "Two days.")),
        Beat("assistant", ("Let me check that for you.", "Checking now.", "Checking.")),
        Beat(
            "assistant",
            ("Thanks for your patience while I look into this.", "Thanked for patience.", "Noted."),
        ),
    ),
)

CODE = Domain(
    name="code",
    referent_dense=True,
    kinds={
        "file": ("path", _path),
        "build": ("id", lambda r: str(r.randint(20000, 29999))),
        "issue": ("id", lambda r: f"BUG-{_digits(r, 4)}"),
    },
    opening=(
        Beat(
            "user",
            (
                "The integration test in <e0> fails since <e1>.",
                "Test in <e0> failing since <e1>.",
                "<e0> red since <e1>.",
            ),
            ("+file", "+build"),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "This may be related to <e0> from the tracker.",
                "Maybe related to <e0>.",
                "Related: <e0>.",
            ),
            ("+issue",),
        ),
        Beat(
            "user",
            (
                "Does <a0:the same> still fail on main?",
                "Asked if <a0:the same> fails on main.",
                "<a0:the same> on main?",
            ),
            ("build",),
        ),
        Beat(
            "user",
            (
                "Yesterday I changed something in <k0>, could that matter?",
                "Changed something in <k0> yesterday.",
                "Edited in <k0>.",
            ),
            ("file",),
        ),
        Beat(
            "user",
            (
                "Is <a0:that> already assigned to someone?",
                "Asked who owns <a0:that>.",
                "<a0:that> owner?",
            ),
            ("issue",),
        ),
        Beat(
            "user",
            ("Please keep the fix small, we release today.", "Wants a small fix.", "Small fix."),
        ),
        Beat(
            "user",
            (
                "The stack trace also points at <e0>.",
                "Trace points at <e0>.",
                "Trace: <e0>.",
            ),
            ("+file",),
        ),
        Beat(
            "user",
            ("Can you diff <e0> against main?", "Diff <e0> against main.", "Diff <e0>."),
            ("file",),
        ),
        Beat("user", ("Thanks, that was quick.", "Thanked the agent.", "Thanks.")),
    ),
    tool=(
        Beat(
            "tool",
            (
                "ci_log: <e0> red, <e1> line 88 AssertionError.",
                "<e0> red at <e1>.",
                "<e0> red, <e1>.",
            ),
            ("build", "file"),
        ),
        Beat(
            "tool",
            (
                "git_blame: last change in <k0> by dana two days ago.",
                "Last change in <k0> by dana.",
                "Blame in <k0>.",
            ),
            ("file",),
        ),
        Beat(
            "tool",
            ("tracker: <e0> open, reported by two users.", "<e0> open, two reports.", "<e0> open."),
            ("issue",),
        ),
        Beat(
            "tool",
            ("ci_trigger: started <e0> on main.", "Started <e0>.", "<e0> started."),
            ("+build",),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "I will start with <a0:that> and bisect from there.",
                "Starting with <a0:that>.",
                "First <a0:that>.",
            ),
            ("file",),
        ),
        Beat(
            "assistant",
            (
                "<a0:that> describes the same stack trace.",
                "<a0:that> matches the trace.",
                "<a0:that> matches.",
            ),
            ("issue",),
        ),
        Beat(
            "assistant",
            (
                "I can reproduce it locally on <a0:that>.",
                "Reproduced on <a0:that>.",
                "Repro on <a0:that>.",
            ),
            ("build",),
        ),
        Beat("assistant", ("Running the tests again now.", "Rerunning tests.", "Rerun.")),
        Beat("assistant", ("The fix looks straightforward.", "Fix is simple.", "Simple fix.")),
    ),
)

TRAVEL = Domain(
    name="travel",
    referent_dense=False,
    kinds={"booking": ("id", _booking)},
    opening=(
        Beat(
            "user",
            (
                "I want a quiet hotel near the old town for three nights.",
                "Wants a quiet hotel, three nights.",
                "Quiet hotel, three nights.",
            ),
        ),
    ),
    user=(
        Beat(
            "user",
            (
                "Which neighbourhood is best for walking?",
                "Asked about walkable areas.",
                "Walkable area?",
            ),
        ),
        Beat(
            "user",
            (
                "I already hold <e0> for Friday, can we keep it?",
                "Holds <e0> for Friday.",
                "<e0> held.",
            ),
            ("+booking",),
        ),
        Beat("user", ("Is breakfast usually included?", "Asked about breakfast.", "Breakfast?")),
        Beat(
            "user",
            (
                "Can you move <a0:that> to Saturday?",
                "Wants <a0:that> moved to Saturday.",
                "Move <a0:that>.",
            ),
            ("booking",),
        ),
        Beat("user", ("Great, that sounds good.", "Agreed.", "Okay.")),
    ),
    tool=(
        Beat(
            "tool",
            (
                "search_hotels: 12 results, median price 140 EUR.",
                "12 results, median 140 EUR.",
                "12 results.",
            ),
        ),
        Beat("tool", ("weather: mild, light rain on Sunday.", "Mild, rain on Sunday.", "Mild.")),
        Beat(
            "tool",
            ("booking_lookup: <e0> confirmed, two guests.", "<e0> confirmed.", "<e0> ok."),
            ("booking",),
        ),
    ),
    assistant=(
        Beat(
            "assistant",
            (
                "Here are three options near the river.",
                "Three options by the river.",
                "Three options.",
            ),
        ),
        Beat(
            "assistant",
            ("The old town is best on foot.", "Old town is walkable.", "Walkable."),
        ),
        Beat(
            "assistant",
            (
                "Breakfast is included in most of them.",
                "Breakfast mostly included.",
                "Breakfast included.",
            ),
        ),
        Beat(
            "assistant",
            ("I found <a0:that> in the system.", "Found <a0:that>.", "<a0:that> found."),
            ("booking",),
        ),
    ),
)

DOMAINS: tuple[Domain, ...] = (SUPPORT, CODE, TRAVEL)
_DOMAIN_WEIGHTS = (0.4, 0.35, 0.25)

SUMMARY_FORMS = ("Summary of earlier turns: {items}.", "Earlier: {items}.", "{items}.")
SUMMARY_EMPTY = (
    "Summary of earlier turns: small talk and acknowledgements.",
    "Earlier: small talk.",
    "Small talk.",
)
LOSSY_FORMS = {
    "user": "Customer shared some details earlier.",
    "tool": "Tool output trimmed.",
    "assistant": "Agent replied earlier.",
    "summary": "Summary trimmed.",
    "digest": "Digest trimmed.",
}
POISON_FORMS = ("Small talk, condensed.", "Condensed small talk.")
DIGEST_FORMS = ("Digest of an earlier reply, kept for the audit log.", "Digest of a reply.")


# --------------------------------------------------------------------------
# Session state (cloned for planning)
# --------------------------------------------------------------------------


@dataclass(slots=True)
class SpanContent:
    """How a span's text is made: its forms, the current one, its entities."""

    role: str
    forms: tuple[str, ...]
    slots: tuple[Entity, ...] = ()
    level: int = 0
    text: str = ""

    @property
    def filler(self) -> bool:
        """Holds no entity: nothing can depend on it."""
        return not self.slots


@dataclass(slots=True)
class SimState:
    """Everything a plan may change; planning works on a deep copy."""

    model: ContextModel = field(default_factory=ContextModel)
    content: dict[str, SpanContent] = field(default_factory=dict)
    entities: list[Entity] = field(default_factory=list)
    ids: Counter[str] = field(default_factory=Counter)
    seq: int = 0
    passes: int = 0
    closed: bool = False

    def clone(self) -> SimState:
        """A copy that a failed plan can throw away."""
        return SimState(
            model=self.model.clone(),
            content={k: replace(v) for k, v in self.content.items()},
            entities=list(self.entities),
            ids=Counter(self.ids),
            seq=self.seq,
            passes=self.passes,
            closed=self.closed,
        )


# --------------------------------------------------------------------------
# Operations: one input event (or one bad record) each
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NextTurn:
    """The agent loop starts its next turn (no event)."""


@dataclass(frozen=True, slots=True)
class AddOp:
    """A ``span.added``."""

    span_id: str
    text: Text
    role: str
    position: int
    known: frozenset[str]
    derived_from: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoreOp:
    """A ``scores.computed``: (span id, value, how the hash is sent).

    The hash mode is ``None`` for the current text, ``""`` for no hash, or an
    older text of the span (a score computed against it).
    """

    entries: tuple[tuple[str, float, str | None], ...]


@dataclass(frozen=True, slots=True)
class SnapEntry:
    """One entry of a rewrite's snapshot."""

    span_id: str
    text: Text
    derived_from: tuple[str, ...] | None = None
    claim: tuple[str, float, str | None] | None = None
    known: frozenset[str] | None = None
    """The session's known types when the text was written (None: unchanged)."""


@dataclass(frozen=True, slots=True)
class RewriteOp:
    """A ``context.rewritten``."""

    entries: tuple[SnapEntry, ...]
    declared: tuple[str, ...]
    invalidated: tuple[str, ...]
    base_seq: int | None = None


@dataclass(frozen=True, slots=True)
class EvictOp:
    """An ``eviction.requested``."""

    mode: str
    candidates: tuple[str, ...] | None = None
    threshold: float | None = None
    keep_top_k: int | None = None
    basis: str = "score"


@dataclass(frozen=True, slots=True)
class GapOp:
    """The harness skips ``k`` sequence numbers (lost events)."""

    k: int


@dataclass(frozen=True, slots=True)
class BadOp:
    """A malformed record that the engine must dead-letter with ``reason``."""

    reason: RejectReason
    span_id: str = ""
    text: str = ""
    position: int = 0


@dataclass(frozen=True, slots=True)
class CloseOp:
    """A ``session.closed``."""


Op = NextTurn | AddOp | ScoreOp | RewriteOp | EvictOp | GapOp | BadOp | CloseOp

# Reasons whose record has a readable seq: the engine moves the baseline on.
_SEQ_CONSUMING = {
    RejectReason.UNSUPPORTED_SCHEMA_VERSION,
    RejectReason.UNKNOWN_TYPE,
    RejectReason.MISSING_FIELD,
    RejectReason.INVALID_FIELD,
    RejectReason.HASH_MISMATCH,
    RejectReason.NON_FINITE_SCORE,
    RejectReason.SPAN_EXISTS,
    RejectReason.SESSION_CLOSED,
}


@dataclass(frozen=True, slots=True)
class TextRecord:
    """A text the engine extracts referents from, with what the generator says it holds
    (tests compare the two with the contract's extractor)."""

    session_id: str
    span_id: str
    text: str
    holds: tuple[Hold, ...]
    anaphors: tuple[str, ...]
    known: frozenset[str]


class Planner:
    """Applies operations to a copy of the session state and collects the faults
    the model predicts; the session keeps the plan only when they are the
    intended ones."""

    def __init__(self, state: SimState, session_id: str) -> None:
        self.state = state.clone()
        self.session_id = session_id
        self.ops: list[Op] = []
        self.predicted: list[tuple[int, Predicted]] = []
        self.intended: list[tuple[int, FaultKind]] = []
        self.decisions: dict[int, Decision] = {}

    @property
    def model(self) -> ContextModel:
        """The planning copy of the model."""
        return self.state.model

    def ok(self) -> bool:
        """True when the predicted faults are exactly the intended ones, op by op."""
        predicted = Counter((i, p.kind) for i, p in self.predicted)
        return predicted == Counter(self.intended)

    def run(self, op: Op, intend: Sequence[FaultKind] = ()) -> int:
        """Apply ``op``; returns its index in the plan."""
        index = len(self.ops)
        self.ops.append(op)
        faults = self._apply(op, index)
        self.predicted.extend((index, f) for f in faults)
        self.intended.extend((index, k) for k in intend)
        return index

    def score_id(self, pass_number: int, index: int, span_id: str) -> str:
        """The score id :class:`SessionScript` gives (same formula)."""
        return f"sc-{pass_number}-{index}-{span_id}"

    def _apply(self, op: Op, index: int) -> list[Predicted]:
        st, model = self.state, self.state.model
        if isinstance(op, NextTurn):
            return []
        if isinstance(op, GapOp):
            st.seq += op.k
            return []
        seq = st.seq
        st.seq += 1
        if isinstance(op, AddOp):
            st.content[op.span_id].text = op.text.text
            return model.add_span(
                seq,
                op.span_id,
                op.text.sha256,
                op.text.tokens,
                op.position,
                op.text.holds,
                op.text.anaphors,
                op.derived_from,
            )
        if isinstance(op, ScoreOp):
            st.passes += 1
            scores: list[ScoreEntry] = []
            for i, (span_id, value, mode) in enumerate(op.entries):
                current = st.content[span_id].text if span_id in st.content else ""
                digest = (
                    text_sha256(current) if mode is None else (text_sha256(mode) if mode else None)
                )
                scores.append(
                    ScoreEntry(span_id, self.score_id(st.passes, i, span_id), value, digest)
                )
            return model.score(seq, scores)
        if isinstance(op, RewriteOp):
            entries: list[RewriteEntry] = []
            for e in op.entries:
                claim = None
                if e.claim is not None:
                    claim = SnapshotClaim(e.claim[0], e.claim[1], e.claim[2])
                entries.append(
                    RewriteEntry(
                        e.span_id,
                        e.text.sha256,
                        e.text.tokens,
                        e.text.holds,
                        e.text.anaphors,
                        e.derived_from,
                        claim,
                    )
                )
                if e.span_id in st.content:
                    st.content[e.span_id].text = e.text.text
            return model.rewrite(seq, entries, op.declared, op.invalidated, op.base_seq)
        if isinstance(op, EvictOp):
            decision, faults = model.evict(
                seq,
                candidates=op.candidates,
                threshold=op.threshold,
                keep_top_k=op.keep_top_k,
                basis=op.basis,
            )
            self.decisions[index] = decision
            for span_id in decision.committed + decision.dropped:
                st.content.pop(span_id, None)
            return faults
        if isinstance(op, BadOp):
            if op.reason in _SEQ_CONSUMING:
                if op.reason is RejectReason.NON_FINITE_SCORE:
                    st.passes += 1
                model.reject(seq)
            else:
                st.seq -= 1  # an unreadable record has no seq
            return []
        assert isinstance(op, CloseOp)
        st.closed = True
        return model.close(seq)


# --------------------------------------------------------------------------
# One session
# --------------------------------------------------------------------------


@dataclass(slots=True)
class _Record:
    data: Json | bytes
    ms: int
    deadletter: DeadLetterTruth | None = None


class SessionGenerator:
    """Generates one session: its records, its truth and its texts."""

    ATTEMPTS = 6

    def __init__(
        self,
        rng: random.Random,
        session_id: str,
        tenant: str,
        domain: Domain,
        target_events: int,
        injections: Sequence[str],
        start: datetime,
        step_ms: int,
    ) -> None:
        self.rng = rng
        self.domain = domain
        self.session_id = session_id
        self.target = target_events
        self.pending = list(injections)
        self.script = SessionScript(
            session_id, tenant=tenant, start=start, step=timedelta(milliseconds=step_ms)
        )
        self.start_ms = int((start - EPOCH).total_seconds() * 1000)
        self.step_ms = step_ms
        self.state = SimState()
        self.records: list[_Record] = []
        self.texts: list[TextRecord] = []
        self.truth = SessionTruth(
            session_id=session_id,
            tenant=tenant,
            profile=domain.name,
            referent_dense=domain.referent_dense,
        )
        self.straggler = False

    # -- driving the loop -------------------------------------------------

    def run(self) -> None:
        """Play the session to its target length, then close it."""
        turn = 0
        next_injection = 2
        compact_every = self.rng.randint(2, 3)
        evict_every = self.rng.randint(2, 3)
        while self.state.seq < self.target - 2:
            turn += 1
            if not self._attempt(partial(self._turn, turn=turn), None):
                break  # the model refuses even a plain turn: end the session cleanly
            if self.pending and turn >= next_injection:
                name = self.pending[0]
                if self._inject(name):
                    self.pending.pop(0)
                    self.truth.injections.append(name)
                    next_injection = turn + 1
                    continue
            if turn % compact_every == 0:
                self._attempt(self._compaction, None)
            if turn % evict_every == 0 and len(self.state.model.spans) >= 6:
                self._attempt(self._eviction, None)
        self._attempt(lambda p: p.run(CloseOp()) >= 0, None)
        if self.straggler:
            self._attempt(lambda p: self._bad(p, RejectReason.SESSION_CLOSED), None)
        self.truth.events = len(self.records)
        self.truth.skipped = list(self.pending)

    def _attempt(self, build: Callable[[Planner], bool], injection: str | None) -> bool:
        for _ in range(self.ATTEMPTS):
            planner = Planner(self.state, self.session_id)
            if build(planner) and planner.ok():
                self._commit(planner, injection)
                return True
        return False

    def _inject(self, name: str) -> bool:
        if name == "MALFORMED":
            reason = self.rng.choice(MALFORMED_REASONS)
            if reason is RejectReason.SESSION_CLOSED:
                self.straggler = True
                return True
            return self._attempt(lambda p: self._bad(p, reason), name)
        build = {
            "REWRITE_WITHOUT_INVALIDATION": self._inj_missing_invalidation,
            "UNDECLARED_MODIFICATION": self._inj_undeclared,
            "SCORE_PROVENANCE_GAP": self._inj_provenance_gap,
            "STALE_SCORE": self._inj_stale_score,
            "REWRITE_OF_REWRITE": self._inj_rewrite_of_rewrite,
            "POISONED_SPAN": self._inj_poisoned,
            "MONOTONIC_DRIFT": self._inj_drift,
            "UNGATED_EVICTION": self._inj_ungated,
            "REFERENT_DROPPED": self._inj_referent_dropped,
            "SEQUENCE_GAP": self._inj_sequence_gap,
            "ORPHANED_PARENT": self._inj_orphan,
            "PRUNING_STALLED": self._inj_stalled,
            "SUMMARY_BALLOONING": self._inj_ballooning,
            "EMPTY_SUMMARY": self._inj_empty_summary,
        }[name]
        return self._attempt(build, name)

    # -- committing a plan --------------------------------------------------

    def _commit(self, planner: Planner, injection: str | None) -> None:
        intended = {(i, k) for i, k in planner.intended}
        for index, op in enumerate(planner.ops):
            event_id = self._emit(op)
            for i, fault in planner.predicted:
                if i == index and (i, fault.kind) in intended and injection is not None:
                    assert event_id is not None
                    self.truth.faults.append(
                        FaultTruth(
                            session_id=self.session_id,
                            tenant=self.truth.tenant,
                            kind=fault.kind.value,
                            at_event_id=event_id,
                            injection=injection,
                            span_ids=fault.span_ids,
                        )
                    )
            decision = planner.decisions.get(index)
            if decision is not None and isinstance(op, EvictOp):
                assert event_id is not None
                self._record_eviction(op, decision, event_id)
            if isinstance(op, AddOp):
                self.texts.append(
                    TextRecord(
                        self.session_id,
                        op.span_id,
                        op.text.text,
                        op.text.holds,
                        op.text.anaphors,
                        op.known,
                    )
                )
            elif isinstance(op, RewriteOp):
                for entry in op.entries:
                    if entry.known is not None:
                        self.texts.append(
                            TextRecord(
                                self.session_id,
                                entry.span_id,
                                entry.text.text,
                                entry.text.holds,
                                entry.text.anaphors,
                                entry.known,
                            )
                        )
        assert self.script.seq == planner.state.seq, "plan and script disagree on seq"
        self.state = planner.state

    def _record_eviction(self, op: EvictOp, decision: Decision, event_id: str) -> None:
        event = self.script.raw[-1]
        pinned = set(decision.pinned)
        self.truth.evictions.append(
            EvictionTruth(
                session_id=self.session_id,
                tenant=self.truth.tenant,
                request_id=str(event["request_id"]),
                event_id=event_id,
                mode=op.mode,
                basis=op.basis,
                requested=decision.requested,
                needed=tuple(s for s in decision.requested if s in pinned),
                expected_action=decision.action,
                expected_committed=decision.committed,
                expected_dropped=decision.dropped,
            )
        )

    def _push(self, data: Json | bytes, deadletter: DeadLetterTruth | None = None) -> None:
        if isinstance(data, dict):
            ms = self.start_ms + self.step_ms * int(data["seq"])
        else:
            ms = self.records[-1].ms if self.records else self.start_ms
        self.records.append(_Record(data, ms, deadletter))

    def _emit(self, op: Op) -> str | None:
        s = self.script
        if isinstance(op, NextTurn):
            s.next_turn()
            return None
        if isinstance(op, GapOp):
            s.seq += op.k
            return None
        if isinstance(op, AddOp):
            event = s.add(
                op.span_id,
                op.text.text,
                tokens=op.text.tokens,
                position=op.position,
                derived_from=op.derived_from or None,
                role=op.role,
            )
            self._push(event)
            return str(event["event_id"])
        if isinstance(op, ScoreOp):
            against = {sid: mode for sid, _, mode in op.entries if mode}
            no_hash = [sid for sid, _, mode in op.entries if mode == ""]
            event = s.score(
                *[(sid, value) for sid, value, _ in op.entries], against=against, no_hash=no_hash
            )
            self._push(event)
            return str(event["event_id"])
        if isinstance(op, RewriteOp):
            context: list[Json] = []
            for e in op.entries:
                item: Json = {"span_id": e.span_id, "text": e.text.text, "tokens": e.text.tokens}
                if e.derived_from is not None:
                    item["derived_from"] = list(e.derived_from)
                if e.claim is not None:
                    claim: Json = {"score_id": e.claim[0], "score": e.claim[1]}
                    if e.claim[2] is not None:
                        claim["text_sha256"] = e.claim[2]
                    item["score"] = claim
                context.append(item)
            event = s.rewrite(
                context,
                declared_modified=op.declared,
                scores_invalidated=op.invalidated,
                base_seq=op.base_seq,
            )
            self._push(event)
            return str(event["event_id"])
        if isinstance(op, EvictOp):
            event = s.evict(
                list(op.candidates) if op.candidates is not None else None,
                threshold=op.threshold,
                keep_top_k=op.keep_top_k,
                basis=op.basis if op.basis != "score" else None,
            )
            self._push(event)
            return str(event["event_id"])
        if isinstance(op, BadOp):
            return self._emit_bad(op)
        event = s.close()
        self._push(event)
        return str(event["event_id"])

    def _emit_bad(self, op: BadOp) -> str | None:
        s = self.script
        reason = op.reason
        tenant = self.truth.tenant
        if reason in (RejectReason.INVALID_JSON, RejectReason.NOT_AN_OBJECT):
            previous = next(r.data for r in reversed(self.records) if isinstance(r.data, dict))
            line = orjson.dumps(previous)
            # A torn write of the previous record, or a batch sent as one array.
            raw = (
                line[: len(line) // 2]
                if reason is RejectReason.INVALID_JSON
                else b"[" + line + b"]"
            )
            truth = DeadLetterTruth(None, None, reason.value, None)
            self._push(raw, truth)
            self.truth.deadletters.append(truth)
            return None
        if reason is RejectReason.NON_FINITE_SCORE:
            event = s.score((op.span_id, 0.5))
            event["scores"][0]["score"] = "__NAN__"
            raw = orjson.dumps(event).replace(b'"__NAN__"', b"NaN")
            s.raw[-1] = event
            truth = DeadLetterTruth(self.session_id, tenant, reason.value, str(event["event_id"]))
            self._push(raw, truth)
            self.records[-1].ms = self.start_ms + self.step_ms * int(event["seq"])
            self.truth.deadletters.append(truth)
            return str(event["event_id"])
        event = s.add(op.span_id, op.text, position=op.position, role="tool")
        if reason is RejectReason.UNSUPPORTED_SCHEMA_VERSION:
            event["schema_version"] = 2
        elif reason is RejectReason.UNKNOWN_TYPE:
            event["type"] = "span.updated"
        elif reason is RejectReason.MISSING_FIELD:
            del event["tokens"]
        elif reason is RejectReason.INVALID_FIELD:
            event["tokens"] = -1
        elif reason is RejectReason.HASH_MISMATCH:
            event["text_sha256"] = text_sha256(op.text + " (edited)")
        truth = DeadLetterTruth(self.session_id, tenant, reason.value, str(event["event_id"]))
        self._push(event, truth)
        self.truth.deadletters.append(truth)
        return str(event["event_id"])

    # -- building blocks ---------------------------------------------------

    def _new_id(self, st: SimState, prefix: str) -> str:
        st.ids[prefix] += 1
        return f"{prefix}{st.ids[prefix]}"

    def _next_position(self, st: SimState) -> int:
        return max((s.position for s in st.model.spans.values()), default=-1) + 1

    def _entity(self, st: SimState, kind: str) -> Entity:
        cls, factory = self.domain.kinds[kind]
        taken = {e.key for e in st.entities}
        while True:
            entity = Entity(kind, factory(self.rng), cls)
            if entity.key not in taken:
                st.entities.append(entity)
                return entity

    def _old_entity(self, st: SimState, kind: str) -> Entity | None:
        known = [e for e in st.entities if e.noun == kind]
        if not known:
            return None
        live_keys = {k for s in st.model.spans.values() for k in s.keys}
        held = [e for e in known if e.key in live_keys] or known
        # Recent entities are talked about more.
        return held[-1] if self.rng.random() < 0.6 else self.rng.choice(held)

    def _choose_beat(self, st: SimState, beats: Sequence[Beat]) -> tuple[Beat, tuple[Entity, ...]]:
        options: list[tuple[Beat, float]] = []
        count = len(st.entities)
        for beat in beats:
            old = [k for k in beat.slots if not k.startswith("+")]
            new = [k for k in beat.slots if k.startswith("+")]
            if any(not any(e.noun == k for e in st.entities) for k in old):
                continue
            if new and count >= 7:
                continue
            weight = 1.0
            if old:
                weight = 3.0 if self.domain.referent_dense else 1.0
            elif not beat.slots:
                weight = 1.0 if self.domain.referent_dense else 3.0
            options.append((beat, weight))
        beat = self.rng.choices([b for b, _ in options], weights=[w for _, w in options])[0]
        slots: list[Entity] = []
        for kind in beat.slots:
            if kind.startswith("+"):
                slots.append(self._entity(st, kind[1:]))
            else:
                entity = self._old_entity(st, kind)
                assert entity is not None
                slots.append(entity)
        return beat, tuple(slots)

    def _add(
        self, p: Planner, beat: Beat, slots: tuple[Entity, ...], intend: Sequence[FaultKind] = ()
    ) -> str:
        st = p.state
        prefix = {"user": "u", "tool": "t", "assistant": "a"}[beat.role]
        span_id = self._new_id(st, prefix)
        known = frozenset(st.model.known_types)
        text = compose(beat.forms[0], slots, known)
        st.content[span_id] = SpanContent(beat.role, beat.forms, slots, 0, text.text)
        p.run(AddOp(span_id, text, beat.role, self._next_position(st), known), intend)
        return span_id

    def _natural(self, content: SpanContent) -> float:
        if content.filler:
            return self.rng.uniform(0.05, 0.35)
        if content.role == "user":
            return self.rng.uniform(0.55, 0.95)
        if content.role == "tool":
            return self.rng.uniform(0.35, 0.8)
        return self.rng.uniform(0.25, 0.65)

    def _unique(self, values: dict[str, float], others: Sequence[float]) -> dict[str, float]:
        # Distinct values keep every ranking free of ties (ties would rank by position).
        taken = {round(v, 3) for v in others}
        result: dict[str, float] = {}
        for span_id, value in values.items():
            v = round(min(SCORE_MAX, max(SCORE_MIN, value)), 3)
            step = 0.001
            while v in taken:
                v = round(min(SCORE_MAX, max(SCORE_MIN, v + step)), 3)
                step = -step - 0.001 if step > 0 else -step + 0.001
            taken.add(v)
            result[span_id] = v
        return result

    def _pass(
        self, p: Planner, values: dict[str, float], modes: dict[str, str] | None = None
    ) -> ScoreOp:
        rescored = set(values)
        others = [
            s.score
            for s in p.model.spans.values()
            if s.score is not None and s.span_id not in rescored
        ]
        final = self._unique(values, [v for v in others if v is not None])
        modes = modes or {}
        return ScoreOp(tuple((sid, v, modes.get(sid)) for sid, v in final.items()))

    def _closing_values(
        self,
        p: Planner,
        fixed: dict[str, float],
        factor: float = 1.0,
        exclude: Container[str] = (),
    ) -> dict[str, float]:
        """Scores for the pass that closes the open drift window: ``fixed`` plus, when
        needed, re-scores of the other bound spans so that the mean lands on
        ``factor`` times the mean before the rewrite (1.0: a healthy, flat cycle)."""
        model = p.model
        window = model.window
        if window is None or window.mean_before is None:
            return dict(fixed)
        target = window.mean_before * factor
        poisoned = model.poisoned_pending
        others = {
            s.span_id: s.score
            for s in model.spans.values()
            if s.score is not None
            and s.span_id not in fixed
            and s.span_id not in exclude
            and s.span_id not in poisoned
        }
        frozen_values = [
            s.score
            for s in model.spans.values()
            if s.score is not None and s.span_id in exclude and s.span_id not in fixed
        ]
        live_fixed = {k: v for k, v in fixed.items() if k not in poisoned}
        count = len(others) + len(live_fixed) + len(frozen_values)
        if count == 0:
            return dict(fixed)
        margin = 0.25 * model.drift_tolerance * abs(target)
        total = math.fsum([*(v for v in others.values() if v is not None), *live_fixed.values()])
        total += math.fsum(v for v in frozen_values if v is not None)
        if abs(total / count - target) <= margin:
            return dict(fixed)
        values = dict(fixed)
        need = (
            target * count
            - math.fsum(live_fixed.values())
            - math.fsum(v for v in frozen_values if v is not None)
        )
        have = math.fsum(v for v in others.values() if v is not None)
        if others and have > 0:
            scale = max(0.0, need / have)
            for span_id, value in others.items():
                assert value is not None
                values[span_id] = min(SCORE_MAX, max(SCORE_MIN, value * scale))
        movable = [k for k in values if k not in poisoned]
        current = math.fsum(values[k] for k in movable) + math.fsum(
            v for v in frozen_values if v is not None
        )
        if movable and abs(current / count - target) > margin:
            shift = (target * count - current) / len(movable)
            for k in movable:
                values[k] = min(SCORE_MAX, max(SCORE_MIN, values[k] + shift))
        return values

    # -- healthy steps -------------------------------------------------------

    def _turn(self, p: Planner, turn: int, gap: int = 0, no_hash: bool = False) -> bool:
        st = p.state
        p.run(NextTurn())
        if gap:
            p.run(GapOp(gap))
        new: list[str] = []
        beats = self.domain.opening if turn == 1 else self.domain.user
        beat, slots = self._choose_beat(st, beats)
        new.append(self._add(p, beat, slots, [FaultKind.SEQUENCE_GAP] if gap else ()))
        if self.rng.random() < 0.6 or turn == 1:
            beat, slots = self._choose_beat(st, self.domain.tool)
            new.append(self._add(p, beat, slots))
        beat, slots = self._choose_beat(st, self.domain.assistant)
        new.append(self._add(p, beat, slots))
        values = {sid: self._natural(st.content[sid]) for sid in new}
        if turn % 3 == 0:
            # A refresh against the new turn: old spans lose relevance, except
            # those that repeat a key of the new turn (lexical overlap). Spans
            # only referred to by an anaphor ("that account") decay: seed 001.
            fresh_keys = {k for sid in new for k in st.model.spans[sid].keys}
            for span in st.model.spans.values():
                if span.score is None or span.span_id in values or span.poisoned:
                    continue
                value = span.score * self.rng.uniform(0.7, 0.95)
                if span.keys & fresh_keys:
                    value = max(value, self.rng.uniform(0.6, 0.9))
                values[span.span_id] = value
        if no_hash:
            # The harness's scorer dropped the hash of one new score, then retried.
            victim = new[-1]
            p.run(self._pass(p, values, {victim: ""}), [FaultKind.SCORE_PROVENANCE_GAP])
            p.run(self._pass(p, {victim: values[victim]}))
        else:
            p.run(self._pass(p, values))
        return True

    def _ordered_ok(self, p: Planner) -> list[str]:
        """Live spans that may take part in a rewrite: scored, not stale, not poisoned."""
        model = p.model
        return [
            s.span_id
            for s in model.ordered()
            if s.score is not None
            and s.counter == 0
            and not s.poisoned
            and s.span_id in p.state.content
        ]

    def _merge_group(self, p: Planner, size: int | None = None, lowest: bool = False) -> list[str]:
        order = [s.span_id for s in p.model.ordered()]
        usable = set(self._ordered_ok(p))
        size = size or self.rng.randint(2, 4)
        runs: list[list[str]] = []
        for start in range(max(0, int(len(order) * 0.6))):
            group = order[start : start + size]
            if len(group) == size and all(s in usable for s in group):
                runs.append(group)
        if not runs:
            return []
        if lowest:
            spans = p.model.spans

            def mean(g: list[str]) -> float:
                return math.fsum(spans[s].score or 0.0 for s in g) / len(g)

            return min(runs, key=mean)
        return self.rng.choice(runs)

    def _summary(
        self, p: Planner, parents: Sequence[str], known: frozenset[str]
    ) -> tuple[str, SpanContent, Text]:
        st = p.state
        entities: dict[str, Entity] = {}
        for parent in parents:
            for entity in st.content[parent].slots:
                entities.setdefault(entity.key, entity)
        slots = tuple(entities.values())
        if slots:
            items = ", ".join(f"<e{i}>" for i in range(len(slots)))
            forms = tuple(f.format(items=items) for f in SUMMARY_FORMS)
        else:
            forms = SUMMARY_EMPTY
        budget = sum(p.model.spans[s].tokens for s in parents)
        level = 0
        text = compose(forms[0], slots, known)
        # A summary is shorter than what it replaces when it can be.
        while text.tokens >= budget and level + 1 < len(forms):
            level += 1
            text = compose(forms[level], slots, known)
        span_id = self._new_id(st, "sum")
        return span_id, SpanContent("summary", forms, slots, level, text.text), text

    def _rewrite(
        self,
        p: Planner,
        *,
        merges: Sequence[Sequence[str]] = (),
        paraphrase: Sequence[str] = (),
        lossy: Sequence[str] = (),
        retext: dict[str, str] | None = None,
        drop: Sequence[str] = (),
        declared: Sequence[str] | None = None,
        invalidate: bool | Sequence[str] = True,
        claim: str | None = None,
        base_seq: int | None = None,
        late: Sequence[str] = (),
        intend: Sequence[FaultKind] = (),
        summary: str | None = None,
    ) -> tuple[list[str], dict[str, float]] | None:
        """One compaction; returns (created summary ids, the scores of the spans
        it changed or merged, as they were) or None when it cannot be built."""
        st, model = p.state, p.model
        known = frozenset(model.known_types)
        first_of: dict[str, int] = {}
        merged: set[str] = set()
        for g, group in enumerate(merges):
            ordered = sorted(group, key=lambda s: model.spans[s].order)
            first_of[ordered[0]] = g
            merged.update(group)
        retext = retext or {}
        changed = set(paraphrase) | set(lossy) | set(retext)
        if changed & merged or set(drop) & (merged | changed):
            return None
        old_scores: dict[str, float] = {}
        invalidated: list[str] = []
        # In context order, never set order: string hashing differs per process
        # and the bytes must not.
        for span in model.ordered():
            if span.span_id not in merged and span.span_id not in changed:
                continue
            span_id = span.span_id
            if span.score is not None and span.score_id is not None:
                old_scores[span_id] = span.score
                invalidated.append(span.score_id)
        entries: list[SnapEntry] = []
        created: list[str] = []
        new_content: dict[str, SpanContent] = {}
        for span in model.ordered():
            sid = span.span_id
            if sid in late or sid in drop:
                continue
            if sid in merged:
                if sid not in first_of:
                    continue
                parents = sorted(merges[first_of[sid]], key=lambda s: model.spans[s].order)
                new_id, content, text = self._summary(p, parents, known)
                if summary == "long":
                    text = self._ballooned(p, parents, content, known)
                    content.text = text.text
                elif summary == "empty":
                    text = compose("", (), known)
                    content = SpanContent("summary", ("",), (), 0, "")
                claim_value: tuple[str, float, str | None] | None = None
                if claim is not None:
                    inherited = max((old_scores.get(q, 0.0) for q in parents), default=0.5)
                    claim_hash = (
                        None if claim == "gap" else text_sha256(st.content[parents[0]].text)
                    )
                    claim_value = (f"inherited-{new_id}", round(inherited, 3), claim_hash)
                    claim = None
                new_content[new_id] = content
                created.append(new_id)
                entries.append(SnapEntry(new_id, text, tuple(parents), claim_value, known))
                continue
            content = st.content[sid]
            if sid in lossy or sid in retext:
                plain = retext.get(sid) or LOSSY_FORMS[content.role]
                text = compose(plain, (), known)
                new_content[sid] = SpanContent(content.role, (text.text,), (), 0, text.text)
                entries.append(SnapEntry(sid, text, known=known))
            elif sid in paraphrase:
                if content.level + 1 >= len(content.forms):
                    return None
                level = content.level + 1
                text = compose(content.forms[level], content.slots, known)
                new_content[sid] = SpanContent(
                    content.role, content.forms, content.slots, level, text.text
                )
                entries.append(SnapEntry(sid, text, known=known))
            else:
                text = Text(content.text, span.holds, span.anaphors)
                entries.append(SnapEntry(sid, text))
        if declared is None:
            declared = [*paraphrase, *lossy, *retext]
        if invalidate is True:
            invalid: Sequence[str] = invalidated
        elif invalidate is False:
            invalid = ()
        else:
            invalid = invalidate
        for sid in merged | set(drop):
            st.content.pop(sid, None)
        st.content.update(new_content)
        p.run(RewriteOp(tuple(entries), tuple(declared), tuple(invalid), base_seq), intend)
        return created, old_scores

    def _ballooned(
        self, p: Planner, parents: Sequence[str], content: SpanContent, known: frozenset[str]
    ) -> Text:
        """A summarizer that restates its sources at length: longer than all of them."""
        budget = sum(p.model.spans[s].tokens for s in parents)
        template = content.forms[0]
        text = compose(template, content.slots, known)
        while text.tokens <= budget:
            template += " Restated once more at length."
            text = compose(template, content.slots, known)
        return text

    def _compaction(
        self,
        p: Planner,
        *,
        intend: Sequence[FaultKind] = (),
        merge: bool | None = None,
        paraphrases: int | None = None,
        **knobs: Any,
    ) -> bool:
        """A compaction plus the scoring pass that follows it (healthy by default)."""
        st = p.state
        base_seq = None
        late: list[str] = []
        if knobs.pop("allow_lag", True) and self.rng.random() < 0.2:
            # A lagging compactor: its snapshot was taken before the newest user turn.
            beat, slots = self._choose_beat(st, self.domain.user)
            base_seq = st.seq - 1
            late.append(self._add(p, beat, slots))
        merges: list[list[str]] = []
        if merge if merge is not None else self.rng.random() < 0.75:
            group = self._merge_group(p)
            if group:
                merges.append(group)
        count = paraphrases if paraphrases is not None else self.rng.randint(0, 2)
        busy = {s for g in merges for s in g}
        options = [
            s
            for s in self._ordered_ok(p)
            if s not in busy
            and s not in late
            and st.content[s].level + 1 < len(st.content[s].forms)
        ]
        self.rng.shuffle(options)
        chosen = options[:count]
        if not merges and not chosen:
            return False
        if count and len(chosen) < count:
            return False
        built = self._rewrite(
            p,
            merges=merges,
            paraphrase=chosen,
            base_seq=base_seq,
            late=late,
            intend=intend,
            **knobs,
        )
        if built is None:
            return False
        created, old = built
        fixed = {sid: old[sid] for sid in chosen if sid in old}
        for sid, group in zip(created, merges, strict=True):
            parents = [old[q] for q in group if q in old]
            fixed[sid] = (sum(parents) / len(parents) if parents else 0.3) * self.rng.uniform(
                0.9, 1.1
            )
        for sid in late:
            fixed[sid] = self._natural(st.content[sid])
        p.run(self._pass(p, self._closing_values(p, fixed)))
        return True

    def _eviction(self, p: Planner) -> bool:
        model = p.model
        if model.stale():
            return False
        ranked = model.ranked()
        roll = self.rng.random()
        order = [s.span_id for s in model.ordered() if s.span_id not in model.poisoned_pending]
        if roll < 0.35 and len(ranked) >= 4:
            k = self.rng.randint(1, min(4, len(ranked) - 3))
            low, high = ranked[k - 1].score, ranked[k].score
            assert low is not None and high is not None
            op = EvictOp("threshold", threshold=round((low + high) / 2, 4))
        elif roll < 0.6 and len(ranked) >= 5:
            op = EvictOp("keep_top_k", keep_top_k=len(ranked) - self.rng.randint(2, 5))
        elif roll < 0.8:
            scored = [s for s in order if model.spans[s].score is not None]
            op = EvictOp("candidates", candidates=tuple(scored[: self.rng.randint(2, 4)]))
        else:
            op = EvictOp(
                "candidates", candidates=tuple(order[: self.rng.randint(2, 4)]), basis="recency"
            )
        p.run(op)
        return True

    # -- injections ------------------------------------------------------------

    def _inj_missing_invalidation(self, p: Planner) -> bool:
        return self._compaction(
            p, intend=[FaultKind.REWRITE_WITHOUT_INVALIDATION], invalidate=False, allow_lag=False
        )

    def _inj_undeclared(self, p: Planner) -> bool:
        return self._compaction(
            p,
            intend=[FaultKind.UNDECLARED_MODIFICATION],
            paraphrases=1,
            declared=[],
            allow_lag=False,
        )

    def _inj_provenance_gap(self, p: Planner) -> bool:
        if self.rng.random() < 0.5:
            return self._turn(p, 2, no_hash=True)
        return self._compaction(
            p, intend=[FaultKind.SCORE_PROVENANCE_GAP], merge=True, claim="gap", allow_lag=False
        )

    def _inj_stale_score(self, p: Planner) -> bool:
        if self.rng.random() < 0.5:
            return self._compaction(
                p, intend=[FaultKind.STALE_SCORE], merge=True, claim="stale", allow_lag=False
            )
        # The re-scoring pass after a paraphrase sends a cached score of the old text.
        options = [
            s
            for s in self._ordered_ok(p)
            if p.state.content[s].level + 1 < len(p.state.content[s].forms)
        ]
        if not options:
            return False
        target = self.rng.choice(options)
        old_text = p.state.content[target].text
        built = self._rewrite(p, paraphrase=[target])
        if built is None:
            return False
        _, old = built
        values = self._closing_values(p, {}, exclude={target})
        values[target] = old[target]
        p.run(self._pass(p, values, {target: old_text}), [FaultKind.STALE_SCORE])
        p.run(self._pass(p, {target: old[target]}))
        return True

    def _two_step(self, p: Planner, first: list[str], poison: bool) -> bool:
        """Merge ``first`` into a summary and leave it unscored; then summarise it
        again (counter 2) or, with ``poison``, condense it twice (counters 2, 3)."""
        built = self._rewrite(p, merges=[first])
        if built is None:
            return False
        [sum_a], _ = built
        p.run(self._pass(p, self._closing_values(p, {}, exclude={sum_a})))
        if poison:
            ror, poisoned = FaultKind.REWRITE_OF_REWRITE, FaultKind.POISONED_SPAN
            for text, intend in zip(POISON_FORMS, (ror, poisoned), strict=True):
                if self._rewrite(p, retext={sum_a: text}, intend=[intend]) is None:
                    return False
                values = self._closing_values(p, {}, exclude={sum_a})
                if intend is poisoned:
                    values[sum_a] = 0.5  # the harness tries; the engine ignores a poisoned span
                p.run(self._pass(p, values))
            return True
        order = [s.span_id for s in p.model.ordered()]
        usable = set(self._ordered_ok(p))
        at = order.index(sum_a)
        near = [order[i] for i in (at - 1, at + 1) if 0 <= i < len(order)]
        near = [s for s in near if s in usable]
        if not near:
            return False
        partner = self.rng.choice(near)
        built = self._rewrite(p, merges=[[sum_a, partner]], intend=[FaultKind.REWRITE_OF_REWRITE])
        if built is None:
            return False
        [sum_b], old = built
        value = old.get(partner, 0.4) * self.rng.uniform(0.9, 1.1)
        p.run(self._pass(p, self._closing_values(p, {sum_b: value})))
        return True

    def _fillers(self, p: Planner, count: int) -> list[str]:
        """``count`` live, scored spans that hold nothing; when too few are live the
        conversation gets a short exchange of small talk first."""
        st = p.state
        found = [s for s in self._ordered_ok(p) if st.content[s].filler]
        if len(found) >= count:
            self.rng.shuffle(found)
            return found[:count]
        added: list[str] = []
        roles = ("user", "assistant")
        for i in range(count - len(found)):
            beats = self.domain.user if roles[i % 2] == "user" else self.domain.assistant
            small = [b for b in beats if not b.slots]
            added.append(self._add(p, self.rng.choice(small), ()))
        p.run(self._pass(p, {sid: self._natural(st.content[sid]) for sid in added}))
        return found + added

    def _inj_rewrite_of_rewrite(self, p: Planner) -> bool:
        group = self._merge_group(p)
        return bool(group) and self._two_step(p, group, poison=False)

    def _inj_poisoned(self, p: Planner) -> bool:
        # Fillers only: a poisoned span leaves at the next decision, and a span
        # that nothing needs is dropped without a pin (one POISONED_SPAN fault).
        return self._two_step(p, self._fillers(p, 2), poison=True)

    def _inj_drift(self, p: Planner) -> bool:
        if p.model.drift_streak:
            return False
        for step in range(2):
            group = self._merge_group(p, lowest=True)
            if not group:
                return False
            built = self._rewrite(p, merges=[group])
            if built is None:
                return False
            [summary], old = built
            high = max(old.values()) * self.rng.uniform(1.05, 1.2)
            values = self._closing_values(p, {summary: high}, factor=self.rng.uniform(1.15, 1.3))
            # The summariser's denser text scores higher every time (seed 000).
            p.run(self._pass(p, values), [FaultKind.MONOTONIC_DRIFT] if step else ())
        return True

    def _inj_ungated(self, p: Planner) -> bool:
        [victim] = self._fillers(p, 1)
        usable = self._ordered_ok(p)
        rest = [
            s
            for s in usable
            if s != victim and p.state.content[s].level + 1 < len(p.state.content[s].forms)
        ]
        paraphrase = [self.rng.choice(rest)] if rest and self.rng.random() < 0.5 else []
        built = self._rewrite(
            p, paraphrase=paraphrase, drop=[victim], intend=[FaultKind.UNGATED_EVICTION]
        )
        if built is None:
            return False
        _, old = built
        fixed = {s: old[s] for s in paraphrase if s in old}
        p.run(self._pass(p, self._closing_values(p, fixed)))
        return True

    def _inj_referent_dropped(self, p: Planner) -> bool:
        model = p.model
        options: list[list[str]] = []
        for span in model.ordered():
            for type_ in span.anaphors:
                if model.type_binder(type_, span.order) is None:
                    continue
                holders = [
                    s.span_id for s in model.ordered() if s.order < span.order and type_ in s.types
                ]
                usable = set(self._ordered_ok(p))
                if 0 < len(holders) <= 3 and all(h in usable for h in holders):
                    options.append(holders)
        if not options:
            return False
        lossy = self.rng.choice(options)
        # A compaction that shortened the turns naming the entity and lost its identifier.
        built = self._rewrite(p, lossy=lossy, intend=[FaultKind.REFERENT_DROPPED])
        if built is None:
            return False
        _, old = built
        fixed = {s: old[s] for s in lossy if s in old}
        p.run(self._pass(p, self._closing_values(p, fixed)))
        return True

    def _inj_ballooning(self, p: Planner) -> bool:
        return self._compaction(
            p,
            intend=[FaultKind.SUMMARY_BALLOONING],
            merge=True,
            paraphrases=0,
            summary="long",
            allow_lag=False,
        )

    def _inj_empty_summary(self, p: Planner) -> bool:
        # The summarizer failed (an error, a refusal) and the harness committed its
        # empty output over small talk, so no referent is lost with it.
        fillers = [s for s in self._ordered_ok(p) if p.state.content[s].filler]
        order = [s.span_id for s in p.model.ordered()]
        runs = [
            order[i : i + 2]
            for i in range(len(order) - 1)
            if order[i] in fillers and order[i + 1] in fillers
        ]
        if runs:
            group = self.rng.choice(runs)
        else:  # a short exchange of small talk first
            st = p.state
            group = [
                self._add(p, self.rng.choice([b for b in beats if not b.slots]), ())
                for beats in (self.domain.user, self.domain.assistant)
            ]
            p.run(self._pass(p, {sid: self._natural(st.content[sid]) for sid in group}))
        built = self._rewrite(p, merges=[group], summary="empty", intend=[FaultKind.EMPTY_SUMMARY])
        if built is None:
            return False
        created, old = built
        parents = [old[q] for q in group if q in old]
        fixed = {created[0]: (sum(parents) / len(parents) if parents else 0.3)}
        p.run(self._pass(p, self._closing_values(p, fixed)))
        return True

    def _inj_sequence_gap(self, p: Planner) -> bool:
        return self._turn(p, 2, gap=self.rng.randint(1, 3))

    def _inj_orphan(self, p: Planner) -> bool:
        st = p.state
        if p.model.stale():
            return False
        [parent] = self._fillers(p, 1)
        digest = self._new_id(st, "dig")
        known = frozenset(p.model.known_types)
        text = compose(DIGEST_FORMS[0], (), known)
        st.content[digest] = SpanContent("digest", DIGEST_FORMS, (), 0, text.text)
        # The harness keeps its own digest of a reply, then lets the pruner evict
        # the reply the digest cites.
        p.run(AddOp(digest, text, "assistant", self._next_position(st), known, (parent,)))
        p.run(self._pass(p, {digest: self.rng.uniform(0.3, 0.6)}))
        p.run(EvictOp("candidates", candidates=(parent,)), [FaultKind.ORPHANED_PARENT])
        return True

    def _inj_stalled(self, p: Planner) -> bool:
        model = p.model
        if model.freeze_streak or len(model.ranked()) < 4:
            return False
        options = [
            s
            for s in self._ordered_ok(p)
            if p.state.content[s].level + 1 < len(p.state.content[s].forms)
        ]
        if not options:
            return False
        target = self.rng.choice(options)
        built = self._rewrite(p, paraphrase=[target])
        if built is None:
            return False
        _, old = built
        # The harness re-scores everything but the span it rewrote, and keeps asking.
        p.run(self._pass(p, self._closing_values(p, {}, exclude={target})))
        for attempt in range(3):
            ranked = p.model.ranked()
            value = ranked[min(2, len(ranked) - 1)].score
            assert value is not None
            intend = [FaultKind.PRUNING_STALLED] if attempt == 2 else []
            p.run(EvictOp("threshold", threshold=round(value + 0.0005, 4)), intend)
        p.run(self._pass(p, {target: old.get(target, 0.5)}))
        return True

    def _bad(self, p: Planner, reason: RejectReason) -> bool:
        st = p.state
        if reason is RejectReason.SPAN_EXISTS:
            live = [s for s in self._ordered_ok(p)]
            if not live:
                return False
            span_id = self.rng.choice(live)
            span = p.model.spans[span_id]
            p.run(BadOp(reason, span_id, st.content[span_id].text, span.position))
            return True
        if reason is RejectReason.NON_FINITE_SCORE:
            live = self._ordered_ok(p)
            if not live:
                return False
            p.run(BadOp(reason, self.rng.choice(live)))
            return True
        span_id = self._new_id(st, "x")
        text = "late tool output, retried by the harness."
        p.run(BadOp(reason, span_id, text, self._next_position(st)))
        return True


# --------------------------------------------------------------------------
# The fleet
# --------------------------------------------------------------------------


@dataclass(slots=True)
class SimulatedFleet:
    """A generated fleet: its input lines (interleaved), its truth, and the texts
    with what the generator says they hold (for tests)."""

    lines: list[bytes]
    truth: FleetTruth
    texts: list[TextRecord]
    skipped: list[tuple[str, str]]
    """(session id, injection) that could not be placed before the session ended."""


def _assign_injections(config: SimConfig, rng: random.Random) -> list[list[str]]:
    pool = [name for name, weight in config.faults for _ in range(weight)]
    rng.shuffle(pool)
    cursor = 0
    plans: list[list[str]] = []
    for _ in range(config.sessions):
        chosen: list[str] = []
        if pool and rng.random() < config.fault_rate:
            wanted = rng.randint(1, max(1, config.max_injections))
            for _ in range(len(pool)):
                name = pool[cursor % len(pool)]
                cursor += 1
                if name not in chosen:
                    chosen.append(name)
                if len(chosen) >= wanted:
                    break
        plans.append(chosen)
    return plans


def simulate(config: SimConfig) -> SimulatedFleet:
    """Generate a fleet. Deterministic: the same config gives the same fleet."""
    if config.sessions < 0 or config.tenants < 1 or config.events_per_session < 12:
        raise ValueError("need sessions >= 0, tenants >= 1 and events per session >= 12")
    if not 0.0 <= config.fault_rate <= 1.0:
        raise ValueError("fault rate must be between 0 and 1")
    rng = random.Random(config.seed)
    tenants = [
        TENANT_NAMES[i] if i < len(TENANT_NAMES) else f"tenant-{i}" for i in range(config.tenants)
    ]
    plans = _assign_injections(config, rng)
    spread_ms = max(60_000, config.sessions * 15_000)
    generators: list[SessionGenerator] = []
    for index, injections in enumerate(plans):
        session_rng = random.Random(rng.getrandbits(64))
        domain = session_rng.choices(DOMAINS, weights=_DOMAIN_WEIGHTS)[0]
        if "REFERENT_DROPPED" in injections and not domain.referent_dense:
            domain = session_rng.choice([d for d in DOMAINS if d.referent_dense])
        length = max(12, round(config.events_per_session * session_rng.uniform(0.8, 1.2)))
        start = EPOCH + timedelta(milliseconds=session_rng.randint(0, spread_ms))
        generator = SessionGenerator(
            session_rng,
            f"s{config.seed}-{index:05d}",
            tenants[index % len(tenants)],
            domain,
            length,
            injections,
            start,
            session_rng.randint(400, 3000),
        )
        generator.run()
        generators.append(generator)
    lines, sessions = _interleave(generators)
    digest = hashlib.sha256(b"".join(line + b"\n" for line in lines)).hexdigest()
    truth = FleetTruth(
        generator=config.describe(),
        sessions=sessions,
        events_lines=len(lines),
        events_sha256=digest,
    )
    texts = [t for g in generators for t in g.texts]
    skipped = [(g.session_id, name) for g in generators for name in g.pending]
    return SimulatedFleet(lines, truth, texts, skipped)


def _interleave(generators: Sequence[SessionGenerator]) -> tuple[list[bytes], list[SessionTruth]]:
    """Merge the sessions by event time, each session in its own order (a live fleet)."""

    def stream(index: int, gen: SessionGenerator) -> Iterator[tuple[int, int, int, _Record]]:
        for position, record in enumerate(gen.records):
            yield record.ms, index, position, record

    merged = heapq.merge(*(stream(i, g) for i, g in enumerate(generators)))
    lines: list[bytes] = []
    located: dict[int, DeadLetterTruth] = {}
    for line_no, (_, _, _, record) in enumerate(merged):
        data = record.data
        lines.append(data if isinstance(data, bytes) else orjson.dumps(data))
        if record.deadletter is not None:
            located[id(record.deadletter)] = replace(record.deadletter, line=line_no)
    sessions = []
    for gen in generators:
        gen.truth.deadletters = [located.get(id(d), d) for d in gen.truth.deadletters]
        sessions.append(gen.truth)
    return lines, sessions


def truth_path_for(out: str) -> str:
    """``sim.jsonl`` -> ``sim.truth.json`` (beside the events file)."""
    base = out[: -len(".jsonl")] if out.endswith(".jsonl") else out
    return f"{base}.truth.json"
