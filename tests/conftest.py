"""What every test module shares: Hypothesis without per-example deadlines.

A deadline is a timing claim, and the suite runs in parallel workers on a busy 2-core
machine: the properties are judged on what they compute, not on how fast (speed is
measured in ``bench/``).
"""

from hypothesis import settings

settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
