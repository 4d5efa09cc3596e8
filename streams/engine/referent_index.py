"""Who holds which referent, who mentions it, and how mentions resolve.

Resolution follows the contract:

* a key is bound by the earliest live span (by position) that holds it; every
  other holder, and every span with an explicit mention of the key, depends on
  that binding;
* an anaphor of type ``T`` in span ``S`` is bound by the latest live span
  strictly before ``S`` that holds an entity of type ``T``.

Both directions are answered from sorted lists by bisection, in O(log n) plus
the size of the answer, so a pinned-set computation touches only the candidates
and their referent edges, never the whole session. Plain lists rather than
sorted-list objects: a new span comes last (an insert is an append), and the
tail move of a removal from the middle is one C ``memmove``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any, Protocol, TypeVar

from spanguard.streams.engine.keys import StoredKey


class IndexedSpan(Protocol):
    """What the index reads of a live span (``state.SpanState``): the index's lists hold
    the spans themselves, in context order (:data:`order_of`)."""

    @property
    def span_id(self) -> str: ...
    @property
    def position(self) -> int: ...
    @property
    def arrival(self) -> int: ...
    @property
    def holds(self) -> Holds: ...
    @property
    def mentions(self) -> tuple[Mention, ...]: ...


OrderKey = tuple[int, int]
"""``(position, arrival number)``: a live span's place in the context order. Arrival
numbers are unique in a session, so no two live spans share one."""

order_of: Callable[[IndexedSpan], OrderKey] = attrgetter("position", "arrival")
"""The :data:`OrderKey` of a live span. Every index that orders spans holds the spans
and sorts and bisects them by this key, read live (C-level: no Python call a probe):
a rewrite that keeps the spans' relative order moves a span by writing its position,
and every sorted index stays sorted as it is (nothing is re-keyed or re-sorted).
A span keeps no key object of its own (a list of three was 80 B a span)."""


def comes_before(first: IndexedSpan, second: IndexedSpan) -> bool:
    """``order_of(first) < order_of(second)``, without building either key (asked for
    every span entered: a new span mostly comes last)."""
    position = first.position
    return position < second.position or (
        position == second.position and first.arrival < second.arrival
    )


Hold = tuple[StoredKey, str]
"""``(key, type)``: an entity a span holds, its key as the engine stores it. Read out of
:data:`Holds` (:func:`hold_pairs`) or collected before a span keeps them
(:func:`flat_holds`); no span keeps one."""

Holds = tuple[Any, ...]
"""What a span holds, as one flat tuple ``(key1, type1, key2, type2, ...)``: each
:data:`~spanguard.streams.engine.keys.StoredKey` at an even place, its type (a ``str``)
right after it, no pair repeated; a span holds ``len(holds) // 2`` entities (a key held
under two types counts twice). Flat rather than a tuple of :data:`Hold` pairs: a pair
tuple costs 56 B a held key a span (~70 B of a span in ``bench.memory``'s per-span row).

Read its pairs with :func:`hold_pairs`, its keys as ``holds[::2]`` and its types as
``holds[1::2]``. A hot reader walks it in place instead, ``key, type_ = holds[at],
holds[at + 1]`` with ``at`` stepping by 2: under Python 3.11 that costs a few hundred
instructions a span less than ``zip`` or slices (the gate and the referent index do).
``Any`` items: Python's types cannot say "alternating", and :func:`hold_pairs` gives
them back typed."""


def hold_pairs(holds: Holds) -> Iterable[Hold]:
    """The ``(key, type)`` pairs of ``holds``, in order. One hold is its own pair (most
    spans hold one key: nothing to build); more are paired as they are read, both
    arguments of ``zip`` drawing from one iterator in turn (no slice copied)."""
    if len(holds) == 2:
        return (holds,)
    items = iter(holds)
    # No ``strict=``: the length is even by construction, and a keyword makes zip's
    # call several times dearer.
    return zip(items, items)  # noqa: B905


def flat_holds(pairs: Collection[Hold]) -> Holds:
    """The :data:`Holds` of ``pairs`` (distinct, in the order a span keeps them)."""
    if len(pairs) <= 4:
        # Most spans hold a pair or two: concatenating them is cheaper than a chain
        # iterator, and one pair is its own flat form (``() + pair`` is ``pair``).
        return sum(pairs, ())
    return tuple(chain.from_iterable(pairs))  # linear where concatenating is quadratic


KeyHolders = IndexedSpan | list[IndexedSpan]
"""A key's live holders in ``ReferentIndex.key_holders``: its one holder itself, or a
list of two or more in context order. Most keys have one holder, and a one-item list
costs 64 B a key; a list is a holder list, anything else a span. Read it through
:func:`holders_of` and :func:`first_holder`."""


def holders_of(entry: KeyHolders) -> Sequence[IndexedSpan]:
    """The holders a :data:`KeyHolders` entry stands for, in context order."""
    return entry if isinstance(entry, list) else (entry,)


def first_holder(entry: KeyHolders) -> IndexedSpan:
    """The earliest holder of a :data:`KeyHolders` entry (the key's binder)."""
    return entry[0] if isinstance(entry, list) else entry


@dataclass(frozen=True, slots=True)
class Mention:
    """A reference made by a span: a keyed-hash ``key`` (stored form,
    :data:`~spanguard.streams.engine.keys.StoredKey`) or, for an anaphor, a ``type``.

    ``surface`` is kept only when the deployment allows span text in state.
    """

    key: StoredKey | None = None
    type: str | None = None
    surface: str | None = None

    @property
    def is_anaphor(self) -> bool:
        """True for a type-only mention ("that account")."""
        return self.key is None


class ReferentIndex:
    """Sorted holder and mention indexes of one session's live spans."""

    __slots__ = ("anaphors", "key_holders", "key_mentioners", "type_holders")

    def __init__(self) -> None:
        self.key_holders: dict[StoredKey, KeyHolders] = {}
        """Per key, its live holders in order (:data:`KeyHolders`: the one holder, or a
        plain sorted list: most keys have one or two holders, and a sorted-list object
        per key would cost more than it saves)."""
        self.key_mentioners: dict[StoredKey, set[str]] = {}
        self.type_holders: dict[str, list[IndexedSpan]] = {}
        self.anaphors: dict[str, list[IndexedSpan]] = {}
        """Per type, its holders / the spans with an anaphor of it, in order: plain sorted
        lists too (new spans come last, so an insert is an append)."""

    @classmethod
    def build(cls, spans: Iterable[IndexedSpan]) -> ReferentIndex:
        """The index of ``spans``, built in bulk (the same contents as :meth:`add`
        for each span, one sort per index instead of one insert per entry)."""
        index = cls()
        key_holders: dict[StoredKey, list[IndexedSpan]] = {}
        type_holders: dict[str, list[IndexedSpan]] = {}
        anaphors: dict[str, list[IndexedSpan]] = {}
        mentioners = index.key_mentioners
        for span in spans:
            holds = span.holds
            if holds:
                keys, types = _unique_holds(holds)
                for key in keys:
                    key_holders.setdefault(key, []).append(span)
                for type_ in types:
                    type_holders.setdefault(type_, []).append(span)
            mentions = span.mentions
            if mentions:
                span_id = span.span_id
                anaphor_types: set[str] = set()
                for mention in mentions:
                    if mention.key is not None:
                        mentioners.setdefault(mention.key, set()).add(span_id)
                    elif mention.type is not None and mention.type not in anaphor_types:
                        anaphor_types.add(mention.type)
                        anaphors.setdefault(mention.type, []).append(span)
        index.key_holders = {
            key: holders[0] if len(holders) == 1 else sorted(holders, key=order_of)
            for key, holders in key_holders.items()
        }
        for entries in (*type_holders.values(), *anaphors.values()):
            entries.sort(key=order_of)
        index.type_holders = type_holders
        index.anaphors = anaphors
        return index

    def add(self, span: IndexedSpan) -> None:
        """Enter a live span's holdings and mentions."""
        keys, types = _unique_holds(span.holds)
        key_holders = self.key_holders
        for key in keys:
            holders = key_holders.get(key)
            if holders is None:
                key_holders[key] = span
            elif isinstance(holders, list):
                insort(holders, span, key=order_of)
            else:
                key_holders[key] = (
                    [holders, span] if comes_before(holders, span) else [span, holders]
                )
        for type_ in types:
            _insert(self.type_holders, type_, span)
        anaphor_types: set[str] = set()
        for mention in span.mentions:
            if mention.key is not None:
                self.key_mentioners.setdefault(mention.key, set()).add(span.span_id)
            elif mention.type is not None and mention.type not in anaphor_types:
                anaphor_types.add(mention.type)
                _insert(self.anaphors, mention.type, span)

    def remove(self, span: IndexedSpan) -> None:
        """Take a span's holdings and mentions out (the exact inverse of :meth:`add`),
        under the place it was entered at: its position is not changed in between."""
        mentions = span.mentions
        for type_ in self._remove_keys(span):
            _discard(self.type_holders, type_, span)
        for mention in mentions:
            if mention.key is None and mention.type is not None:
                _discard(self.anaphors, mention.type, span)

    def _remove_keys(self, span: IndexedSpan) -> Iterable[str]:
        """Take a span out of the per-key indexes; returns the types it holds (each once)."""
        keys, types = _unique_holds(span.holds)
        key_holders = self.key_holders
        for key in keys:
            holders = key_holders.get(key)
            if holders is None:
                continue
            if not isinstance(holders, list):
                if holders is span:
                    del key_holders[key]
                continue
            where = bisect_left(holders, order_of(span), key=order_of)
            if where < len(holders) and holders[where] is span:
                del holders[where]
                if len(holders) == 1:
                    key_holders[key] = holders[0]
        span_id = span.span_id
        for mention in span.mentions:
            if mention.key is not None:
                users = self.key_mentioners.get(mention.key)
                if users is not None:
                    users.discard(span_id)
                    if not users:
                        del self.key_mentioners[mention.key]
        return types

    def remove_many(self, leaving: set[str], spans: Iterable[IndexedSpan]) -> None:
        """:meth:`remove` for each of ``spans``, the live spans of ``leaving`` (their
        ids), with the same result: each list they are in is filtered once, instead of
        losing one entry per span (only the lists of what they hold or mention: the
        others hold none of them)."""
        keys: set[StoredKey] = set()
        types: set[str] = set()
        mentioned: set[StoredKey] = set()
        anaphor_types: set[str] = set()
        for span in spans:
            holds = span.holds
            at = 0
            while at < len(holds):  # its pairs in place (see ``Holds``)
                keys.add(holds[at])
                types.add(holds[at + 1])
                at += 2
            for mention in span.mentions:
                if mention.key is not None:
                    mentioned.add(mention.key)
                elif mention.type is not None:
                    anaphor_types.add(mention.type)
        key_holders = self.key_holders
        for key in keys:
            holders = key_holders[key]
            if not isinstance(holders, list):
                del key_holders[key]  # its one holder leaves
                continue
            kept = [holder for holder in holders if holder.span_id not in leaving]
            if len(kept) > 1:
                holders[:] = kept
            elif kept:
                key_holders[key] = kept[0]
            else:
                del key_holders[key]
        _leave(self.type_holders, leaving, types)
        _leave(self.anaphors, leaving, anaphor_types)
        key_mentioners = self.key_mentioners
        for key in mentioned:
            users = key_mentioners[key]
            users -= leaving
            if not users:
                del key_mentioners[key]

    def resolve(self, span: IndexedSpan, mention: Mention) -> str | None:
        """The span id that binds ``mention`` made by ``span``, if any."""
        if mention.key is not None:
            holders = self.key_holders.get(mention.key)
            return None if holders is None else first_holder(holders).span_id
        if mention.type is None:
            return None
        typed = self.type_holders.get(mention.type)
        if not typed:
            return None
        before = bisect_left(typed, order_of(span), key=order_of)
        return typed[before - 1].span_id if before else None

    def dependent_ids(self, span: IndexedSpan) -> set[str]:
        """The ids of the live spans with a mention that ``span`` binds: the other
        holders and the mentioners of each key it holds first, the anaphors of each
        type it holds up to that type's next holder. Ids only, in no order: a rewrite
        asks for every binder that leaves or is re-held, and needs neither the
        mentions nor their order."""
        found: set[str] = set()
        key_holders = self.key_holders
        key_mentioners = self.key_mentioners
        types: set[str] = set()
        holds = span.holds
        at = 0
        while at < len(holds):  # its pairs in place (see ``Holds``)
            key = holds[at]
            types.add(holds[at + 1])
            at += 2
            entry = key_holders.get(key)
            if entry is None:
                continue
            # ``holders_of`` inlined: this runs for every holding of every binder.
            if isinstance(entry, list):
                if entry[0] is not span:
                    continue
                found.update([other.span_id for other in entry[1:]])
            elif entry is not span:
                continue
            users = key_mentioners.get(key)
            if users:
                found.update(users)
        found.discard(span.span_id)
        for type_ in types:
            found.update([user.span_id for user in self.anaphors_bound_by(span, type_)])
        return found

    def anaphors_bound_by(self, span: IndexedSpan, type_: str) -> list[IndexedSpan]:
        """The anaphors of ``type_`` that ``span``, a holder of the type, binds, in
        order."""
        users = self.anaphors.get(type_)
        if not users:
            return []
        holders = self.type_holders[type_]
        place = order_of(span)
        after = bisect_right(holders, place, key=order_of)
        # Anaphors after ``span`` up to and including the next holder of the type.
        first = bisect_right(users, place, key=order_of)
        if after < len(holders):
            last = bisect_right(users, order_of(holders[after]), key=order_of)
        else:
            last = len(users)
        return users[first:last]


def _unique_holds(holds: Holds) -> tuple[Iterable[StoredKey], Iterable[str]]:
    """The distinct keys (in order) and the distinct types of ``holds``."""
    if len(holds) == 2:  # most spans hold one key: no slice, no dict, no set
        key, type_ = holds
        return (key,), (type_,)
    # A span that holds a key under two types holds the key once; a span holding two
    # accounts holds the type "account" once.
    return dict.fromkeys(holds[::2]), set(holds[1::2])


Name = TypeVar("Name", bound=StoredKey)
"""A key or a type: what an index lists holders under."""


def _insert(index: dict[Name, list[IndexedSpan]], name: Name, span: IndexedSpan) -> None:
    entries = index.get(name)
    if entries is None:
        index[name] = [span]
    elif comes_before(entries[-1], span):
        entries.append(span)  # the common case: a new span comes last
    else:
        insort(entries, span, key=order_of)


def _leave(index: dict[Name, list[IndexedSpan]], leaving: set[str], names: Iterable[Name]) -> None:
    """Take the spans of ``leaving`` out of the lists of ``names`` (each holds one)."""
    for name in names:
        entries = index[name]
        kept = [span for span in entries if span.span_id not in leaving]
        if kept:
            entries[:] = kept
        else:
            del index[name]


def _discard(index: dict[Name, list[IndexedSpan]], name: Name, span: IndexedSpan) -> None:
    entries = index.get(name)
    if entries is None:
        return
    where = bisect_left(entries, order_of(span), key=order_of)
    if where < len(entries) and entries[where] is span:
        del entries[where]
    if not entries:
        del index[name]
