"""Engine benchmarks, measured side by side in one run.

Run from the project root::

    .venv/bin/python -m bench.engine             # full run (about 5 minutes on 2 shared cores)
    .venv/bin/python -m bench.engine --quick     # small smoke run (< 20 s)
    .venv/bin/python -m bench.engine --profile   # full run plus a cProfile of the mixed workload

What it measures (all single-threaded, median of several runs). Every timing is the
CPU time of this process (``time.process_time``): the machine is shared, and wall
time moved by 2-3x between runs with other work running, CPU time far less:

1. **Mixed-workload throughput.** 1,000 interleaved sessions, each a realistic
   agent loop written with :class:`~spanguard.streams.engine.trace.SessionScript`: spans
   with identifiers and anaphors, scoring passes bound to the current text,
   periodic compactions (merges with ``derived_from``, declared modifications,
   invalidated scores), evictions by threshold, ``keep_top_k`` and candidates,
   and the harness answering the engine's recompute requests. Every raw line is
   built first (not timed); then ``Engine.process_raw`` runs over all of them, as the
   worker runs it (change tracking on). Then the same with unique texts (a serial
   number ends each one), where no scan cache helps.
2. **Per-event cost vs session size.** The same steady-state mix of operations
   (``span.added``, a small ``scores.computed``, a threshold eviction selecting
   two spans, an eviction of two candidates) on a 100-span and a 10,000-span
   session; the ratio of the per-event costs should stay near 1. Rewrites are
   O(snapshot) by design and are reported on their own.
3. **The engine's gate vs a seed-style gate.** On a 10,000-span session, the
   engine's :func:`~spanguard.streams.engine.gate.decide` against :func:`naive_gate`, the
   "rescan, re-hash and re-sort every span per request" gate that the code in
   seeds 000/001 implies, on the same data; both must commit and pin exactly
   the same spans (asserted). Each ratio is given warm (the gate alone, repeated),
   for the whole event (decode and duplicate window too) and cold (right after a
   full collection).

Layout, one module per concern: :mod:`~bench.engine.scale` (sizes, targets, the
clock), :mod:`~bench.engine.text` (the agent-text generator),
:mod:`~bench.engine.mixed` (measure 1), :mod:`~bench.engine.sessions` (measure 2
and the scored sessions of a given size), :mod:`~bench.engine.seed_gate`
(measure 3 and the seed-style gate), :mod:`~bench.engine.report` (the machine,
the table, issue 11's targets) and ``__main__`` (the command); decode and memory
come from ``bench/engine_costs.py``. Apart: :mod:`~bench.engine.extraction` (the
extractor against a baseline commit) and :mod:`~bench.engine.instructions` (where an
event's instructions go, per input type and part, under callgrind).

Results go to ``bench/results/engine.json`` (``engine-quick.json`` for
``--quick``) and a table on stdout.
"""
