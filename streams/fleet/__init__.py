"""Fleet monitoring: windowed aggregates, alert rules, metrics and the session inspector.

Everything in this package is plain Python (no Faust import), so it is unit
tested on engine outputs directly; :mod:`spanguard.streams.app.fleet` wires it into the
worker (the runtime's hook, the aggregator service, a timer) and
:mod:`spanguard.streams.app.web` serves it.

* :mod:`~spanguard.streams.fleet.config`: :class:`FleetSettings`;
* :mod:`~spanguard.streams.fleet.combiner`: the runtime's fleet hook (metrics, timelines, partial
  counts written in each checkpoint's transaction; :mod:`~spanguard.streams.fleet.recent` the
  inspector's ring of recent records);
* :mod:`~spanguard.streams.fleet.aggregator`: sums the partials, evaluates, alerts exactly once;
* :mod:`~spanguard.streams.fleet.times`: event time (RFC 3339 text and seconds);
* :mod:`~spanguard.streams.fleet.aggregates`: tumbling-window counts per tenant
  (:mod:`~spanguard.streams.fleet.topk`: the worst sessions in bounded memory);
* :mod:`~spanguard.streams.fleet.rules`: the alert rules file (YAML) and its three rule kinds
  (:mod:`~spanguard.streams.cli.rules`: ``spanguard check-rules``);
* :mod:`~spanguard.streams.fleet.alerts`: firing / repeat / resolve bookkeeping, ``fleet.alert``
  events;
* :mod:`~spanguard.streams.fleet.evaluator`: window counts + alerts per tenant;
* :mod:`~spanguard.streams.fleet.metrics`: the Prometheus registry;
* :mod:`~spanguard.streams.fleet.session_view`, :mod:`~spanguard.streams.fleet.fleet_view`: the
  JSON of the API;
* :mod:`~spanguard.streams.fleet.auth`: admin and tenant-scoped API tokens;
* :mod:`~spanguard.streams.fleet.membership`: how workers find each other's web servers;
* :mod:`~spanguard.streams.fleet.alertmanager`: alerts to Alertmanager's v2 API;
* :mod:`~spanguard.streams.fleet.otel`: optional OpenTelemetry (OTLP/HTTP) export.
"""
