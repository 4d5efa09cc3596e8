"""The injections registry: each way a harness goes wrong, with the faults it must raise.

An :class:`Injection` is one entry of the fault mix (``--faults``): its name,
the fault kinds the contract requires it to raise (the session asserts that a
step it commits for the injection intends no other kind, and the planner's
reference model must report exactly those), and how to build it on a session
(:class:`~streams.sim.steps.Steps`). ``MALFORMED`` raises no fault; it writes one
record the engine must dead-letter, with one of :data:`MALFORMED_REASONS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from schemas import FaultKind, RejectReason
from streams.sim.plan import AddOp, EvictOp, Planner, SpanContent, anaphors_of, score_of
from streams.sim.steps import Steps
from streams.sim.texts import compose
from streams.sim.vocab import DIGEST_FORMS

Plan = Callable[[Planner], bool]
"""Builds one attempt of a step on a planner; False when it finds no place."""

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
"""The dead-letter reasons a ``MALFORMED`` injection draws from."""


@dataclass(frozen=True, slots=True)
class Injection:
    """One entry of the registry."""

    name: str
    faults: tuple[FaultKind, ...]
    """The fault kinds it must raise (empty: it must raise none)."""
    what: str
    """What the harness does wrong (for people)."""
    build: Callable[[Steps], Plan]
    """Makes the plan the session tries (drawing once per injection)."""
    dense_only: bool = False
    """Needs a referent-dense domain."""


def _missing_invalidation(gen: Steps, p: Planner) -> bool:
    return gen.compaction(
        p, intend=[FaultKind.REWRITE_WITHOUT_INVALIDATION], invalidate=False, allow_lag=False
    )


def _undeclared(gen: Steps, p: Planner) -> bool:
    return gen.compaction(
        p,
        intend=[FaultKind.UNDECLARED_MODIFICATION],
        paraphrases=1,
        declared=[],
        allow_lag=False,
    )


def _provenance_gap(gen: Steps, p: Planner) -> bool:
    if gen.rng.random() < 0.5:
        return gen.turn(p, 2, no_hash=True)
    return gen.compaction(
        p, intend=[FaultKind.SCORE_PROVENANCE_GAP], merge=True, claim="gap", allow_lag=False
    )


def _stale_score(gen: Steps, p: Planner) -> bool:
    if gen.rng.random() < 0.5:
        return gen.compaction(
            p, intend=[FaultKind.STALE_SCORE], merge=True, claim="stale", allow_lag=False
        )
    # The re-scoring pass after a paraphrase sends a cached score of the old text.
    options = [
        s for s in gen.usable(p) if p.state.content[s].level + 1 < len(p.state.content[s].forms)
    ]
    if not options:
        return False
    target = gen.rng.choice(options)
    old_text = p.state.content[target].text
    built = gen.rewrite(p, paraphrase=[target])
    if built is None:
        return False
    _, old = built
    values = gen.closing_values(p, {}, exclude={target})
    values[target] = old[target]
    p.run(gen.scoring(p, values, {target: old_text}), [FaultKind.STALE_SCORE])
    p.run(gen.scoring(p, {target: old[target]}))
    return True


def _rewrite_of_rewrite(gen: Steps, p: Planner) -> bool:
    group = gen.merge_group(p)
    return bool(group) and gen.two_step(p, group, poison=False)


def _poisoned(gen: Steps, p: Planner) -> bool:
    # Fillers only: a poisoned span leaves at the next decision, and a span
    # that nothing needs is dropped without a pin (one POISONED_SPAN fault).
    return gen.two_step(p, gen.fillers(p, 2), poison=True)


def _drift(gen: Steps, p: Planner) -> bool:
    if p.state.session.drift_run:
        return False
    for step in range(2):
        group = gen.merge_group(p, lowest=True)
        if not group:
            return False
        built = gen.rewrite(p, merges=[group])
        if built is None:
            return False
        [summary], old = built
        high = max(old.values()) * gen.rng.uniform(1.05, 1.2)
        values = gen.closing_values(p, {summary: high}, factor=gen.rng.uniform(1.15, 1.3))
        # The summariser's denser text scores higher every time (seed 000).
        p.run(gen.scoring(p, values), [FaultKind.MONOTONIC_DRIFT] if step else ())
    return True


def _ungated(gen: Steps, p: Planner) -> bool:
    [victim] = gen.fillers(p, 1)
    usable = gen.usable(p)
    rest = [
        s
        for s in usable
        if s != victim and p.state.content[s].level + 1 < len(p.state.content[s].forms)
    ]
    paraphrase = [gen.rng.choice(rest)] if rest and gen.rng.random() < 0.5 else []
    return gen.rewrite_and_rescore(
        p, paraphrase, paraphrase=paraphrase, drop=[victim], intend=[FaultKind.UNGATED_EVICTION]
    )


def _referent_dropped(gen: Steps, p: Planner) -> bool:
    model = p.live
    options: list[list[str]] = []
    for span in model.ordered():
        for type_ in anaphors_of(span):
            if model.type_binder(type_, span) is None:
                continue
            holders = [
                s.span_id
                for s in model.ordered()
                if s.order < span.order and type_ in s.referents.types
            ]
            usable = set(gen.usable(p))
            if 0 < len(holders) <= 3 and all(h in usable for h in holders):
                options.append(holders)
    if not options:
        return False
    lossy = gen.rng.choice(options)
    # A compaction that shortened the turns naming the entity and lost its identifier.
    return gen.rewrite_and_rescore(p, lossy, lossy=lossy, intend=[FaultKind.REFERENT_DROPPED])


def _ballooning(gen: Steps, p: Planner) -> bool:
    return gen.compaction(
        p,
        intend=[FaultKind.SUMMARY_BALLOONING],
        merge=True,
        paraphrases=0,
        summary="long",
        allow_lag=False,
    )


def _empty_summary(gen: Steps, p: Planner) -> bool:
    # The summarizer failed (an error, a refusal) and the harness committed its
    # empty output over small talk, so no referent is lost with it.
    fillers = [s for s in gen.usable(p) if p.state.content[s].filler]
    order = [s.span_id for s in p.live.ordered()]
    runs = [
        order[i : i + 2]
        for i in range(len(order) - 1)
        if order[i] in fillers and order[i + 1] in fillers
    ]
    if runs:
        group = gen.rng.choice(runs)
    else:  # a short exchange of small talk first
        st = p.state
        group = [
            gen.add(p, gen.rng.choice([b for b in beats if not b.slots]), ())
            for beats in (gen.domain.user, gen.domain.assistant)
        ]
        p.run(gen.scoring(p, {sid: gen.natural(st.content[sid]) for sid in group}))
    built = gen.rewrite(p, merges=[group], summary="empty", intend=[FaultKind.EMPTY_SUMMARY])
    if built is None:
        return False
    created, old = built
    parents = [old[q] for q in group if q in old]
    fixed = {created[0]: (sum(parents) / len(parents) if parents else 0.3)}
    p.run(gen.scoring(p, gen.closing_values(p, fixed)))
    return True


def _sequence_gap(gen: Steps, p: Planner) -> bool:
    return gen.turn(p, 2, gap=gen.rng.randint(1, 3))


def _orphan(gen: Steps, p: Planner) -> bool:
    st = p.state
    if p.live.stale():
        return False
    [parent] = gen.fillers(p, 1)
    digest = gen.new_id(st, "dig")
    known = frozenset(p.live.known_types())
    text = compose(DIGEST_FORMS[0], (), known)
    st.content[digest] = SpanContent("digest", DIGEST_FORMS, (), 0, text.text)
    # The harness keeps its own digest of a reply, then lets the pruner evict
    # the reply the digest cites.
    p.run(AddOp(digest, text, "assistant", st.live.next_position(), known, (parent,)))
    p.run(gen.scoring(p, {digest: gen.rng.uniform(0.3, 0.6)}))
    p.run(EvictOp("candidates", candidates=(parent,)), [FaultKind.ORPHANED_PARENT])
    return True


def _stalled(gen: Steps, p: Planner) -> bool:
    model = p.live
    if p.state.session.freezes or len(model.ranked()) < 4:
        return False
    options = [
        s for s in gen.usable(p) if p.state.content[s].level + 1 < len(p.state.content[s].forms)
    ]
    if not options:
        return False
    target = gen.rng.choice(options)
    built = gen.rewrite(p, paraphrase=[target])
    if built is None:
        return False
    _, old = built
    # The harness re-scores everything but the span it rewrote, and keeps asking.
    p.run(gen.scoring(p, gen.closing_values(p, {}, exclude={target})))
    for attempt in range(3):
        ranked = p.live.ranked()
        value = score_of(ranked[min(2, len(ranked) - 1)])
        assert value is not None
        intend = [FaultKind.PRUNING_STALLED] if attempt == 2 else []
        p.run(EvictOp("threshold", threshold=round(value + 0.0005, 4)), intend)
    p.run(gen.scoring(p, {target: old.get(target, 0.5)}))
    return True


def _malformed(gen: Steps) -> Plan:
    reason = gen.rng.choice(MALFORMED_REASONS)
    if reason is RejectReason.SESSION_CLOSED:
        gen.straggler = True  # a straggler after the close, written at the end
        return lambda p: True
    return partial(gen.bad, reason=reason)


def _each(build: Callable[[Steps, Planner], bool]) -> Callable[[Steps], Plan]:
    """A plan that calls ``build`` on the session and each attempt's planner."""
    return lambda gen: partial(build, gen)


_F = FaultKind
REGISTRY: dict[str, Injection] = {
    i.name: i
    for i in (
        Injection(
            "REWRITE_WITHOUT_INVALIDATION",
            (_F.REWRITE_WITHOUT_INVALIDATION,),
            "a compaction invalidates none of the scores it breaks",
            _each(_missing_invalidation),
        ),
        Injection(
            "UNDECLARED_MODIFICATION",
            (_F.UNDECLARED_MODIFICATION,),
            "a paraphrase missing from declared_modified (its score invalidated)",
            _each(_undeclared),
        ),
        Injection(
            "SCORE_PROVENANCE_GAP",
            (_F.SCORE_PROVENANCE_GAP,),
            "a merged summary carries an inherited score with no hash, or a scoring "
            "pass drops one hash (then retries)",
            _each(_provenance_gap),
        ),
        Injection(
            "STALE_SCORE",
            (_F.STALE_SCORE,),
            "the pass after a paraphrase sends a cached score of the old text (then "
            "re-scores), or a summary inherits a score hashed on a parent's text",
            _each(_stale_score),
        ),
        Injection(
            "REWRITE_OF_REWRITE",
            (_F.REWRITE_OF_REWRITE,),
            "a summary left unscored is summarised again",
            _each(_rewrite_of_rewrite),
        ),
        Injection(
            "POISONED_SPAN",
            (_F.REWRITE_OF_REWRITE, _F.POISONED_SPAN),
            "a summary of small talk is condensed twice more without a score",
            _each(_poisoned),
        ),
        Injection(
            "MONOTONIC_DRIFT",
            (_F.MONOTONIC_DRIFT,),
            "two compactions in a row merge the lowest-scored turns and the denser "
            "summary scores higher (seed 000)",
            _each(_drift),
        ),
        Injection(
            "UNGATED_EVICTION",
            (_F.UNGATED_EVICTION,),
            "a compaction silently leaves out a span",
            _each(_ungated),
        ),
        Injection(
            "REFERENT_DROPPED",
            (_F.REFERENT_DROPPED,),
            "a compaction shortens every span naming an entity that a later turn "
            'refers to as "that ..." and loses the identifier',
            _each(_referent_dropped),
            dense_only=True,
        ),
        Injection(
            "SEQUENCE_GAP",
            (_F.SEQUENCE_GAP,),
            "1 to 3 events are lost",
            _each(_sequence_gap),
        ),
        Injection(
            "ORPHANED_PARENT",
            (_F.ORPHANED_PARENT,),
            "the harness keeps its own digest of a reply (derived_from), then evicts the reply",
            _each(_orphan),
        ),
        Injection(
            "PRUNING_STALLED",
            (_F.PRUNING_STALLED,),
            "after a paraphrase the harness re-scores everything but that span and asks "
            "three times",
            _each(_stalled),
        ),
        Injection(
            "SUMMARY_BALLOONING",
            (_F.SUMMARY_BALLOONING,),
            "a compaction's summary restates its sources at length, longer than all of them",
            _each(_ballooning),
        ),
        Injection(
            "EMPTY_SUMMARY",
            (_F.EMPTY_SUMMARY,),
            "the summariser fails and the harness commits its empty output over two turns "
            "of small talk",
            _each(_empty_summary),
        ),
        Injection("MALFORMED", (), "one bad record (a dead letter)", _malformed),
    )
}
"""Every injection by name, in the fault mix's order."""

INJECTIONS: tuple[str, ...] = tuple(REGISTRY)
"""Names of the fault mix."""
