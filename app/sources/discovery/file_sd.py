"""``file_sd``: targets from JSON or YAML files of target groups, as Prometheus reads them.

The files are re-read when their folder changes (PyPI ``watchfiles``: inotify on Linux;
a Kubernetes ConfigMap swaps its ``..data`` link, which shows as a change of the
folder) and every ``refresh_interval`` as well, in case a change was missed (a network
file system, a watcher that could not start). A re-read happens at the start of the
next scrape round after the change, so an added target is scraped from that round.

As in Prometheus: ``*.json`` is JSON, ``*.yml`` and ``*.yaml`` are YAML; a pattern
(``*``, ``?``, ``[...]``) in the file name part matches many files; a file that cannot
be read or parsed keeps its last good targets (the error shows in the health view); a
file that no longer exists takes its targets with it. Each file is capped at
``MAX_FILE_BYTES``.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import math
from pathlib import Path

from watchfiles import awatch

from app.config import FileSdConfig, TargetConfig
from app.sources.discovery.groups import Found, GroupsError, decode, targets_of
from app.sources.discovery.health import SdHealth

__all__ = ["MAX_FILE_BYTES", "FileDiscovery"]

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 10_000_000
_SUFFIXES = {".json": False, ".yml": True, ".yaml": True}  # suffix → YAML?


class FileDiscovery:
    """One ``file_sd`` config: its files' targets, re-read on change and on a timer."""

    def __init__(self, config: FileSdConfig) -> None:
        self.config = config
        self.health = SdHealth("file_sd", ", ".join(config.files))
        self._found: dict[str, Found] = {}  # per file, its last good read
        self._targets: tuple[TargetConfig, ...] = ()
        self._dirty = True
        self._last_read = -math.inf
        self._stop = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None

    @property
    def loaded(self) -> bool:
        return self.health.loaded

    def current(self) -> tuple[TargetConfig, ...]:
        return self._targets

    async def refresh(self, now: float) -> None:
        """Re-read the files if they changed, or every ``refresh_interval``."""
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch(), name="phasewatch-file-sd")
        if self._dirty or now - self._last_read >= self.config.refresh_interval:
            self._dirty = False
            self._last_read = now
            self.read(now)

    def read(self, now: float) -> None:
        """Read every file now (blocking; small files)."""
        errors: list[str] = []
        found: dict[str, Found] = {}
        for path in self._paths(errors):
            try:
                found[path] = self._read_one(path)
            except (OSError, GroupsError) as exc:
                errors.append(f"{path}: {exc}")
                if path in self._found:  # keep the file's last good targets
                    found[path] = self._found[path]
        self._found = found
        targets = tuple(t for f in found.values() for t in f.targets)
        if targets != self._targets:
            self._targets = targets
        merged = Found(
            targets,
            sum(f.skipped for f in found.values()),
            tuple(w for f in found.values() for w in f.why)[:5],
        )
        if errors:
            self.health.targets = len(targets)
            self.health.failed(now, "; ".join(errors))
            log.warning("file_sd: %s", self.health.last_error)
        else:
            self.health.succeeded(now, merged)

    def _paths(self, errors: list[str]) -> list[str]:
        out: list[str] = []
        for pattern in self.config.files:
            if glob.has_magic(Path(pattern).name):
                out.extend(sorted(glob.glob(pattern)))
            elif Path(pattern).exists():
                out.append(pattern)
            else:
                errors.append(f"{pattern}: no such file")
        return list(dict.fromkeys(out))

    def _read_one(self, path: str) -> Found:
        suffix = Path(path).suffix.lower()
        if suffix not in _SUFFIXES:
            raise GroupsError("name a .json, .yml or .yaml file")
        p = Path(path)
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise GroupsError(f"{size} bytes exceeds the {MAX_FILE_BYTES}-byte cap")
        text = p.read_text(encoding="utf-8", errors="replace")
        cfg = self.config
        return targets_of(
            decode(text, path, yaml_ok=_SUFFIXES[suffix]),
            scheme=cfg.scheme,
            metrics_path=cfg.metrics_path,
            name_label=cfg.name_label,
        )

    async def _watch(self) -> None:
        """Mark the files changed whenever one of their folders changes."""
        folders = sorted({str(Path(p).parent) for p in self.config.files})
        folders = [f for f in folders if Path(f).is_dir()]
        if not folders:
            return
        try:
            async for _ in awatch(
                *folders,
                watch_filter=None,
                debounce=200,
                recursive=False,
                stop_event=self._stop,
            ):
                self._dirty = True
        except Exception as exc:  # inotify limits, a folder removed: the timer still runs
            log.warning(
                "file_sd: cannot watch %s (%s); re-read every %g s",
                ", ".join(folders),
                exc,
                self.config.refresh_interval,
            )

    async def aclose(self) -> None:
        """Stop watching."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
            self._watcher = None
