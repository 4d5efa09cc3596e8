"""The names ``bench/`` and the tests import from here since before the split by concern
(``tests/sim`` patches ``produce_lines`` here, so ``spanguard simulate --kafka`` calls it
through this module).

New code imports them from where they live: :mod:`~spanguard.streams.kafka_io.bootstrap`,
:mod:`~spanguard.streams.kafka_io.keys`, :mod:`~spanguard.streams.kafka_io.producer`,
:mod:`~spanguard.streams.kafka_io.outputs`.
"""

from spanguard.streams.kafka_io.bootstrap import bootstrap_servers
from spanguard.streams.kafka_io.keys import line_partition, session_key
from spanguard.streams.kafka_io.outputs import OutputReader
from spanguard.streams.kafka_io.producer import murmur2_partitioner, produce_lines

__all__ = [
    "OutputReader",
    "bootstrap_servers",
    "line_partition",
    "murmur2_partitioner",
    "produce_lines",
    "session_key",
]
