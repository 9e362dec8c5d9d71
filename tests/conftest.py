"""What every test module shares: Hypothesis without per-example deadlines, and the
slowest files started first.

A deadline is a timing claim, and the suite runs in parallel workers on a busy 2-core
machine: the properties are judged on what they compute, not on how fast (speed is
measured in ``bench/``).
"""

import pytest
from hypothesis import settings

settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


# The files whose tests take longest (``make test`` names the 20 slowest), started first:
# with ``--dist loadfile`` a worker takes a whole file, and a long file taken last keeps
# the run waiting on one worker while the others are idle.
SLOW_FIRST = (
    "test_ui_fleet_browser.py",
    "test_twin_vllm_real.py",
    "test_api_headroom.py",
    "test_pd_service.py",
    "test_hint_effects.py",
    "test_twin_headroom.py",
    "test_twin_vllm_pairs.py",
    "test_ui_overview_rounds.py",
    "test_ui_browser.py",
    "test_slo_sim.py",
    "test_incident.py",
    "test_alerts_integration.py",
    "test_faults_restart.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    last = len(SLOW_FIRST)
    items.sort(key=lambda item: rank.get(item.path.name, last))  # stable: order kept within
