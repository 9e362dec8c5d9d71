"""The vLLM simulator: the demo's data source and the diagnosis' ground truth.

Public entry points: ``app.sim.record.record`` (write a recording), ``app.sim.server.
start_server`` (live ``/metrics``), ``app.sim.scenario.load`` / ``from_tree``,
``app.sim.engine.Replica`` and ``app.sim.truth.window_truth``. See docs/simulator.md.
Never imported by the core; imports nothing from it.
"""
