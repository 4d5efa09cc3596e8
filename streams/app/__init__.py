"""The worker's host: a Faust application (supervision, signals, web server, timers)
that runs the data path and fleet monitoring's aggregator, both partition owners on
aiokafka (:mod:`spanguard.streams.runtime.owner`); wired in one place,
:mod:`spanguard.streams.app.topology`. Faust itself starts no Kafka client."""
