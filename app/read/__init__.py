"""The read side for the API, the UI and the CLI: windows, fleets, the pages, the review.

``windows`` (stored intervals → windows → JSON; ``WindowCache``), ``fleet`` (fleet
windows over a range), ``review`` (``phasewatch review``'s report and charts). The
pages' data, which the UI only renders: ``source`` (the store, a recording or a
Prometheus range as windows), ``target`` (``UiData``: windows judged as the evaluation
round judges them, ``app.evaluate.stream``, into ``points``), ``compare`` (a run's
baseline), ``fleetpage`` and ``fleetpoints`` (fleets, imbalance, SLO status),
``alertfeed``, ``pageeffects``, ``pages`` (all of it for the live service or a fixed
source, with the cache ``warmer``) and ``records`` (the record types the UI draws).
Imported by nothing below it: the evaluation, alerts and fleets never read through it.
"""
