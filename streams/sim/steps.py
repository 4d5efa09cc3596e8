"""The steps a simulated harness takes, each built as a plan of operations.

:class:`Steps` holds one session's draws (its ``random.Random``, its domain,
its committed state) and builds plans on a :class:`~spanguard.streams.sim.plan.Planner`:
a turn of the agent loop with its scoring pass, a compaction (summaries with
``derived_from``, paraphrases; declared, invalidated and re-scored so that the
mean relevance stays flat), an eviction request, and the building blocks the
injections (:mod:`spanguard.streams.sim.injections`) bend into faults. Whether a plan is
kept is decided by the planner's reference model, not here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Container, Sequence
from typing import Any

from spanguard.schemas import FaultKind, RejectReason, text_sha256
from spanguard.streams.engine.trace import SCORER
from spanguard.streams.reference.model import DRIFT_TOLERANCE
from spanguard.streams.reference.rewrite import (
    THRASH_AFTER,
    THRASH_MIN_REDUCTION,
    THRASH_WITHIN_TURNS,
)
from spanguard.streams.reference.state import POISONED_AT
from spanguard.streams.sim.plan import (
    AddOp,
    BadOp,
    EvictOp,
    GapOp,
    NextTurn,
    Planner,
    RewriteOp,
    ScoreOp,
    SimState,
    SnapEntry,
    SpanContent,
    anaphors_of,
    score_of,
)
from spanguard.streams.sim.texts import Beat, Domain, Entity, Text, compose, tool_call
from spanguard.streams.sim.vocab import (
    LOSSY_FORMS,
    LOST_KEYS_FORMS,
    POISON_FORMS,
    SUMMARY_EMPTY,
    SUMMARY_FORMS,
    SYSTEM_PROMPTS,
)

SCORE_MIN, SCORE_MAX = 0.02, 0.98
"""Scores the simulated scorer gives stay inside these bounds."""
LIVE_BUDGET = 40
"""Live spans over which the harness asks to evict the oldest (its context budget)."""
SECOND_SCORER = "rerank-v2"
"""A second scorer that re-scores a few spans now and then."""


class Steps:
    """Plans of one session's harness steps (healthy unless told otherwise)."""

    def __init__(self, rng: random.Random, domain: Domain, state: SimState) -> None:
        self.rng = rng
        self.domain = domain
        self.state = state
        self.straggler = False
        """Set by a ``MALFORMED`` injection: one more event after the close."""

    def _choose(self, st: SimState, beats: Sequence[Beat]) -> tuple[Beat, tuple[Entity, ...]]:
        keys = {k for s in st.live.spans.values() for k in s.referents.keys}
        return st.conversation.choose(beats, keys)

    def new_id(self, st: SimState, prefix: str) -> str:
        """The next span id with ``prefix`` (``u3``, ``sum2``)."""
        st.ids[prefix] += 1
        return f"{prefix}{st.ids[prefix]}"

    def add(
        self,
        p: Planner,
        beat: Beat,
        slots: tuple[Entity, ...],
        intend: Sequence[FaultKind] = (),
        *,
        calls: tuple[str, ...] = (),
        answers: str | None = None,
        protected: bool = False,
    ) -> str:
        """A ``span.added`` of ``beat`` naming ``slots``; returns its span id. Contract
        1.2: ``calls`` / ``answers`` make it half of a tool pair, ``protected`` keeps it."""
        st = p.state
        prefix = {"user": "u", "tool": "t", "assistant": "a", "call": "c", "system": "sys"}
        span_id = self.new_id(st, prefix[beat.role])
        known = frozenset(st.live.known_types())
        slots = slots[: len(beat.slots)]
        text = compose(beat.forms[0], slots, known, book=st.live.names())
        st.content[span_id] = SpanContent(beat.role, beat.forms, slots, 0, text.text)
        role = "assistant" if beat.role == "call" else beat.role
        op = AddOp(
            span_id,
            text,
            role,
            st.live.next_position(),
            known,
            calls=calls,
            answers=answers,
            protected=protected,
        )
        p.run(op, intend)
        return span_id

    def natural(self, content: SpanContent) -> float:
        """A first score for a new span: user turns high, small talk low."""
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

    def scoring(
        self,
        p: Planner,
        values: dict[str, float],
        modes: dict[str, str] | None = None,
        scorer: str = SCORER,
    ) -> ScoreOp:
        """A scoring pass of ``values`` (made distinct, so rankings have no ties);
        ``modes`` says how a span's hash is sent (see :class:`ScoreOp`)."""
        rescored = set(values)
        others = [
            value
            for s in p.live.by_arrival()
            if (value := score_of(s)) is not None and s.span_id not in rescored
        ]
        final = self._unique(values, others)
        modes = modes or {}
        return ScoreOp(tuple((sid, v, modes.get(sid)) for sid, v in final.items()), scorer)

    def closing_values(
        self,
        p: Planner,
        fixed: dict[str, float],
        factor: float = 1.0,
        exclude: Container[str] = (),
    ) -> dict[str, float]:
        """Scores for the pass that closes the open drift window: ``fixed`` plus, when
        needed, re-scores of the other bound spans so that the mean lands on
        ``factor`` times the mean before the rewrite (1.0: a healthy, flat cycle)."""
        model = p.live
        mean_before = model.mean_before()
        if mean_before is None:
            return dict(fixed)
        target = mean_before * factor
        poisoned = model.poisoned()
        others = {
            s.span_id: score_of(s)
            for s in model.by_arrival()
            if s.score is not None
            and s.span_id not in fixed
            and s.span_id not in exclude
            and s.span_id not in poisoned
        }
        frozen_values = [
            score_of(s)
            for s in model.by_arrival()
            if s.score is not None and s.span_id in exclude and s.span_id not in fixed
        ]
        live_fixed = {k: v for k, v in fixed.items() if k not in poisoned}
        count = len(others) + len(live_fixed) + len(frozen_values)
        if count == 0:
            return dict(fixed)
        margin = 0.25 * DRIFT_TOLERANCE * abs(target)
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

    def turn(self, p: Planner, turn: int, gap: int = 0, no_hash: bool = False) -> bool:
        """A turn of the loop: a user message, often a tool result, a reply, and the
        scoring pass (every third turn it re-scores the whole context). ``gap``
        loses events first; ``no_hash`` sends one score without its hash, then retries."""
        st = p.state
        p.run(NextTurn())
        if gap:
            p.run(GapOp(gap))
        new: list[str] = []
        if turn == 1:
            # Contract 1.2: the system prompt and the user's task are protected.
            prompt = SYSTEM_PROMPTS[self.domain.name]
            new.append(self.add(p, Beat("system", (prompt,)), (), protected=True))
        beats = self.domain.opening if turn == 1 else self.domain.user
        beat, slots = self._choose(st, beats)
        intend = [FaultKind.SEQUENCE_GAP] if gap else []
        new.append(self.add(p, beat, slots, intend, protected=turn == 1))
        if self.rng.random() < 0.6 or turn == 1:
            # The agent calls a tool, then the tool's result comes back: a pair of spans
            # (contract 1.2: linked by the call id).
            beat, slots = self._choose(st, self.domain.tool)
            call = self.new_id(st, "call_")
            new.append(self.add(p, tool_call(beat), slots[:1], calls=(call,)))
            new.append(self.add(p, beat, slots, answers=call))
        beat, slots = self._choose(st, self.domain.assistant)
        new.append(self.add(p, beat, slots))
        values = {sid: self.natural(st.content[sid]) for sid in new}
        # A harness that scores late: last turn's deferred scores come with this pass
        # (a span evicted meanwhile is scored anyway; the score binds nothing).
        values.update(st.deferred)
        st.deferred = {}
        if not (gap or no_hash) and turn > 1 and self.rng.random() < 0.25:
            reply = new[-1]
            st.deferred[reply] = values.pop(reply)
        if turn % 3 == 0:
            # A refresh against the new turn: old spans lose relevance, except
            # those that repeat a key of the new turn (lexical overlap). Spans
            # only referred to by an anaphor ("that account") decay: seed 001.
            live = st.live
            fresh_keys = {k for sid in new for k in live.spans[sid].referents.keys}
            for span in live.by_arrival():
                bound = score_of(span)
                if bound is None or span.span_id in values or span.counter >= POISONED_AT:
                    continue
                value = bound * self.rng.uniform(0.7, 0.95)
                if span.referents.keys & fresh_keys:
                    value = max(value, self.rng.uniform(0.6, 0.9))
                values[span.span_id] = value
        if no_hash:
            # The harness's scorer dropped the hash of one new score, then retried.
            victim = new[-1]
            p.run(self.scoring(p, values, {victim: ""}), [FaultKind.SCORE_PROVENANCE_GAP])
            p.run(self.scoring(p, {victim: values[victim]}))
        else:
            p.run(self.scoring(p, values))
        if self.rng.random() < 0.2:
            self.second_opinion(p)
        return True

    def second_opinion(self, p: Planner) -> None:
        """Another scorer re-scores a few spans of the current text, close to their
        scores: a harmless re-score, which binds and raises nothing else."""
        usable = self.usable(p)
        if not usable:
            return
        picked = self.rng.sample(usable, k=min(len(usable), self.rng.randint(1, 3)))
        values = {}
        for span_id in picked:
            bound = score_of(p.live.spans[span_id])
            assert bound is not None
            values[span_id] = bound * self.rng.uniform(0.97, 1.03)
        p.run(self.scoring(p, values, scorer=SECOND_SCORER))

    def usable(self, p: Planner) -> list[str]:
        """Live spans that may take part in a rewrite: scored, not stale, not poisoned,
        not protected (contract 1.2: never rewritten)."""
        model = p.live
        return [
            s.span_id
            for s in model.ordered()
            if s.score is not None
            and s.counter == 0
            and s.span_id in p.state.content
            and not s.protected
        ]

    def merge_group(self, p: Planner, size: int | None = None, lowest: bool = False) -> list[str]:
        """A run of adjacent usable spans in the older 60% of the context to summarise
        (the lowest-scored run with ``lowest``); empty when there is none."""
        order = [s.span_id for s in p.live.ordered()]
        usable = set(self.usable(p))
        size = size or self.rng.randint(2, 4)
        runs: list[list[str]] = []
        whole = p.live.whole
        for start in range(max(0, int(len(order) * 0.6))):
            group = order[start : start + size]
            # Contract 1.2: a summary absorbs both halves of a tool pair or neither.
            if len(group) == size and all(s in usable for s in group) and whole(group):
                runs.append(group)
        if not runs:
            return []
        if lowest:
            spans = p.live.spans

            def mean(g: list[str]) -> float:
                return math.fsum(score_of(spans[s]) or 0.0 for s in g) / len(g)

            return min(runs, key=mean)
        return self.rng.choice(runs)

    def _summary(
        self, p: Planner, parents: Sequence[str], known: frozenset[str], book: dict[str, str]
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
        budget = sum(p.live.spans[s].tokens for s in parents)
        level = 0
        text = compose(forms[0], slots, known, book=book)
        # A summary is shorter than what it replaces when it can be.
        while text.tokens >= budget and level + 1 < len(forms):
            level += 1
            text = compose(forms[level], slots, known, book=book)
        span_id = self.new_id(st, "sum")
        return span_id, SpanContent("summary", forms, slots, level, text.text), text

    def rewrite(
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
        strategy: str | None = None,
        trigger: str | None = None,
    ) -> tuple[list[str], dict[str, float]] | None:
        """One compaction; returns (created summary ids, the scores of the spans
        it changed or merged, as they were) or None when it cannot be built.
        ``summary``: ``long`` (ballooned), ``empty``, ``lost`` (keeps no identifier)
        or None. A compaction that would be the ``thrash_after``-th thin one in a
        row waits a few turns unless ``intend`` names ``COMPACTION_THRASHING`` (the
        harness backs off instead of looping)."""
        st, model = p.state, p.live
        known = model.known_types()
        # Every name a rewrite writes was introduced before it: the book at its start.
        book = model.names()
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
            if span.score is not None:
                old_scores[span_id] = span.score.value
                invalidated.append(span.score.score_id)
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
                new_id, content, text = self._summary(p, parents, known, book)
                if summary == "long":
                    text = self._ballooned(p, parents, content, known, book)
                    content.text = text.text
                elif summary == "empty":
                    text = compose("", (), known)
                    content = SpanContent("summary", ("",), (), 0, "")
                elif summary == "lost":
                    plain = self.rng.choice(LOST_KEYS_FORMS)
                    text = compose(plain, (), known)
                    content = SpanContent("summary", (plain,), (), 0, text.text)
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
                # The paraphrasing model may write the identifiers in a new surface
                # form (``inc-4411``): the same keys, so nothing may be lost.
                fold = content.folded or self.rng.random() < 0.4
                text = compose(content.forms[level], content.slots, known, fold, book)
                new_content[sid] = SpanContent(
                    content.role, content.forms, content.slots, level, text.text, fold
                )
                entries.append(SnapEntry(sid, text, known=known))
            else:
                text = Text(content.text, span.referents.holds, anaphors_of(span))
                entries.append(SnapEntry(sid, text))
        if declared is None:
            declared = [*paraphrase, *lossy, *retext]
        if invalidate is True:
            invalid: Sequence[str] = invalidated
        elif invalidate is False:
            invalid = ()
        else:
            invalid = invalidate
        before = sum(span.tokens for span in model.spans.values())
        after = sum(e.text.tokens for e in entries)
        after += sum(model.spans[s].tokens for s in late if s in model.spans)
        if FaultKind.COMPACTION_THRASHING not in intend and self.would_thrash(p, before, after):
            # The harness backs off: it waits until the run of thin compactions is over
            # (more than thrash_within_turns turns) instead of looping.
            last = p.live.session.last_rewrite_turn
            assert last is not None
            for _ in range(THRASH_WITHIN_TURNS + 1 - (st.writer.turn - last)):
                p.run(NextTurn())
        for sid in merged | set(drop):
            st.content.pop(sid, None)
        st.content.update(new_content)
        op = RewriteOp(tuple(entries), tuple(declared), tuple(invalid), base_seq, strategy, trigger)
        p.run(op, intend)
        return created, old_scores

    def would_thrash(self, p: Planner, before: int, after: int) -> bool:
        """Whether a rewrite now from ``before`` to ``after`` live tokens raises
        ``COMPACTION_THRASHING`` (contract 1.2): thin, and the ``thrash_after``-th
        thin rewrite in a row, each close to the one before."""
        if after <= (1 - THRASH_MIN_REDUCTION) * before:
            return False
        session = p.live.session
        last = session.last_rewrite_turn
        close = last is not None and p.state.writer.turn - last <= THRASH_WITHIN_TURNS
        run = session.thrash_run + 1 if close else 1
        return run % THRASH_AFTER == 0

    def rewrite_and_rescore(self, p: Planner, rescored: Sequence[str], **knobs: Any) -> bool:
        """A :meth:`rewrite` (``knobs``), then the pass that closes its drift window,
        giving ``rescored`` spans their scores from before the rewrite."""
        built = self.rewrite(p, **knobs)
        if built is None:
            return False
        _, old = built
        fixed = {s: old[s] for s in rescored if s in old}
        p.run(self.scoring(p, self.closing_values(p, fixed)))
        return True

    def _ballooned(
        self,
        p: Planner,
        parents: Sequence[str],
        content: SpanContent,
        known: frozenset[str],
        book: dict[str, str],
    ) -> Text:
        """A summarizer that restates its sources at length: longer than all of them."""
        budget = sum(p.live.spans[s].tokens for s in parents)
        template = content.forms[0]
        text = compose(template, content.slots, known, book=book)
        while text.tokens <= budget:
            template += " Said once more, at length."
            text = compose(template, content.slots, known, book=book)
        return text

    def compaction(
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
            beat, slots = self._choose(st, self.domain.user)
            base_seq = st.writer.seq - 1
            late.append(self.add(p, beat, slots))
        merges: list[list[str]] = []
        if merge if merge is not None else self.rng.random() < 0.75:
            group = self.merge_group(p)
            if group:
                merges.append(group)
        count = paraphrases if paraphrases is not None else self.rng.randint(0, 2)
        busy = {s for g in merges for s in g}
        options = [
            s
            for s in self.usable(p)
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
        # The harness's compactor names itself and why it ran (contract 1.2).
        knobs.setdefault("strategy", "summarize" if merges else "paraphrase")
        knobs.setdefault("trigger", "threshold")
        built = self.rewrite(
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
            fixed[sid] = self.natural(st.content[sid])
        p.run(self.scoring(p, self.closing_values(p, fixed)))
        return True

    def eviction(self, p: Planner) -> bool:
        """An eviction request: by threshold, keep_top_k, scored candidates or the
        oldest spans on ``basis: recency`` (none while a span is stale)."""
        model = p.live
        if model.stale():
            return False
        ranked = model.ranked()
        roll = self.rng.random()
        order = [s.span_id for s in model.ordered() if s.span_id not in model.poisoned()]
        if len(order) > LIVE_BUDGET:
            # Over its budget the compactor asks for the oldest spans (a long session
            # keeps a bounded context; what a retained span needs is pinned).
            excess = order[: len(order) - LIVE_BUDGET + self.rng.randint(4, 8)]
            op = EvictOp("candidates", candidates=tuple(excess), basis="recency")
        elif roll < 0.35 and len(ranked) >= 4:
            k = self.rng.randint(1, min(4, len(ranked) - 3))
            low, high = score_of(ranked[k - 1]), score_of(ranked[k])
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

    def two_step(self, p: Planner, first: list[str], poison: bool) -> bool:
        """Merge ``first`` into a summary and leave it unscored; then summarise it
        again (counter 2) or, with ``poison``, condense it twice (counters 2, 3)."""
        built = self.rewrite(p, merges=[first])
        if built is None:
            return False
        [sum_a], _ = built
        p.run(self.scoring(p, self.closing_values(p, {}, exclude={sum_a})))
        if poison:
            ror, poisoned = FaultKind.REWRITE_OF_REWRITE, FaultKind.POISONED_SPAN
            for text, intend in zip(POISON_FORMS, (ror, poisoned), strict=True):
                if self.rewrite(p, retext={sum_a: text}, intend=[intend]) is None:
                    return False
                values = self.closing_values(p, {}, exclude={sum_a})
                if intend is poisoned:
                    values[sum_a] = 0.5  # the harness tries; the engine ignores a poisoned span
                p.run(self.scoring(p, values))
            return True
        order = [s.span_id for s in p.live.ordered()]
        usable = set(self.usable(p))
        at = order.index(sum_a)
        near = [order[i] for i in (at - 1, at + 1) if 0 <= i < len(order)]
        near = [s for s in near if s in usable and p.live.whole([s])]
        if not near:
            return False
        partner = self.rng.choice(near)
        built = self.rewrite(p, merges=[[sum_a, partner]], intend=[FaultKind.REWRITE_OF_REWRITE])
        if built is None:
            return False
        [sum_b], old = built
        value = old.get(partner, 0.4) * self.rng.uniform(0.9, 1.1)
        p.run(self.scoring(p, self.closing_values(p, {sum_b: value})))
        return True

    def fillers(self, p: Planner, count: int) -> list[str]:
        """``count`` live, scored spans that hold nothing; when too few are live the
        conversation gets a short exchange of small talk first."""
        st = p.state
        whole = p.live.whole
        found = [s for s in self.usable(p) if st.content[s].filler and whole([s])]
        if len(found) >= count:
            self.rng.shuffle(found)
            return found[:count]
        added: list[str] = []
        roles = ("user", "assistant")
        for i in range(count - len(found)):
            beats = self.domain.user if roles[i % 2] == "user" else self.domain.assistant
            small = [b for b in beats if not b.slots]
            added.append(self.add(p, self.rng.choice(small), ()))
        p.run(self.scoring(p, {sid: self.natural(st.content[sid]) for sid in added}))
        return found + added

    def straggle(self, p: Planner) -> bool:
        """A straggler after ``session.closed`` (rejected as ``SESSION_CLOSED``)."""
        return self.bad(p, RejectReason.SESSION_CLOSED)

    def bad(self, p: Planner, reason: RejectReason) -> bool:
        """One malformed record the engine must reject with ``reason``."""
        st = p.state
        if reason is RejectReason.SPAN_EXISTS:
            live = self.usable(p)
            if not live:
                return False
            span_id = self.rng.choice(live)
            span = p.live.spans[span_id]
            p.run(BadOp(reason, span_id, st.content[span_id].text, span.position))
            return True
        if reason is RejectReason.NON_FINITE_SCORE:
            live = self.usable(p)
            if not live:
                return False
            p.run(BadOp(reason, self.rng.choice(live)))
            return True
        span_id = self.new_id(st, "x")
        text = "late tool output, retried by the harness."
        p.run(BadOp(reason, span_id, text, st.live.next_position()))
        return True
