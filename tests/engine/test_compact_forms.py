"""The compact forms state keeps (issue 22, item 2) give back exactly what they took."""

from __future__ import annotations

import hashlib
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spanguard.schemas import text_sha256
from spanguard.streams.engine.config import EngineSettings
from spanguard.streams.engine.holdings import (
    SHARED_ID_LENGTH,
    HoldingsBuilder,
    forget_shared,
    share_holds,
    share_id,
    share_mentions,
)
from spanguard.streams.engine.names import NameBook
from spanguard.streams.engine.referent_index import Mention, order_of
from spanguard.streams.engine.referents import scan_text
from spanguard.streams.engine.state import (
    BoundScore,
    SessionState,
    SpanExtra,
    SpanState,
    head_digest,
    head_score_id,
    pack_head,
    to_digest,
    to_hex,
)


@given(st.binary(max_size=64))
def test_a_sha256_is_kept_as_its_32_bytes_and_given_back(data: bytes) -> None:
    sha = hashlib.sha256(data).hexdigest()
    digest = to_digest(sha)
    assert digest == hashlib.sha256(data).digest()
    assert to_hex(digest) == sha


@given(st.text(max_size=70))
def test_any_other_string_is_kept_as_given(value: str) -> None:
    digest = to_digest(value)
    assert to_hex(digest) == value
    if isinstance(digest, bytes):
        assert value == digest.hex()


def test_upper_case_hex_is_not_lowered() -> None:
    sha = text_sha256("x").upper()
    assert to_digest(sha) == sha


def test_a_span_reads_its_hash_in_hex() -> None:
    span = SpanState(
        span_id="s1",
        text_digest=to_digest(text_sha256("a")),
        tokens=1,
        position=0,
        arrival=1,
        added_seq=0,
    )
    assert span.text_sha256 == text_sha256("a")
    assert isinstance(span.text_digest, bytes)


OPTIONAL = {
    "derived_from": st.lists(st.sampled_from(["p1", "p2"]), max_size=2).map(tuple),
    "mentions": st.lists(st.builds(Mention, key=st.sampled_from([None, "k"])), max_size=2).map(
        tuple
    ),
    "surfaces": st.lists(st.tuples(st.just("k"), st.text(max_size=3)), max_size=2).map(tuple),
    "calls": st.lists(st.sampled_from(["c1", "c2"]), max_size=2).map(tuple),
    "answers": st.sampled_from([None, "c1"]),
    "protected": st.booleans(),
    "poisoned": st.booleans(),
}


@given(st.fixed_dictionaries({}, optional=OPTIONAL), st.integers(0, 99), st.integers(1, 99))
def test_a_span_gives_back_every_field_and_keeps_an_extra_only_when_it_needs_one(
    fields: dict[str, Any], position: int, arrival: int
) -> None:
    span = SpanState("s1", b"d" * 32, 3, position, arrival, 7, role="user", **fields)
    for name, default in (
        ("derived_from", ()),
        ("mentions", ()),
        ("surfaces", ()),
        ("calls", ()),
        ("answers", None),
        ("protected", False),
        ("poisoned", False),
    ):
        assert getattr(span, name) == fields.get(name, default)
    assert (span.position, span.arrival) == order_of(span)
    has_any = any(
        fields.get(name) for name in ("derived_from", "surfaces", "protected", "poisoned")
    )
    assert (span.extra is not None) == has_any
    # A span without an extra equals one whose extra holds nothing, and only that.
    inline = {k: v for k, v in fields.items() if k in ("mentions", "calls", "answers")}
    bare = SpanState("s1", b"d" * 32, 3, position, arrival, 7, role="user", **inline)
    bare.extra = SpanExtra()
    assert (span == bare) == (not has_any)


def test_a_cached_scan_equals_a_fresh_one_and_shares_its_words() -> None:
    builder = HoldingsBuilder(EngineSettings())
    text = "Ask Maria Lopez about order 51397 and the invoice for the order."
    first = builder._scan(text, text_sha256(text))
    fresh = scan_text(text)
    assert first == fresh
    assert type(first) is type(fresh)
    assert type(first.names) is type(fresh.names)
    again = builder._scan(text + " ", text_sha256(text + " "))
    shared = {id(word) for word in first.names.folded}
    assert all(id(word) in shared for word in again.names.folded if word in first.names.folded)
    assert all(sys.intern(word) is word for word in first.names.folded)
    book = NameBook()
    assert builder.build("t", set(), book, text, text_sha256(text), None, None).holds


def test_equal_holds_are_one_object_and_stay_equal() -> None:
    # Holds are flat, (key, type, key, type, ...); each string built anew, as a decode
    # or a restore makes them, so that ``is`` tells what is shared.
    def fresh(text: str) -> str:
        return "".join(list(text))

    first = share_holds(("hmac-sha256:" + "a" * 64, "order", fresh("k2"), fresh("account")))
    again = share_holds(tuple(fresh(item) for item in first))
    assert again is first
    other = share_holds((fresh("k2"), fresh("account")))
    assert other == ("k2", "account")
    assert other[0] is first[2] and other[1] is first[3]
    assert share_holds(()) == ()


def test_equal_mentions_are_one_tuple_of_shared_mentions_and_stay_equal() -> None:
    first = share_mentions((Mention(type="hotel"), Mention(key=b"k" * 32, type="order")))
    again = share_mentions((Mention(type="hotel"), Mention(key=b"k" * 32, type="order")))
    assert again is first
    other = share_mentions((Mention(type="hotel"),))
    assert other == (Mention(type="hotel"),)
    assert other[0] is first[0]
    assert share_mentions(()) == ()


def test_short_ids_are_one_object_across_sessions_and_long_ones_are_kept_as_given() -> None:
    def fresh(text: str) -> str:
        return "".join(list(text))

    forget_shared()
    first = share_id(fresh("call_1"))
    assert share_id(fresh("call_1")) is first
    long_id = fresh("x" * (SHARED_ID_LENGTH + 1))
    assert share_id(long_id) is long_id
    assert share_id(fresh(long_id)) is not long_id  # a long id is never remembered
    # Two sessions numbering their spans alike keep one string per id.
    spans = [SpanState(fresh("u1"), b"d" * 32, 1, 0, 1, 0) for _ in range(2)]
    assert spans[0].span_id is spans[1].span_id
    forget_shared()
    assert share_id(fresh("call_1")) is not first


DIGESTS = st.one_of(st.binary(min_size=32, max_size=32), st.text(max_size=70))
SCORE_IDS = st.none() | st.text(max_size=20)


@given(DIGESTS, SCORE_IDS, DIGESTS)
def test_a_head_gives_back_its_digest_and_score_id_and_keeps_the_id_under_a_new_text(
    digest: bytes | str, score_id: str | None, retext: bytes | str
) -> None:
    head = pack_head(digest, score_id)
    assert (head_digest(head), head_score_id(head)) == (digest, score_id)
    span = SpanState("s1", digest, 3, 0, 1, 7)
    span.bound = None if score_id is None else BoundScore(score_id, 0.5, None, digest, 9)
    assert (span.text_digest, span.bound_id, span.scored) == (
        digest,
        score_id,
        score_id is not None,
    )
    span.text_digest = retext
    assert (span.text_digest, span.bound_id) == (retext, score_id)


def test_a_raw_digest_is_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        pack_head(b"short", None)


def test_sessions_protecting_the_same_ids_share_one_set_and_change_their_own() -> None:
    first, second = SessionState("t", "a"), SessionState("t", "b")
    for session in (first, second):
        for arrival, span_id in enumerate(["sys", "u1"], 1):
            session.add_span(SpanState(span_id, b"d" * 32, 1, arrival, arrival, 0, protected=True))
    assert first.protected == {"sys", "u1"}
    assert first.protected is second.protected
    first.remove_span("u1", 5)
    assert (first.protected, second.protected) == ({"sys"}, {"sys", "u1"})
    first.remove_span("sys", 6)
    assert not first.protected
    first.reindex()
    second.reindex()
    assert (first.protected, second.protected) == (frozenset(), {"sys", "u1"})
