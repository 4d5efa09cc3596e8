"""The worker's data path: input batches, outputs, changelog and offsets.

Framework-free (no Faust import): :class:`~spanguard.streams.runtime.runtime.Runtime`
drives one :class:`~spanguard.streams.engine.engine.Engine` per assigned input partition
through a :class:`~spanguard.streams.runtime.ports.Transport`. The Kafka transport
(:mod:`spanguard.streams.runtime.kafka_transport`, aiokafka) runs it in the worker; the
in-memory one (:mod:`spanguard.streams.runtime.memory`) runs the same code in tests, with
a crash injectable at any write (:mod:`spanguard.streams.runtime.testing`). The loop
that owns partitions (:mod:`spanguard.streams.runtime.owner`) serves the data path and
fleet monitoring's aggregator alike.
"""
