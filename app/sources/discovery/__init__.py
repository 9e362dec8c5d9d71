"""Targets the way Prometheus finds them: ``file_sd`` and ``http_sd`` beside ``targets``.

``groups`` (target groups → targets, pure), ``file_sd`` (files, re-read on change and on
a timer), ``http_sd`` (a URL, polled; the last good list kept), ``merged`` (the static
targets and every discovery config as one list: the scrape source's
:class:`~app.sources.base.Discovery`), ``health`` (what each config last did).
"""

from app.sources.discovery.merged import MergedTargets, discovery_for, unused

__all__ = ["MergedTargets", "discovery_for", "unused"]
