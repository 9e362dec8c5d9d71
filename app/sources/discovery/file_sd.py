"""``file_sd``: targets from JSON or YAML files of target groups, as Prometheus reads them.

The files are re-read when their folder changes (PyPI ``watchfiles``: inotify on Linux;
a Kubernetes ConfigMap swaps its ``..data`` link, which shows as a change of the
folder) and every ``refresh_interval`` as well, in case a change was missed (a network
file system, a watcher that could not start). A re-read happens at the start of the
next scrape round after the change, so an added target is scraped from that round.

As in Prometheus: ``*.json`` is JSON, ``*.yml`` and ``*.yaml`` are YAML; a pattern
(``*``, ``?``, ``[...]``) in the file name part matches many files; a file that cannot
be read or parsed keeps its last good targets (the error shows in the health view); a
file that no longer exists takes its targets with it.

The folder is trusted less than the operator who names it (anything that can write
there can make a file): the globbing, reading and parsing run in a worker thread, so
the event loop (API, UI, scrape rounds) never waits on the file system; only regular
files are read (a symlink to one is fine, as a ConfigMap's are) — a FIFO, a device
such as ``/dev/zero``, a directory or a socket is refused without being read, and a
FIFO swapped in after the check cannot block its ``open`` (``O_NONBLOCK``); a file is
read to at most ``MAX_FILE_BYTES`` and refused past it; a file of more than
``max_targets`` addresses is refused (its last good targets kept), and so is a read
whose files hold more than ``max_targets`` in all (every file's last good targets kept),
as ``http_sd`` refuses such an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from watchfiles import awatch

from app.config import FileSdConfig, TargetConfig
from app.sources.discovery.groups import Found, GroupsError, decode, targets_of
from app.sources.discovery.health import SdHealth

__all__ = ["MAX_FILE_BYTES", "FileDiscovery"]

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 10_000_000
_SUFFIXES = {".json": False, ".yml": True, ".yaml": True}  # suffix → YAML?
_CHUNK = 1 << 20
# O_NONBLOCK: opening a FIFO does not wait for a writer; no effect on a regular file.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class _Refused(ValueError):
    """A file not read: not a regular file, or over the byte cap."""


def _what(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return f"mode {stat.filemode(mode)}"


def _read_regular(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed), at most ``max_bytes``.

    :class:`_Refused` for anything else — a FIFO, a device, a directory, a socket —
    checked before opening (``stat``: no side effect of opening a device) and again on
    the opened descriptor (``fstat``: the path may have been swapped in between), and
    for a file longer than ``max_bytes``: at most ``max_bytes + 1`` bytes are read, so a
    file that grows while read, or lies in its size, is refused at the cap. ``OSError``
    when it cannot be opened or read.
    """
    if not stat.S_ISREG(mode := os.stat(path).st_mode):
        raise _Refused(f"not a regular file ({_what(mode)})")
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(mode := os.fstat(fd).st_mode):
            raise _Refused(f"not a regular file ({_what(mode)})")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left <= 0:
        raise _Refused(f"over {max_bytes} bytes")
    return b"".join(chunks)


@dataclass
class _Look:
    """One read of a config's files (done in a worker thread)."""

    found: dict[str, Found] = field(default_factory=dict)  # per file read now
    failed: dict[str, str] = field(default_factory=dict)  # per file: why (last good kept)
    missing: list[str] = field(default_factory=list)  # patterns naming no file
    addresses: int = 0  # in the files read now: targets and skipped entries
    over: bool = False  # stopped: more than max_targets addresses in all


def _addresses(found: Found) -> int:
    return len(found.targets) + found.skipped  # each address is one or the other


def _paths(config: FileSdConfig, look: _Look) -> list[str]:
    out: list[str] = []
    for pattern in config.files:
        if glob.has_magic(Path(pattern).name):
            out.extend(sorted(glob.glob(pattern)))
        elif Path(pattern).exists():
            out.append(pattern)
        else:
            look.missing.append(pattern)
    return list(dict.fromkeys(out))


def _read_one(config: FileSdConfig, path: str, max_bytes: int) -> Found:
    suffix = Path(path).suffix.lower()
    if suffix not in _SUFFIXES:
        raise GroupsError("name a .json, .yml or .yaml file")
    text = _read_regular(path, max_bytes).decode("utf-8", errors="replace")
    return targets_of(
        decode(text, path, yaml_ok=_SUFFIXES[suffix]),
        scheme=config.scheme,
        metrics_path=config.metrics_path,
        name_label=config.name_label,
        max_targets=config.max_targets,
    )


def _look(config: FileSdConfig, max_bytes: int) -> _Look:
    """Glob, read and parse every file (blocking: run in a worker thread)."""
    look = _Look()
    for path in _paths(config, look):
        try:
            found = _read_one(config, path, max_bytes)
        except (OSError, GroupsError, _Refused) as exc:
            look.failed[path] = str(exc)
            continue
        look.found[path] = found
        look.addresses += _addresses(found)
        if look.addresses > config.max_targets:
            look.over = True  # refused whole: the other files need not be read
            break
    return look


class FileDiscovery:
    """One ``file_sd`` config: its files' targets, re-read on change and on a timer."""

    def __init__(self, config: FileSdConfig, *, max_bytes: int = MAX_FILE_BYTES) -> None:
        self.config = config
        self.max_bytes = max_bytes
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
            await self.read(now)

    async def read(self, now: float) -> None:
        """Read every file now, in a worker thread; the event loop goes on meanwhile."""
        self._apply(now, await asyncio.to_thread(_look, self.config, self.max_bytes))

    def _apply(self, now: float, look: _Look) -> None:
        errors = [f"{pattern}: no such file" for pattern in look.missing]
        errors += [f"{path}: {why}" for path, why in look.failed.items()]
        found = dict(look.found)
        for path in look.failed:
            if path in self._found:  # keep the file's last good targets
                found[path] = self._found[path]
        cap = self.config.max_targets
        if look.over or sum(_addresses(f) for f in found.values()) > cap:
            errors.append(f"more than {cap} targets in all (the last good list is kept)")
            found = self._found
        self._found = found
        targets = tuple(t for f in found.values() for t in f.targets)
        if targets != self._targets:
            self._targets = targets
        if errors:
            self.health.targets = len(self._targets)
            self.health.failed(now, "; ".join(errors))
            log.warning("file_sd: %s", self.health.last_error)
            return
        why = tuple(w for f in found.values() for w in f.why)[:5]
        self.health.succeeded(now, Found(targets, sum(f.skipped for f in found.values()), why))

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
