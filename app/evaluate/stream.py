"""One stream's window judged as the evaluation round judges it: the service's round,
the replays and the pages (``app.read.target``) all go through here, so a window's
hints are the same wherever they are shown.

:func:`with_page` gives the window its stream's ``cache_config_info`` (the server
settings the page reports, which the hints start from: ``app.diagnose.classify.
server_view``); :func:`judge_window` diagnoses it under the service's configuration
(thresholds, SLOs, the targets' ``server:`` blocks: ``app.evaluate.settings.
diagnosis_config``) and, with ``compare``, adds a problem window's changes against its
run's healthy baseline (``app.evaluate.baseline``: :func:`~app.evaluate.baseline.
compared` is the one comparison step).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from app.diagnose import Diagnosis, DiagnosisConfig, diagnose
from app.model import Window

__all__ = ["judge_window", "with_page"]


def with_page(window: Window, info: Mapping[str, str] | None) -> Window:
    """``window`` with its stream's ``cache_config_info`` labels (none: as it is)."""
    return dataclasses.replace(window, info=dict(info)) if info else window


def judge_window(
    window: Window,
    config: DiagnosisConfig,
    *,
    failed_scrapes: int,
    attempted_scrapes: int | None,
    compare: Callable[[Window, Diagnosis], Diagnosis] | None = None,
) -> Diagnosis:
    """The window's diagnosis (its SLOs: ``config.slo_for``; its server: the page's
    ``window.info``, then ``config.server_for``), compared with its run's baseline where
    ``compare`` is given. ``attempted_scrapes`` None: no scrape record is known."""
    d = diagnose(window, config, failed_scrapes=failed_scrapes, attempted_scrapes=attempted_scrapes)
    return d if compare is None else compare(window, d)
