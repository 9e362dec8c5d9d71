"""What a discovery config last did: shown in ``/api/v1/health/components``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.sources.discovery.groups import Found

__all__ = ["SdHealth"]


@dataclass
class SdHealth:
    """One discovery config's last look: ``ok`` is whether it succeeded (a failed look
    keeps the last good list); ``skipped`` entries were left out of a good one."""

    kind: str
    source: str  # the file patterns, or the URL with its secrets masked
    ok: bool = True
    loaded: bool = False  # a look has succeeded once: the list is the real one
    targets: int = 0
    skipped: int = 0
    skipped_why: list[str] = field(default_factory=list)
    last_refresh: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    failures: int = 0

    def succeeded(self, now: float, found: Found) -> None:
        self.ok, self.loaded, self.last_refresh = True, True, now
        self.targets, self.skipped, self.skipped_why = (
            len(found.targets),
            found.skipped,
            list(found.why),
        )

    def failed(self, now: float, error: str) -> None:
        self.ok, self.last_error, self.last_error_at = False, error[:500], now
        self.failures += 1

    def public(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "ok": self.ok,
            "targets": self.targets,
            "skipped": self.skipped,
            "skipped_why": list(self.skipped_why),
            "last_refresh": self.last_refresh,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "failures": self.failures,
        }
