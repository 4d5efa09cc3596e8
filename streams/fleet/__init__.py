"""Fleet monitoring: windowed aggregates, alert rules, metrics and the session inspector.

Everything in this package is plain Python (no Faust import), so it is unit
tested on engine outputs directly; :mod:`spanguard.streams.app.fleet` wires it into the
worker (the runtime's hook, the aggregator service, a timer) and
:mod:`spanguard.streams.app.web` serves it.

* :mod:`~streams.fleet.config`: :class:`FleetSettings`;
* :mod:`~streams.fleet.combiner`: the runtime's fleet hook (metrics, timelines, partial
  counts written in each checkpoint's transaction; :mod:`~streams.fleet.recent` the
  inspector's ring of recent records);
* :mod:`~streams.fleet.aggregator`: sums the partials, evaluates, alerts exactly once;
* :mod:`~streams.fleet.observations`: the evaluator's per-event input, time helpers;
* :mod:`~streams.fleet.aggregates`: tumbling-window counts per tenant
  (:mod:`~streams.fleet.topk`: the worst sessions in bounded memory);
* :mod:`~streams.fleet.rules`: the alert rules file (YAML) and its three rule kinds
  (:mod:`~streams.cli.rules`: ``spanguard check-rules``);
* :mod:`~streams.fleet.alerts`: firing / repeat / resolve bookkeeping, ``fleet.alert`` events;
* :mod:`~streams.fleet.evaluator`: window counts + alerts per tenant;
* :mod:`~streams.fleet.metrics`: the Prometheus registry;
* :mod:`~streams.fleet.session_view`, :mod:`~streams.fleet.fleet_view`: the JSON of the API;
* :mod:`~streams.fleet.auth`: admin and tenant-scoped API tokens;
* :mod:`~streams.fleet.membership`: how workers find each other's web servers;
* :mod:`~streams.fleet.alertmanager`: alerts to Alertmanager's v2 API;
* :mod:`~streams.fleet.otel`: optional OpenTelemetry (OTLP/HTTP) export.
"""
