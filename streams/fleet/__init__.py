"""Fleet monitoring: windowed aggregates, alert rules, metrics and the session inspector.

Everything in this package is plain Python (no Faust import), so it is unit
tested on engine outputs directly; :mod:`streams.app.fleet` wires it into the
worker (topics, windowed tables, timers) and :mod:`streams.app.web` serves it.

* :mod:`~streams.fleet.config`: :class:`FleetSettings`;
* :mod:`~streams.fleet.observations`: what the fleet counts, one compact record each;
* :mod:`~streams.fleet.aggregates`: tumbling-window counts per tenant
  (:mod:`~streams.fleet.topk`: the worst sessions in bounded memory);
* :mod:`~streams.fleet.rules`: the alert rules file (YAML) and its three rule kinds
  (:mod:`~streams.fleet.rules_cli`: ``spanguard check-rules``);
* :mod:`~streams.fleet.alerts`: firing / repeat / resolve bookkeeping, ``fleet.alert`` events;
* :mod:`~streams.fleet.evaluator`: aggregates + alerts per tenant, driven by observations;
* :mod:`~streams.fleet.observer` with :mod:`~streams.fleet.activity` and
  :mod:`~streams.fleet.recent`: the processor's hooks (metrics, session timelines,
  active sessions, rewrite cycles);
* :mod:`~streams.fleet.metrics`: the Prometheus registry;
* :mod:`~streams.fleet.session_view`, :mod:`~streams.fleet.fleet_view`: the JSON of the API;
* :mod:`~streams.fleet.webhook`: optional Alertmanager webhook delivery.
"""
