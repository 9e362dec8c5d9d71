"""The simulator's one error type: a configuration that cannot run."""

from __future__ import annotations


class SimConfigError(ValueError):
    """A scenario, preset or override that is unknown or physically impossible.

    The CLI prints the message and exits with status 2.
    """
