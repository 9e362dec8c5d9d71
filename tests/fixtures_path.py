"""Where the vLLM fixture pages live: a copy of the shared fixtures inside the repo."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
