"""``phasewatch review``: the post-incident report over a past range, from Prometheus.

``report`` (pure: diagnoses → timeline, spikes, findings), ``render`` (Markdown, JSON),
``run`` (read, window, diagnose) and ``cli`` (the sub-command).
"""
