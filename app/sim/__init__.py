"""The vLLM simulator: the demo's data source and the diagnosis' ground truth.

Public entry points: ``app.sim.record.record`` (write a recording), ``app.sim.server.
start_server`` (live ``/metrics``), ``app.sim.scenario.load`` / ``from_tree``,
``app.sim.engine.Replica`` and ``app.sim.truth.window_truth``; for a disaggregated
prefill/decode fleet ``app.sim.pd_record.record_pd``, ``app.sim.pd_server.start_pd_server``,
``app.sim.pd_scenario.load_pd`` and ``app.sim.pd.PDFleet``. See docs/simulator.md and
docs/pd-fleets.md.
Never imported by the core; imports nothing from it.
"""
