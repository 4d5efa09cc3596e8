"""Re-exports for bench/e2e.py, its one user left; new code imports keys, outputs, producer."""

from spanguard.streams.kafka_io.keys import session_key
from spanguard.streams.kafka_io.outputs import OutputReader
from spanguard.streams.kafka_io.producer import produce_lines

__all__ = ["OutputReader", "produce_lines", "session_key"]
