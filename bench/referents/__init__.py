"""Referents on real dialogues: does the gate keep the turn a later turn repeats?

``python -m bench.referents PATH`` (PATH: the SGD dev split, or one of its
files) turns every Schema-Guided Dialogue into a spanguard session (one
``span.added`` per turn, a BM25 scoring pass and an ``eviction.requested`` every
6 turns, with ``threshold 0.15`` and with ``keep_top_k 4``), runs the engine in
process and reports, per value class of SGD's slot annotations, the recall of
first introductions that a retained turn repeats, the precision of pins,
volume, pins per request and faults; then the same on generated agent runs
with tool results (identifiers, phones, JSON values), which SGD lacks.

Modules: :mod:`~bench.referents.model` (turns with annotated values),
:mod:`~bench.referents.sgd` (SGD files and value classes),
:mod:`~bench.referents.agent_traces` (generated agent runs),
:mod:`~bench.referents.bm25` (the scorer), :mod:`~bench.referents.drive`
(trace building while the engine runs), :mod:`~bench.referents.measure`
(recall and precision), :mod:`~bench.referents.runner`,
:mod:`~bench.referents.report` and ``__main__`` (the command).
"""
