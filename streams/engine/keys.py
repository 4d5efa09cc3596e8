"""Keyed hashing of referent keys: identifiers never leave the engine in clear.

A key is emitted as ``hmac-sha256:<hex>`` under a per-tenant key derived from
the deployment secret, so the same account number hashes differently in two
tenants and nothing can be joined across them.
"""

from __future__ import annotations

import hashlib
import hmac

HASH_PREFIX = "hmac-sha256:"


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
        self._keys: dict[tuple[str, str], str] = {}
        self._types: dict[tuple[str, str], str] = {}

    def _tenant_key(self, tenant: str) -> bytes:
        key = self._tenant_keys.get(tenant)
        if key is None:
            key = hmac.new(self._secret, b"tenant:" + tenant.encode("utf-8"), "sha256").digest()
            self._tenant_keys[tenant] = key
        return key

    def _digest(self, tenant: str, value: str) -> str:
        mac = hmac.new(
            self._tenant_key(tenant), value.encode("utf-8", "surrogatepass"), hashlib.sha256
        )
        return HASH_PREFIX + mac.hexdigest()

    def key(self, tenant: str, raw_key: str) -> str:
        """The stored form of a referent key: case-folded, then keyed-hashed.

        A key that already carries the ``hmac-sha256:`` prefix is kept as it is.
        """
        cached = self._keys.get((tenant, raw_key))
        if cached is not None:
            return cached
        if raw_key.startswith(HASH_PREFIX):
            return raw_key
        folded = raw_key.casefold()
        stored = folded if self._clear else self._digest(tenant, folded)
        if len(self._keys) >= CACHE_ENTRIES:
            self._keys.clear()
        self._keys[(tenant, raw_key)] = stored
        return stored

    def word(self, tenant: str, folded: str) -> str:
        """The stored form of a case-folded word or entry of a name book: like
        :meth:`key`, without the key cache (a book asks about every word of every
        text, which would push the session's identifiers out of it)."""
        return folded if self._clear else self._digest(tenant, folded)

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
