"""phasewatch: why is this vLLM server slow, and what should change."""

__version__ = "0.1.0"
