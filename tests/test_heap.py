"""The C heap's free memory goes back to the system (``app.heap``): RSS follows what is
live, not the high-water mark of the rounds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app import heap
from app.config import load_settings
from app.service import Service

PAGES = Path(__file__).parent / "fixtures" / "vllm-generated"

glibc = pytest.mark.skipif(heap._glibc() is None, reason="needs glibc's malloc")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@glibc
def test_trim_gives_back_the_free_pages_a_fragmented_heap_keeps() -> None:
    # 100k blocks of 1-4 kB (the C heap's, not Python's small-object arenas); every
    # tenth outlives the rest, so the freed ones are holes glibc keeps, not a top to cut.
    blocks = [bytes(1024 + (i * 37) % 3072) for i in range(100_000)]
    kept = blocks[::10]
    del blocks
    held = _rss_mb()
    assert heap.trim()
    assert held - _rss_mb() > 50, "the holes' pages are back with the system"
    assert len(kept) == 10_000


@glibc
def test_arenas_are_limited_where_glibc_allocates() -> None:
    assert heap.limit_arenas()


def test_the_service_trims_the_heap_on_a_schedule(tmp_path: Path) -> None:
    page = sorted(PAGES.glob("*.prom"))[-1]
    settings = load_settings(
        None,
        {
            "targets": [{"name": "t", "url": f"file://{page}"}],
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )

    async def run() -> None:
        service = Service(settings)
        service.start()
        try:
            job = service.scheduler.get_job("heap_trim")
            assert job is not None
            assert job.trigger.interval.total_seconds() == 5.0
            service.heap_job()  # runs anywhere; a no-op without glibc
        finally:
            await service.stop()

    asyncio.run(run())
