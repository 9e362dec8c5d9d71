"""The scrape round: bad targets are named and isolated, and nothing stored is lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from app.config import load_settings
from app.sources.live import ScrapeSource
from app.store.sqlite import Store
from tests.pages import ITL_BOUNDS, page

HTTP_ONLY = (
    "# HELP http_requests_total Total\n# TYPE http_requests_total counter\n"
    'http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 12.0\n'
)


class Pages:
    """Per-target page scripts for a MockTransport; each GET takes the next page."""

    def __init__(self, scripts: dict[str, list[str | bytes | int]]) -> None:
        self.scripts = scripts
        self.pos = dict.fromkeys(scripts, 0)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        name = request.url.host
        script = self.scripts[name]
        item = script[min(self.pos[name], len(script) - 1)]
        self.pos[name] += 1
        if isinstance(item, int):
            return httpx.Response(item, text="error")
        return httpx.Response(200, content=item if isinstance(item, bytes) else item.encode())


def make(tmp_path: Path, pages: Pages, *, db: str = "pw.db") -> ScrapeSource:
    settings = load_settings(
        None,
        {
            "targets": [{"name": n, "url": f"http://{n}/metrics"} for n in pages.scripts],
            "storage": {"path": str(tmp_path / db)},
            "scrape": {"max_body_bytes": 1_000_000},
        },
    )
    client = httpx.AsyncClient(transport=httpx.MockTransport(pages))
    return ScrapeSource(settings.scrape, settings.targets, Store(settings.storage.path), client)


def rounds(col: ScrapeSource, times: list[float]) -> None:
    async def go() -> None:
        for t in times:
            await col.read_round(t)
        await col.client.aclose()

    asyncio.run(go())


def test_bad_targets_are_named_and_good_ones_unaffected(tmp_path: Path) -> None:
    pages = Pages(
        {
            "good": [page(1), page(2), page(3)],
            "html": ["<!DOCTYPE html><html><body>Bad Gateway</body></html>"],
            "junk": [bytes(range(256)) * 10],
            "huge": ["# " + "x" * 2_000_000 + "\n"],
            "down": [503],
            "disabled": [HTTP_ONLY],
        }
    )
    col = make(tmp_path, pages)
    rounds(col, [100.0, 105.0, 110.0])
    kinds = {n: s.last_record.error_kind for n, s in col.states.items() if s.last_record}
    assert kinds == {
        "good": None,
        "html": "not_prometheus",
        "junk": "not_prometheus",
        "huge": "too_large",
        "down": "http_status",
        "disabled": "metrics_disabled",
    }
    assert len(col.store.intervals("good", "llama", 0, 200)) == 2


def test_bucket_layout_change_is_reported_and_history_kept(tmp_path: Path) -> None:
    relaid = page(3).replace(f'le="{ITL_BOUNDS[-1]}"', 'le="0.2"')
    col = make(tmp_path, Pages({"a": [page(1), page(2), relaid, page(4)]}))
    rounds(col, [100.0, 105.0, 110.0])
    rec = col.states["a"].last_record
    assert (
        rec is not None and rec.error_kind == "bucket_layout_changed" and "itl" in (rec.error or "")
    )
    stored = col.store.intervals("a", "llama", 0, 200)
    assert [d.end for d in stored] == [105.0, 110.0]
    assert stored[0].reset is False and stored[1].reset is True


def test_counter_reset_marks_interval_and_uses_current_value(tmp_path: Path) -> None:
    col = make(tmp_path, Pages({"a": [page(5), page(6), page(1)]}))
    rounds(col, [100.0, 105.0, 110.0])
    last = col.store.intervals("a", "llama", 0, 200)[-1]
    assert last.reset is True
    assert last.counters["prompt_tokens"] == 1000.0  # the restarted server's whole count


def test_a_page_cut_mid_line_is_used_and_its_cut_counter_keeps_its_baseline(
    tmp_path: Path,
) -> None:
    cut = page(2)[:-20]  # ends inside the generation_tokens line
    col = make(tmp_path, Pages({"a": [page(1), cut, page(3)]}))
    rounds(col, [100.0, 105.0])
    record = col.states["a"].last_record
    assert record is not None and record.ok
    assert (record.error_kind, record.parse_errors) == ("cut_last_line", 1)
    rounds_again = make(tmp_path, Pages({"a": [page(3)]}), db="pw.db")
    rounds(rounds_again, [110.0])
    first, second = rounds_again.store.intervals("a", "llama", 0, 200)
    assert [(d.start, d.end) for d in (first, second)] == [(100.0, 105.0), (105.0, 110.0)]
    assert first.counters["prompt_tokens"] == second.counters["prompt_tokens"] == 1000.0
    # The cut counter has no delta at 105; the next covers both intervals from t=100.
    assert "generation_tokens" not in first.counters
    assert second.counters["generation_tokens"] == 200.0
    assert not first.reset and not second.reset


def test_restart_resumes_deltas_from_stored_snapshot(tmp_path: Path) -> None:
    first = make(tmp_path, Pages({"a": [page(1), page(2)]}))
    rounds(first, [100.0, 105.0])
    first.store.close()
    second = make(tmp_path, Pages({"a": [page(4)]}))
    assert second.states["a"].last_record is not None
    rounds(second, [115.0])
    stored = second.store.intervals("a", "llama", 0, 200)
    assert [(d.start, d.end) for d in stored] == [(100.0, 105.0), (105.0, 115.0)]
    assert stored[-1].counters["prompt_tokens"] == 2000.0


def test_page_with_too_many_series_is_capped_and_reported(tmp_path: Path) -> None:
    many = page(1) + "".join(
        f'vllm:num_requests_running{{engine="{i}",model_name="llama"}} 1.0\n' for i in range(50)
    )
    settings = load_settings(
        None,
        {
            "targets": [
                {"name": "a", "url": "http://a/metrics"},
                {"name": "b", "url": "http://b/metrics"},
            ],
            "storage": {"path": str(tmp_path / "pw.db")},
            "scrape": {"max_series": 40},
        },
    )
    pages = Pages({"a": [many], "b": [page(1)]})
    col = ScrapeSource(
        settings.scrape,
        settings.targets,
        Store(settings.storage.path),
        httpx.AsyncClient(transport=httpx.MockTransport(pages)),
    )
    rounds(col, [100.0])
    rec_a = col.states["a"].last_record
    assert (
        rec_a is not None and rec_a.error_kind == "too_many_series" and "40" in (rec_a.error or "")
    )
    rec_b = col.states["b"].last_record
    assert rec_b is not None and rec_b.ok
