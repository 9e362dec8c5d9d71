"""The read side for the API, the UI and the CLI: windows, fleets, the review report.

``windows`` (stored intervals → windows → JSON; ``WindowCache``), ``fleet`` (fleet
windows over a range), ``review`` (``phasewatch review``'s report). Imported by nothing
below it: the evaluation, alerts and fleets never read through it.
"""
