"""The C heap's free memory given back to the system, so RSS follows what is live.

Python's objects over 512 bytes, SQLite's pages and the scraped page bodies come from the
C allocator. glibc keeps what is freed for reuse rather than returning it: in the main
heap below its highest block still in use, and in an arena per thread that allocated,
each kept at its high-water mark. A scrape or evaluation round frees nearly all it
allocated, but what lives on is scattered between the holes, so the free memory held
grows with the rounds while the live heap does not: at 1,000 targets, 22 → 120 MB of free
memory held in four minutes, the heap in use flat at 113 MB (``mallinfo2``, see
BENCHMARKS.md, "Churn").

:func:`limit_arenas` (once, before the worker threads start): two arenas instead of eight
per core — Python's threads take turns under the GIL, so more buy little, and each holds
its own free memory. :func:`trim` (``malloc_trim(0)``): the free pages of every arena back
to the system; 3 ms a call in the service at 1,000 targets (at most 23 ms; 60 ms for
400 MB of fragmented heap), so the service runs it in a worker thread every few seconds
(:mod:`app.service`).

Where the C library is not glibc (musl, macOS) both do nothing and return False.
"""

from __future__ import annotations

import ctypes
import functools

__all__ = ["limit_arenas", "trim"]

M_ARENA_MAX = -8  # glibc's <malloc.h>
ARENAS = 2


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it has glibc's ``mallopt`` and ``malloc_trim``."""
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded: the process's own libc
    except OSError:
        return None
    if not (hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt")):
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Let threads share at most ``arenas`` heaps (arenas made already stay); whether
    the C library took the setting."""
    libc = _glibc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1


def trim() -> bool:
    """Give every arena's free pages back to the system; whether any memory was
    released (False too where there is no glibc)."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) == 1
