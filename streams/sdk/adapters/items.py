"""What the Google ADK, Microsoft Agent Framework and Pydantic AI adapters share.

Each of those frameworks keeps its context as a list of its own objects (ADK
events, Agent Framework messages, Pydantic AI model messages), and a compactor
that turns one list into another. An adapter says how one object is a span
(:class:`Span`: its id, text, role, the tool calls it makes and the calls it
answers); :class:`ItemGuard` does the rest, framework-free: it reports the list,
gates a compaction ``before -> after`` with
:func:`~spanguard.streams.sdk.compaction.gate_compaction` and maps the outcome back to the
framework's objects, keeping every fault as a JSON-ready record for the
framework's own state.

An object may answer several tool calls at once (an ADK event with parallel
function responses, a Pydantic AI request with several tool returns), which one
:class:`~spanguard.streams.sdk.messages.Message` cannot say: :func:`pair_partners` ties
such an object to every call it answers, so the pair still leaves whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Unpack

from spanguard.schemas import IntegrityFault
from spanguard.streams.sdk.bridge import AnySession
from spanguard.streams.sdk.compaction import CompactionGuard, CompactionOutcome, GuardOptions
from spanguard.streams.sdk.messages import Message, TokenCounter

T = TypeVar("T")

FAULTS_KEY = "spanguard_faults"
"""Where the adapters put the faults in the framework's state."""


@dataclass(frozen=True, slots=True)
class Span:
    """One framework object as the SDK sees it.

    ``calls``: the tool call ids it makes; ``answers``: the call ids it answers;
    ``derived_from``: for a summary the framework says it replaces, the ids it
    replaces (empty: the SDK's default lineage, everything the compactor removed);
    ``protected``: as :class:`~spanguard.streams.sdk.messages.Message` (a summary is False).
    """

    id: str
    text: str
    role: str | None = None
    calls: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    protected: bool | None = None
    derived_from: tuple[str, ...] = ()

    def message(self, counter: TokenCounter | None = None) -> Message:
        """The SDK message (tokens from ``counter`` when given, else the session's)."""
        return Message(
            self.id,
            self.text,
            role=self.role,
            tokens=counter(self.text) if counter is not None else None,
            derived_from=self.derived_from,
            tool_call_ids=tuple(dict.fromkeys(self.calls)),
            tool_call_id=self.answers[0] if self.answers else None,
            protected=self.protected,
        )


def call_text(name: str | None, arguments: Any) -> str:
    """A tool call as text (its arguments hold identifiers a later turn may refer to)."""
    return json.dumps({"name": name, "args": arguments}, sort_keys=True, default=str)


def joined(parts: Iterable[str]) -> str:
    """Non-empty ``parts``, one per line."""
    return "\n".join(p for p in parts if p)


def pair_partners(spans: Sequence[Span]) -> dict[str, list[str]]:
    """span id -> span ids that must stay with it: every object answering a call and the
    object making it (the tracker only knows one answered call per message)."""
    callers: dict[str, list[str]] = {}
    for span in spans:
        for call in span.calls:
            callers.setdefault(call, []).append(span.id)
    partners: dict[str, list[str]] = {}
    for span in spans:
        for call in span.answers:
            for caller in callers.get(call, ()):
                if caller != span.id:
                    partners.setdefault(span.id, []).append(caller)
                    partners.setdefault(caller, []).append(span.id)
    return partners


def fault_records(faults: Iterable[IntegrityFault]) -> list[dict[str, Any]]:
    """Faults as JSON-ready dicts (hashes and ids only, never text)."""
    return [f.model_dump(mode="json") for f in faults]


class ItemGuard(CompactionGuard, Generic[T]):
    """A :class:`~spanguard.streams.sdk.compaction.CompactionGuard` over a framework's objects.

    Subclasses say how an object is a span (:meth:`span`). ``faults`` collects every
    fault, as records (the adapters hand them to the framework's state).
    Options: :class:`~spanguard.streams.sdk.compaction.GuardOptions`.
    """

    def __init__(self, session: AnySession, **options: Unpack[GuardOptions]) -> None:
        super().__init__(session, **options)
        self.faults: list[dict[str, Any]] = []

    def span(self, item: T) -> Span:
        """The span of one framework object (adapters override it)."""
        raise NotImplementedError

    def messages(self, spans: Sequence[Span]) -> list[Message]:
        """The SDK messages of ``spans``, counted with the guard's token counter."""
        return [s.message(self.token_counter) for s in spans]

    async def observe_items(self, items: Sequence[T]) -> None:
        """Report the objects not tracked yet."""
        faults = await self.session.observe(self.messages([self.span(i) for i in items]))
        self.faults.extend(fault_records(faults))

    async def gate_items(
        self,
        before: Sequence[T],
        after: Sequence[T],
        *,
        before_spans: Sequence[Span] | None = None,
        strategy: str | None = None,
    ) -> tuple[list[T], CompactionOutcome]:
        """Gate the compaction ``before -> after``: the objects in force (the original
        ones when vetoed or undecided; put-back ones in their place) and the outcome.
        ``before_spans``: the spans of ``before`` taken before the compactor ran (a
        compactor that edits objects in place changes what :meth:`span` reads).

        Raising on ``raise_on`` is the caller's (:meth:`check_raise`), once the
        framework's list is in the state the outcome says: a vetoed compaction must
        be undone before the error leaves."""
        if before_spans is None:
            before_spans = [self.span(i) for i in before]
        after_spans = [self.span(i) for i in after]
        await self.session.observe(self.messages(before_spans))
        # A summary that names a protected message is vetoed; the frameworks' summarisers
        # start from the first message (the task), which the SDK keeps verbatim instead.
        # A declared lineage only names what the context held.
        protected = set(self.session.tracker.protected_ids())
        sources = {s.id for s in before_spans} - protected
        after_spans = [_lineage_within(s, sources) for s in after_spans]
        outcome = await self.gate(
            self.messages(before_spans),
            self.messages(after_spans),
            pair_partners([*before_spans, *after_spans]),
            strategy=strategy,
        )
        self.faults.extend(fault_records(outcome.faults))
        by_id: dict[str, T] = {s.id: i for s, i in zip(before_spans, before, strict=True)}
        if outcome.applied:  # a vetoed rewrite of an object keeps the original object
            by_id.update((s.id, i) for s, i in zip(after_spans, after, strict=True))
        return [by_id[m.id] for m in outcome.messages], outcome

    def take_faults(self) -> list[dict[str, Any]]:
        """The faults collected since the last call (for a framework hook that writes
        them to its state once per run)."""
        taken, self.faults = self.faults, []
        return taken


def _lineage_within(span: Span, sources: set[str]) -> Span:
    """``span`` with its declared lineage cut to ``sources`` (empty: the default one)."""
    if all(p in sources for p in span.derived_from):
        return span
    kept = tuple(p for p in span.derived_from if p in sources)
    return Span(
        span.id, span.text, span.role, span.calls, span.answers, span.protected, derived_from=kept
    )
