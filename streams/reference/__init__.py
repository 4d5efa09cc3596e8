"""An independent reference model of the wire contract (``../shared/CONTRACT.md``).

Written from the contract alone, to be the ground truth the engine is measured
against (issue 14): a deliberately simple, slow interpreter that keeps each
session as plain dicts of spans and recomputes everything it needs from
scratch for every event (no indexes, no incremental state).

The only code it shares with :mod:`spanguard.streams.engine` is the one the contract
itself names as shared: the extractor of :mod:`spanguard.streams.engine.referents` is the
reference implementation of the referent rules (see :mod:`.extract`). A test
(``tests/reference/test_independence.py``) checks the imports with ``ast``.

Modules: :mod:`.outcome` (what the contract requires per input event, in a
comparable form), :mod:`.decode` (raw line -> event or rejection reason),
:mod:`.extract` (referents of one span), :mod:`.model` (sessions, rewrites,
scores, drift) and :mod:`.gate` (the eviction gate).
"""
