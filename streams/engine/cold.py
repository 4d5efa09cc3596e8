"""An engine's live sessions, the idle ones held packed (*cold*).

Most live sessions are idle: a session lives ``idle_timeout`` (24 h) past its last
event, and a harness's session is busy for minutes of that. Held as objects (spans,
indexes, sums), a simulated session costs ~15 KB; packed, its whole state and duplicate
window are one compressed bytes object of ~4 KB. :class:`Sessions` holds a session as
objects while it is busy and packs it once it has had no event for ``cold_after`` by
the partition's event-time clock (the clock of idle expiry,
:mod:`~spanguard.streams.engine.expiry`); any read of a cold session unpacks it first
(*thaws* it), so a session reads the same whichever form it is in, and the engine's
outputs and changelog records do not change (a pure memory measure: the test suite
runs the simulated fleet both ways and compares).

The packed form is :mod:`pickle` (the session's own objects, exactly) compressed by
:mod:`zlib`: it never leaves the process (the changelog keeps its own records), so
nothing untrusted is ever unpickled. Packing a simulated session costs ~170 us and
thawing it ~120 us, once per idle period, where its ~61 events cost ~4.6 ms.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Container, Iterator, MutableMapping
from datetime import datetime, timedelta

from spanguard.streams.engine.dedup import DedupWindow
from spanguard.streams.engine.expiry import IdleWatch
from spanguard.streams.engine.markers import SessionKey
from spanguard.streams.engine.state import SessionState

PACK_LEVEL = 1
"""zlib's level for a cold session: the fastest; a higher one packs little more (the
digests in a session are random bytes)."""

COOL_PER_TICK = 8
"""Sessions packed at most per tick of the clock: a restore or a catch-up leaves
thousands idle at once, and packing one costs ~170 us; the rest pack at the next ticks
(in steady state far fewer go idle per event)."""

Cold = tuple[datetime | None, bytes]
"""A cold session: its newest ``ts`` (idle expiry reads it without a thaw) and its
packed state and duplicate window."""


def pack(session: SessionState, window: DedupWindow | None) -> bytes:
    """A session and its duplicate window as one compressed bytes object."""
    return zlib.compress(pickle.dumps((session, window), pickle.HIGHEST_PROTOCOL), PACK_LEVEL)


def unpack(packed: bytes) -> tuple[SessionState, DedupWindow | None]:
    """The session and window :func:`pack` packed (equal, new objects)."""
    session, window = pickle.loads(zlib.decompress(packed))
    return session, window


class Sessions(MutableMapping[SessionKey, SessionState]):
    """The live sessions of an engine by key: a mapping of :class:`SessionState` whose
    idle sessions are held packed (see the module).

    Reading a cold session (``[key]``, :meth:`get`, :meth:`pop`, ``values``,
    ``items``) thaws it, with its duplicate window back in ``windows``; ``in``,
    ``len`` and iterating the keys do not. :meth:`cool` packs the sessions the clock
    left idle for ``cold_after`` (0: never), each with the window ``windows`` holds
    for it.
    """

    __slots__ = ("_cold", "_cooling", "_hot", "_waiting", "freezes", "thaws", "windows")

    def __init__(self, windows: dict[SessionKey, DedupWindow], cold_after: timedelta) -> None:
        self._hot: dict[SessionKey, SessionState] = {}
        self._cold: dict[SessionKey, Cold] = {}
        self._cooling = IdleWatch(cold_after)
        self._waiting: set[SessionKey] = set()
        """Sessions due to cool that still owed changelog records (:meth:`settle`)."""
        self.windows = windows
        """Each hot session's duplicate window (a cold one's is packed with it)."""
        self.freezes = 0
        """Sessions packed so far."""
        self.thaws = 0
        """Sessions unpacked so far."""

    # -- the mapping -----------------------------------------------------

    def get(self, key: SessionKey, default: SessionState | None = None) -> SessionState | None:  # type: ignore[override]
        """The session of ``key`` (thawed if it was cold), or ``default``."""
        session = self._hot.get(key)
        if session is not None:
            return session
        if key in self._cold:
            return self._thaw(key)
        return default

    def __getitem__(self, key: SessionKey) -> SessionState:
        session = self.get(key)
        if session is None:
            raise KeyError(key)
        return session

    def __setitem__(self, key: SessionKey, session: SessionState) -> None:
        self._cold.pop(key, None)
        self._hot[key] = session
        if session.newest_ts is not None:
            self._cooling.watch(key, session.newest_ts)

    def __delitem__(self, key: SessionKey) -> None:
        if self._hot.pop(key, None) is None:
            del self._cold[key]

    def __contains__(self, key: object) -> bool:
        return key in self._hot or key in self._cold

    def __iter__(self) -> Iterator[SessionKey]:
        yield from list(self._hot)
        yield from list(self._cold)

    def __len__(self) -> int:
        return len(self._hot) + len(self._cold)

    # -- hot and cold ----------------------------------------------------

    @property
    def cold(self) -> int:
        """Live sessions held packed."""
        return len(self._cold)

    def newest(self, key: SessionKey) -> datetime | None:
        """A live session's newest ``ts`` (None: not live, or no event yet), without
        thawing it."""
        session = self._hot.get(key)
        if session is not None:
            return session.newest_ts
        cold = self._cold.get(key)
        return None if cold is None else cold[0]

    def watch(self, key: SessionKey, newest: datetime) -> None:
        """A hot session's newest ``ts`` moved to ``newest``: it cools ``cold_after``
        later, unless a newer event comes first."""
        self._cooling.watch(key, newest)

    def cool(
        self,
        clock: datetime | None,
        owing: Container[SessionKey] = (),
        busy: SessionKey | None = None,
    ) -> None:
        """Pack the hot sessions idle for ``cold_after`` (strictly) by ``clock``, at most
        :data:`COOL_PER_TICK`; one still owing changelog records (in ``owing``) waits
        for :meth:`settle`, as the drain would thaw it again (the event-time clock of a
        catch-up runs hours ahead between two drains), and ``busy``, the session of the
        event that moved the clock, is watched again instead of packed and thawed at
        once."""
        packed = 0
        skipped: datetime | None = None
        for key, _ in self._cooling.due(clock, self._hot_newest):
            if key == busy:
                skipped = self._hot_newest(key)
            elif key in owing:
                self._waiting.add(key)
            else:
                self._pack(key)
                packed += 1
                if packed == COOL_PER_TICK:
                    break
        if busy is not None and skipped is not None:
            # after the walk: an entry due already would surface again within it
            self._cooling.watch(busy, skipped)

    def settle(self) -> None:
        """After a drain: the sessions :meth:`cool` left waiting cool at the next ticks
        (those still idle; one with a newer event is watched already)."""
        waiting, self._waiting = self._waiting, set()
        for key in waiting:
            newest = self._hot_newest(key)
            if newest is not None:
                self._cooling.watch(key, newest)

    def _pack(self, key: SessionKey) -> None:
        session = self._hot.pop(key)
        self._cold[key] = (session.newest_ts, pack(session, self.windows.pop(key, None)))
        self.freezes += 1

    def _hot_newest(self, key: SessionKey) -> datetime | None:
        session = self._hot.get(key)
        return None if session is None else session.newest_ts

    def _thaw(self, key: SessionKey) -> SessionState:
        _, packed = self._cold.pop(key)
        session, window = unpack(packed)
        if window is not None:
            self.windows[key] = window
        self[key] = session
        self.thaws += 1
        return session
