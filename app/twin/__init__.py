"""The what-if twin of one server: its workload and step time fitted from its own windows,
vLLM's scheduling rules (the simulator's engine, reused), and a prediction of what a
change of one setting does to its p50/p99 (``docs/whatif.md``).

* :mod:`app.twin.lengths` — a token-length histogram → a lognormal with its exact mean;
* :mod:`app.twin.fit` — windows → the twin (workload, step-time model, engine settings),
  each number with where it came from, and what the data could not pin down;
* :mod:`app.twin.steptime` — the fitted step-time model and its least-squares fit;
* :mod:`app.twin.stepobs` — a span's step-time equations, the physics priors where they
  are silent, the steps the span showed and the fits with other priors;
* :mod:`app.twin.tune` — the compute side tuned on the replay's prefill time;
* :mod:`app.twin.extrapolate` — a prediction past the steps the span showed, said so and
  with its interval widened;
* :mod:`app.twin.history` — whether a span holds enough history to fit on;
* :mod:`app.twin.engine` — the twin run through the simulator's engine;
* :mod:`app.twin.whatif` — the changes, the replay of the fitted span and the prediction.
"""
