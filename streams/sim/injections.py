"""The injections registry: each way a harness goes wrong, with the faults it must raise.

An :class:`Injection` is one entry of the fault mix (``--faults``): its name,
the fault kinds the contract requires it to raise (the session asserts that a
step it commits for the injection intends no other kind, and the planner's
reference model must report exactly those), and how to build it on a session
(:class:`~spanguard.streams.sim.steps.Steps`). ``MALFORMED`` raises no fault; it writes one
record the engine must dead-letter, with one of :data:`MALFORMED_REASONS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from spanguard.schemas import FaultKind, RejectReason
from spanguard.streams.reference.outcome import Compacted
from spanguard.streams.reference.rewrite import (
    THRASH_AFTER,
    THRASH_MIN_REDUCTION,
    THRASH_WITHIN_TURNS,
)
from spanguard.streams.sim.plan import (
    AddOp,
    EvictOp,
    NextTurn,
    Planner,
    SpanContent,
    anaphors_of,
    score_of,
)
from spanguard.streams.sim.steps import Steps
from spanguard.streams.sim.texts import Beat, compose, tool_call
from spanguard.streams.sim.vocab import CONDENSED_PROMPT, DIGEST_FORMS

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
    # Contract 1.2 protects the user's first message, which often introduces the
    # entity a later "that ..." names: a few more turns may bring one it does not.
    for _ in range(4):
        options = _dropped_options(gen, p)
        if options:
            break
        gen.turn(p, 2)
    if not options:
        return False
    lossy = gen.rng.choice(options)
    # A compaction that shortened the turns naming the entity and lost its identifier.
    return gen.rewrite_and_rescore(p, lossy, lossy=lossy, intend=[FaultKind.REFERENT_DROPPED])


def _dropped_options(gen: Steps, p: Planner) -> list[list[str]]:
    """Holders of an entity type (at most three, all rewritable) that a later span's
    anaphor binds: shortening them all loses its antecedent."""
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
    return options


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
    fillers = [s for s in gen.usable(p) if p.state.content[s].filler and p.live.whole([s])]
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


def _summarised(
    gen: Steps,
    p: Planner,
    group: list[str],
    intend: list[FaultKind],
    strategy: str,
    trigger: str = "threshold",
    summary: str | None = None,
) -> list[Compacted] | None:
    """A compaction that merges ``group`` into one summary, then the scoring pass
    that closes its drift window (the summary scores like its sources); the
    compaction records the reference made of it (None: no such compaction)."""
    steps = len(p.steps)
    built = gen.rewrite(
        p, merges=[group], intend=intend, summary=summary, strategy=strategy, trigger=trigger
    )
    if built is None:
        return None
    created, old = built
    parents = [old[q] for q in group if q in old]
    fixed = {created[0]: (sum(parents) / len(parents) if parents else 0.3)}
    p.run(gen.scoring(p, gen.closing_values(p, fixed)))
    return [o for step in p.steps[steps:] for o in step.outcomes if isinstance(o, Compacted)]


def _pair_split(gen: Steps, p: Planner) -> bool:
    # A summariser that takes one half of a tool call/result pair: the result with
    # the reply that follows it, or the turns before the call with the call itself.
    model = p.live
    usable = set(gen.usable(p))
    pairs = [(c, r) for c, r in model.whole_pairs() if c in usable and r in usable]
    if not pairs:
        return False
    call, result = gen.rng.choice(pairs)
    order = [s.span_id for s in model.ordered()]
    fits = [s for s in order if s in usable and model.whole([s])]
    if gen.rng.random() < 0.5:
        at = order.index(result)
        group = [result, *[s for s in order[at + 1 : at + 2] if s in fits]]
    else:
        at = order.index(call)
        group = [*[s for s in order[max(0, at - 2) : at] if s in fits], call]
    if len(group) < 2:
        return False
    split = [FaultKind.TOOL_PAIR_SPLIT]
    return _summarised(gen, p, group, split, "summarize") is not None


def _protected_rewritten(gen: Steps, p: Planner) -> bool:
    # A compaction rewrites the system prompt ("instructions, shortened"), or folds it
    # with the user's first message into the summary of the first turns.
    model = p.live
    prompts = [s for s in model.protected() if p.state.content.get(s, None) is not None]
    system = [s for s in prompts if p.state.content[s].role == "system"]
    if not system or p.live.stale():
        return False
    intend = [FaultKind.PROTECTED_SPAN_REWRITTEN]
    if gen.rng.random() < 0.5:
        built = gen.rewrite(
            p,
            retext={system[0]: CONDENSED_PROMPT},
            intend=intend,
            strategy="summarize",
            trigger="overflow",
        )
        if built is None:
            return False
        _, old = built
        fixed = {s: old[s] for s in system[:1] if s in old}
        p.run(gen.scoring(p, gen.closing_values(p, fixed)))
        return True
    group = prompts[:2]
    if len(group) < 2:
        return False
    return _summarised(gen, p, group, intend, "summarize", "overflow") is not None


def _unique_key_groups(gen: Steps, p: Planner, least: int) -> list[list[str]]:
    """Runs of 2 to 6 adjacent rewritable spans, whole tool pairs included, that hold
    at least ``least`` distinct keys of which fewer than half any other live span
    holds (a summary that keeps none of them loses them; one that keeps them is
    healthy), the latest runs first (nothing after them needs them)."""
    model = p.live
    order = model.ordered()
    usable = set(gen.usable(p))
    found: list[list[str]] = []
    for size in range(2, 7):
        for start in range(len(order) - size, -1, -1):
            run = order[start : start + size]
            ids = [s.span_id for s in run]
            if not all(s in usable for s in ids) or not model.whole(ids):
                continue
            keys = {k for s in run for k in s.referents.keys}
            outside = {k for s in order if s.span_id not in ids for k in s.referents.keys}
            if len(keys) >= least and len(keys & outside) < 0.5 * len(keys):
                found.append(ids)
    return found


def _listing(gen: Steps, p: Planner) -> list[str]:
    """A tool call whose result lists three or four new identifiers of the domain (a
    search, a listing: what nothing refers to yet), scored; returns [call, result]."""
    st = p.state
    kinds = [k for k, spec in gen.domain.kinds.items() if isinstance(spec, tuple)]
    picked = [gen.rng.choice(kinds) for _ in range(gen.rng.randint(3, 4))]
    slots = tuple(st.conversation.new_entity(kind) for kind in picked)
    items = ", ".join(f"<e{i}>" for i in range(len(slots)))
    forms = (f"list_records: found {items}.", f"list_records: {items}.")
    beat = Beat("tool", forms, tuple(f"+{kind}" for kind in picked))
    call = gen.new_id(st, "call_")
    made = [gen.add(p, tool_call(beat), (), calls=(call,)), gen.add(p, beat, slots, answers=call)]
    p.run(gen.scoring(p, {sid: gen.natural(st.content[sid]) for sid in made}))
    return made


def _lost_keys(gen: Steps, p: Planner) -> bool:
    # "163 items collapsed into one line": a summary of turns holding three or more
    # identifiers keeps none of them (turns of the conversation that nothing else
    # names, else a listing that a tool just returned).
    intend = [FaultKind.SUMMARY_LOST_KEYS]
    return _summarised(gen, p, _key_group(gen, p), intend, "summarize", summary="lost") is not None


def _key_group(gen: Steps, p: Planner) -> list[str]:
    """Turns holding three or more identifiers that nothing else names, else a listing
    that a tool just returned."""
    options = _unique_key_groups(gen, p, 3)
    group = options[0] if options and gen.rng.random() < 0.5 else None
    if group is None:
        group = gen.rng.choice(options) if options and gen.rng.random() < 0.5 else _listing(gen, p)
    return group


def _thin_run(gen: Steps, p: Planner, count: int, gap: int, last: FaultKind | None) -> bool:
    """``count`` compactions that each paraphrase one span (the context hardly
    shrinks), ``gap`` turns apart, each closed by its scoring pass; ``last`` is the
    fault the last one must raise."""
    for index in range(count):
        for _ in range(gap if index else 0):
            gen.turn(p, 2)
        options = [
            s for s in gen.usable(p) if p.state.content[s].level + 1 < len(p.state.content[s].forms)
        ]
        if not options:
            return False
        target = gen.rng.choice(options)
        intend = [last] if last is not None and index == count - 1 else []
        trigger = "overflow" if last is not None else "threshold"
        built = gen.rewrite(
            p, paraphrase=[target], intend=intend, strategy="summarize", trigger=trigger
        )
        if built is None:
            return False
        _, old = built
        p.run(gen.scoring(p, gen.closing_values(p, {s: old[s] for s in (target,) if s in old})))
    return True


def _quiet(p: Planner) -> bool:
    """Wait (a few turns with no event) until no run of thin rewrites is open, so the
    next rewrite starts a new count; always True."""
    session = p.live.session
    last = session.last_rewrite_turn
    if last is not None and session.thrash_run:
        for _ in range(THRASH_WITHIN_TURNS + 1 - (p.state.writer.turn - last)):
            p.run(NextTurn())
    return True


def _thrashing(gen: Steps, p: Planner) -> bool:
    # Compactions that do not compact, re-triggered turn after turn (the loop).
    if not _quiet(p):
        return False
    return _thin_run(gen, p, THRASH_AFTER, 1, FaultKind.COMPACTION_THRASHING)


# -- healthy look-alikes: each resembles an injection and must raise nothing ------


def _absorbed_pair(gen: Steps, p: Planner) -> bool:
    # A rolling summary that absorbs a tool call and its result (and the reply).
    model = p.live
    usable = set(gen.usable(p))
    pairs = [(c, r) for c, r in model.whole_pairs() if c in usable and r in usable]
    if not pairs:
        return False
    call, result = gen.rng.choice(pairs)
    order = [s.span_id for s in model.ordered()]
    at = order.index(result)
    after = [s for s in order[at + 1 : at + 2] if s in usable and model.whole([s])]
    group = [call, result, *after] if order.index(call) + 1 == at else [call, result]
    return _summarised(gen, p, group, [], "summarize") is not None


def _kept_prompt(gen: Steps, p: Planner) -> bool:
    # A sliding window that summarises the oldest turns after the system prompt and
    # the task and keeps those two verbatim.
    model = p.live
    usable = set(gen.usable(p))
    order = [s.span_id for s in model.ordered() if not model.spans[s.span_id].protected]
    for size in (4, 3, 2):
        group = order[:size]
        if len(group) == size and all(s in usable for s in group) and model.whole(group):
            return _summarised(gen, p, group, [], "sliding_window") is not None
    return False


def _kept_keys(gen: Steps, p: Planner) -> bool:
    # A summary of turns holding three or more identifiers that keeps them all.
    return _summarised(gen, p, _key_group(gen, p), [], "summarize") is not None


def _shrinking(gen: Steps, p: Planner) -> bool:
    # Compactions turn after turn, each cutting at least 10% of the live tokens.
    if not _quiet(p):
        return False
    for index in range(THRASH_AFTER):
        if index:
            gen.turn(p, 2)
        model = p.live
        order = [s.span_id for s in model.ordered()]
        usable = set(gen.usable(p))
        total = sum(s.tokens for s in model.spans.values())
        runs = [
            order[start : start + size]
            for size in range(8, 1, -1)
            for start in range(len(order) - size + 1)
            if all(s in usable for s in order[start : start + size])
            and model.whole(order[start : start + size])
            and sum(model.spans[s].tokens for s in order[start : start + size])
            > 2 * THRASH_MIN_REDUCTION * total
        ]
        if not runs:
            return False
        made = _summarised(gen, p, runs[0], [], "summarize", "overflow")
        if not made or made[0].tokens_after > (1 - THRASH_MIN_REDUCTION) * made[0].tokens_before:
            return False
    return True


def _rolling_trim(gen: Steps, p: Planner) -> bool:
    # A rolling summary that trims a few percent each time, but only every few turns
    # (more than thrash_within_turns apart): no loop.
    if not _quiet(p):
        return False
    return _thin_run(gen, p, THRASH_AFTER, THRASH_WITHIN_TURNS + 1, None)


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
        Injection(
            "TOOL_PAIR_SPLIT",
            (_F.TOOL_PAIR_SPLIT,),
            "a summariser takes one half of a tool call/result pair: the result and the "
            "reply after it, or the turns before the call and the call",
            _each(_pair_split),
        ),
        Injection(
            "PROTECTED_SPAN_REWRITTEN",
            (_F.PROTECTED_SPAN_REWRITTEN,),
            "a compaction rewrites the protected system prompt, or folds it and the "
            "user's first message into a summary",
            _each(_protected_rewritten),
        ),
        Injection(
            "SUMMARY_LOST_KEYS",
            (_F.SUMMARY_LOST_KEYS,),
            "a summary of turns holding three or more identifiers keeps none of them",
            _each(_lost_keys),
        ),
        Injection(
            "COMPACTION_THRASHING",
            (_F.COMPACTION_THRASHING,),
            "three compactions turn after turn that hardly shrink the context",
            _each(_thrashing),
        ),
        Injection("MALFORMED", (), "one bad record (a dead letter)", _malformed),
    )
}
"""Every injection by name, in the fault mix's order."""


@dataclass(frozen=True, slots=True)
class Lookalike:
    """A healthy step that resembles an injection and must raise no fault."""

    name: str
    resembles: FaultKind
    what: str
    build: Callable[[Steps], Plan]


LOOKALIKES: dict[str, Lookalike] = {
    i.name: i
    for i in (
        Lookalike(
            "ABSORBED_PAIR",
            _F.TOOL_PAIR_SPLIT,
            "a rolling summary absorbs a tool call, its result and the reply",
            _each(_absorbed_pair),
        ),
        Lookalike(
            "KEPT_PROMPT",
            _F.PROTECTED_SPAN_REWRITTEN,
            "a sliding window summarises the oldest turns and keeps the system prompt and "
            "the task verbatim",
            _each(_kept_prompt),
        ),
        Lookalike(
            "KEPT_KEYS",
            _F.SUMMARY_LOST_KEYS,
            "a summary of turns holding three or more identifiers keeps them all",
            _each(_kept_keys),
        ),
        Lookalike(
            "SHRINKING",
            _F.COMPACTION_THRASHING,
            "three compactions turn after turn, each cutting at least 10% of the context",
            _each(_shrinking),
        ),
        Lookalike(
            "ROLLING_TRIM",
            _F.COMPACTION_THRASHING,
            "three rolling summaries that trim a few percent, each three turns after the last",
            _each(_rolling_trim),
        ),
    )
}
"""The healthy look-alikes of contract 1.2's faults, placed in healthy sessions."""

INJECTIONS: tuple[str, ...] = tuple(REGISTRY)
"""Names of the fault mix."""
