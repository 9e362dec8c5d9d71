"""``phasewatch review``: the post-incident report over a past range, from Prometheus.

``report`` (pure: diagnoses → timeline, spikes, findings), ``render`` (Markdown, JSON)
and ``run`` (read, window, diagnose, replay the rules); the sub-command is
``app.cli.review``.
"""
