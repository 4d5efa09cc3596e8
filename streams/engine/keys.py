"""Keyed hashing of referent keys: identifiers never leave the engine in clear.

A key is emitted as ``hmac-sha256:<hex>`` under a per-tenant key derived from
the deployment secret, so the same account number hashes differently in two
tenants and nothing can be joined across them. Inside the engine a key is a
:data:`StoredKey`: the HMAC's 32 raw bytes, turned into its text form
(:func:`key_text`) only where it leaves the engine (outputs, the changelog).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

HASH_PREFIX = "hmac-sha256:"
_DIGEST_TEXT = len(HASH_PREFIX) + 64
"""The length of a key's text form: the prefix and 64 lower-case hex digits."""

StoredKey = bytes | str
"""A referent key as the engine holds it. A key whose text form is
``hmac-sha256:<64 lower-case hex>`` (every key the engine hashes itself) is its 32 raw
bytes: a 65 B object where the text costs 125, and the spans that hold a key, the
referent index and the gone spans all keep one. Anything else stays the string it is:
clear keys (``clear_keys``), and keys the harness hashed itself in another form.

All 32 bytes are kept, not a shorter prefix: outputs carry the whole HMAC, and it
can only be rebuilt from what is kept. (A 16-byte prefix would be collision-safe
within a session, ~n^2 / 2^129 for n keys, but an output could no longer name the key
as the contract spells it.) :func:`stored_key` and :func:`key_text` are inverse
bijections, so two stored keys are equal exactly when their text forms are."""


def stored_key(text: str) -> StoredKey:
    """The :data:`StoredKey` of a key's text form (:func:`key_text` gives it back)."""
    if len(text) == _DIGEST_TEXT and text.startswith(HASH_PREFIX):
        try:
            raw = bytes.fromhex(text[len(HASH_PREFIX) :])
        except ValueError:
            return text
        # Upper-case hex, or spaces fromhex skips, would not come back as they were.
        if raw.hex() == text[len(HASH_PREFIX) :]:
            return raw
    return text


def key_text(key: StoredKey) -> str:
    """The text form of a stored key, as outputs and the changelog carry it."""
    return HASH_PREFIX + key.hex() if isinstance(key, bytes) else key


def key_texts(keys: Iterable[StoredKey]) -> list[str]:
    """:func:`key_text` of each of ``keys``, in order."""
    return [HASH_PREFIX + key.hex() if isinstance(key, bytes) else key for key in keys]


Item = TypeVar("Item")


def sort_keyed(
    items: list[Item], key: Callable[[Item], Any] | None, text_key: Callable[[Item], Any]
) -> None:
    """Sort ``items`` in place by ``key`` (None: the items themselves), where that holds
    stored keys; by ``text_key``, the same with each stored key's text form, if bytes
    and str keys meet. Either way they come in the order of the text forms, which
    outputs show: digests sort as their hex does (one length, one prefix), so only a
    mix (a harness that hashed some keys itself in another form) costs the conversion.
    Items that ``key`` ranks equal must be interchangeable (a failed sort leaves them
    in any order)."""
    try:
        items.sort(key=key)
    except TypeError:  # bytes and str do not compare
        items.sort(key=text_key)


CACHE_ENTRIES = 4096
"""Keyed hashes remembered per hasher: identifiers repeat across a session's recent
turns (a small cache: it holds the raw identifiers too, and memory is per span)."""


class KeyHasher:
    """Hashes referent keys (and, if configured, types) per tenant.

    An HMAC costs about 2 us; the stored forms of recent (tenant, key) and
    (tenant, type) pairs are cached (``CACHE_ENTRIES`` of each, emptied when
    full: simple, and the working set of live sessions refills it at once).
    """

    __slots__ = ("_clear", "_hash_types", "_keys", "_secret", "_tenant_keys", "_types")

    def __init__(self, secret: str, *, clear_keys: bool = False, hash_types: bool = False) -> None:
        self._secret = secret.encode("utf-8")
        self._clear = clear_keys
        self._hash_types = hash_types
        self._tenant_keys: dict[str, bytes] = {}
        self._keys: dict[tuple[str, str], StoredKey] = {}
        self._types: dict[tuple[str, str], str] = {}

    def _tenant_key(self, tenant: str) -> bytes:
        key = self._tenant_keys.get(tenant)
        if key is None:
            key = hmac.new(self._secret, b"tenant:" + tenant.encode("utf-8"), "sha256").digest()
            self._tenant_keys[tenant] = key
        return key

    def _mac(self, tenant: str, value: str) -> bytes:
        return hmac.new(
            self._tenant_key(tenant), value.encode("utf-8", "surrogatepass"), hashlib.sha256
        ).digest()

    def _digest(self, tenant: str, value: str) -> str:
        return HASH_PREFIX + self._mac(tenant, value).hex()

    def key(self, tenant: str, raw_key: str) -> StoredKey:
        """The stored form of a referent key: case-folded, then keyed-hashed (the
        digest's bytes, see :data:`StoredKey`).

        A key that already carries the ``hmac-sha256:`` prefix is kept as it is (as
        its bytes when it is in the form the engine writes).
        """
        cached = self._keys.get((tenant, raw_key))
        if cached is not None:
            return cached
        if raw_key.startswith(HASH_PREFIX):
            return stored_key(raw_key)
        stored = self.word(tenant, raw_key.casefold())
        if len(self._keys) >= CACHE_ENTRIES:
            self._keys.clear()
        self._keys[(tenant, raw_key)] = stored
        return stored

    def word(self, tenant: str, folded: str) -> StoredKey:
        """The stored form of a case-folded key, word or entry of a name book: what
        :meth:`key` gives for it, without the key cache (a book asks about every word
        of every text, which would push the session's identifiers out of it). A book
        then holds its entries as digests (65 B where the text form costs 125), and
        the key of a name it finds again is the one the name was held under."""
        return stored_key(folded) if self._clear else self._mac(tenant, folded)

    def clear_caches(self) -> None:
        """Forget the cached stored forms (the tenants' derived keys stay)."""
        self._keys.clear()
        self._types.clear()

    def type(self, tenant: str, raw_type: str) -> str:
        """The stored form of a referent type: lower-cased, hashed only if configured."""
        cached = self._types.get((tenant, raw_type))
        if cached is not None:
            return cached
        if raw_type.startswith(HASH_PREFIX):
            return raw_type
        lowered = raw_type.lower()
        stored = self._digest(tenant, "type:" + lowered) if self._hash_types else lowered
        if len(self._types) >= CACHE_ENTRIES:
            self._types.clear()
        self._types[(tenant, raw_type)] = stored
        return stored
