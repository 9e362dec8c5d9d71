"""The UI's data layer (cells, sources, resolution, cache) and its mount under /ui."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import load_settings
from app.diagnose import DiagnosisConfig, diagnose
from app.evaluate.replay import replay
from app.main import create_app
from app.read.points import resolution
from app.read.source import Observed, StoreSource, grid_windows, load_history, load_recording
from app.read.target import UiData
from app.scrape.client import read_file
from app.sim.record import record
from app.sources.process import PageFeed
from app.sources.prometheus import TargetHistory
from app.sources.recording import list_pages, read_scrapes
from app.windows.aggregate import windows
from tests.test_e2e import ServiceThread

EPOCH = 1764403200.0  # divisible by 15 and 60: recordings start on the grid


@pytest.fixture(scope="module")
def incident_rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rec")
    return record("incident", out, duration=420, seed=5, start_unix=EPOCH)


def test_day_of_history_is_1440_windows_of_60_s() -> None:
    assert resolution(0, 86400, length=60, step=15) == (60, 60)
    assert resolution(0, 3600, length=60, step=15) == (60, 15)
    assert resolution(0, 21600, length=60, step=15) == (60, 15)
    assert resolution(0, 7 * 86400, length=60, step=15) == (600, 600)


@pytest.mark.parametrize(("length", "step"), [(60.0, 15.0), (60.0, 60.0), (120.0, 30.0)])
def test_cell_windows_equal_windows_over_the_raw_deltas(
    incident_rec: Path, length: float, step: float
) -> None:
    rec = read_scrapes(incident_rec)
    ((model, deltas),) = rec.deltas.items()
    first = EPOCH + step
    fast = grid_windows(
        deltas,
        target=rec.target,
        model=model,
        first_end=first,
        end=rec.end,
        length=length,
        step=step,
        keep=None,
    )
    slow = windows(
        deltas,
        start=first - length,
        end=rec.end,
        length=length,
        step=step,
        target=rec.target,
        model_name=model,
    )
    assert [w.end for w in fast] == [w.end for w in slow]
    for a, b in zip(fast, slow, strict=True):
        assert a.quantiles == b.quantiles
        assert a.observations == b.observations
        assert a.gauges == b.gauges
        assert a.covered == pytest.approx(b.covered)
        assert a.increases == pytest.approx(b.increases)
        assert a.means == pytest.approx(b.means)
        assert (a.intervals, a.gauge_span, a.reset) == (b.intervals, b.gauge_span, b.reset)


@pytest.mark.parametrize("scenario", ["incident", "spec_decode_drop", "hang"])
def test_the_ui_windows_diagnose_as_the_evaluation_does(tmp_path: Path, scenario: str) -> None:
    """The UI windows only the histograms the diagnosis reads, in per-step cells: every
    diagnosis must still be the evaluation's (the waiting age reads the scrape count,
    the speculative-decoding rule reads TPOT)."""
    rec = read_scrapes(record(scenario, tmp_path, duration=420, seed=5, start_unix=EPOCH))
    ((model, deltas),) = rec.deltas.items()
    first = EPOCH + 60.0
    shape = {"first_end": first, "end": rec.end, "length": 60.0, "step": 15.0}
    ui = grid_windows(deltas, target=rec.target, model=model, **shape)
    raw = windows(
        deltas,
        start=first - 60.0,
        end=rec.end,
        length=60.0,
        step=15.0,
        target=rec.target,
        model_name=model,
    )
    mine = [_rounded(diagnose(w).to_dict()) for w in ui]
    theirs = [_rounded(diagnose(w).to_dict()) for w in raw]
    assert len(mine) == len(theirs) >= 20
    assert [d["class"] for d in mine] == [d["class"] for d in theirs]
    assert mine == theirs  # evidence, findings, confidence, hints


def _rounded(x: object) -> object:
    """``x`` with floats to 12 significant digits (a cell sums a histogram's ``_sum`` in
    plain floating point: means may differ in the last bits)."""
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_rounded(v) for v in x]
    return x


def test_recording_source_diagnoses_like_the_replay_command(incident_rec: Path) -> None:
    source = load_recording(incident_rec)
    (model,) = [m for _, m in source.streams()]
    data = UiData(source, DiagnosisConfig())
    start, end = source.span() or (0.0, 0.0)
    tl = data.timeline(source.targets()[0].name, model, start, end)
    mine = {p.end: p.cls for p in tl.points}
    replayed = replay(read_scrapes(incident_rec), [], length=60.0, step=15.0)
    theirs = {d.end: str(d.cls) for d in replayed.diagnoses}
    common = sorted(set(mine) & set(theirs))
    assert len(common) >= 20
    assert [mine[e] for e in common] == [theirs[e] for e in common]
    assert "queue_bound" in mine.values()  # the spike of the incident scenario


def test_a_prometheus_range_is_shown_like_the_same_recording(incident_rec: Path) -> None:
    # The history PrometheusSource.read returns: snapshots, deltas and failed scrapes.
    hist = TargetHistory("vllm:8000")
    feed = PageFeed("vllm:8000", "http://x/metrics")
    for ts, page in list_pages(incident_rec):
        outcome = feed(ts, read_file(page, max_bytes=10_000_000))
        assert outcome.snapshot is not None
        hist.snapshots.append(outcome.snapshot)
        hist.deltas.extend(outcome.deltas)
    start, end = EPOCH, hist.snapshots[-1].ts
    prom = load_history({"vllm:8000": hist}, start=start, end=end, label="Prometheus x")
    rec = load_recording(incident_rec, target="vllm:8000")
    (model,) = hist.models()
    a = UiData(prom, DiagnosisConfig()).timeline("vllm:8000", model, start, end)
    b = UiData(rec, DiagnosisConfig()).timeline("vllm:8000", model, start, end)
    assert a.points == b.points
    assert prom.targets()[0].models == (model,) and prom.span() == (start, end)


class CountingSource:
    """A source wrapper that counts reads and lets the test move the clock."""

    def __init__(self, inner: StoreSource, now: float) -> None:
        self.inner = inner
        self.label = "test"
        self.live = True
        self.settled = 30.0
        self.clock = now
        self.reads = 0

    def now(self) -> float:
        return self.clock

    def span(self) -> tuple[float, float] | None:
        return None

    def targets(self):  # type: ignore[no-untyped-def]
        return self.inner.targets()

    def streams(self) -> list[tuple[str, str]]:
        return self.inner.streams()

    def observe(self, target: str, model: str, **kw: float) -> list[Observed]:
        self.reads += 1
        return self.inner.observe(target, model, **kw)  # type: ignore[arg-type]

    def engines(self, target: str, model: str) -> dict[str, dict[str, float]]:
        return {}


def test_settled_windows_are_cached_and_only_new_ones_computed(incident_rec: Path) -> None:
    inner = load_recording(incident_rec)
    (target, model) = inner.streams()[0]
    src = CountingSource(inner, EPOCH + 300)
    data = UiData(src, DiagnosisConfig())
    first = data.timeline(target, model, EPOCH, EPOCH + 300)
    assert src.reads == 1
    again = data.timeline(target, model, EPOCH, EPOCH + 300)
    assert again.points == first.points
    # only the unsettled tail (the last 30 s) is read again, in one contiguous read
    assert src.reads == 2
    src.clock = EPOCH + 400
    data.timeline(target, model, EPOCH, EPOCH + 400)
    assert src.reads == 3


def test_windows_without_any_data_are_gaps_not_insufficient_data(incident_rec: Path) -> None:
    source = load_recording(incident_rec)
    (target, model) = source.streams()[0]
    tl = UiData(source, DiagnosisConfig()).timeline(target, model, EPOCH - 3600, EPOCH + 120)
    # the hour before the first page has no point; the window of the first page (a scrape
    # without a delta yet) is honestly insufficient data
    assert tl.points and tl.points[0].end == EPOCH
    assert tl.points[0].cls == "insufficient_data"
    assert tl.points[-1].cls != "insufficient_data"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    settings = load_settings(
        None,
        {
            "targets": [{"name": "a", "url": "http://127.0.0.1:9/metrics"}],
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )
    svc = ServiceThread(create_app(settings, start_jobs=False))
    try:
        with httpx.Client(base_url=svc.url, timeout=30) as c:
            yield c
    finally:
        svc.close()


def test_ui_is_mounted_under_ui_and_serves_every_asset_locally(client: httpx.Client) -> None:
    assert client.get("/ui", follow_redirects=False).headers["location"] == "/ui/"
    page = client.get("/ui/")
    assert page.status_code == 200
    refs = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert refs, page.text
    assert not re.search(r"https?://", page.text), "the page must not reference a CDN"
    for ref in refs:
        assert ref.startswith("/ui/"), ref
        assert client.get(ref).status_code == 200, ref
    # Plotly.js is a lazily loaded chunk of dcc, served by the app too
    chunk = client.get("/ui/_dash-component-suites/dash/dcc/async-graph.js")
    assert chunk.status_code == 200
    plotly = client.get("/ui/_dash-component-suites/plotly/package_data/plotly.min.js")
    assert plotly.status_code == 200 and len(plotly.content) > 1_000_000
    assert client.get("/ui/_dash-layout").status_code == 200
    assert client.get("/ui/_dash-dependencies").status_code == 200
    assert client.get("/api/v1/targets").status_code == 200  # the API is still there


def test_the_latest_settled_diagnosis_of_a_stream_is_read_once(incident_rec: Path) -> None:
    inner = load_recording(incident_rec)
    (target, model) = inner.streams()[0]
    src = CountingSource(inner, EPOCH + 300)
    data = UiData(src, DiagnosisConfig())
    settled, fresh = EPOCH + 240, EPOCH + 285  # settled: 30 s or more before the clock
    # (compare=False: the window alone, without the timeline its baseline reads)
    first = data.diagnosis_at(target, model, settled, compare=False)
    assert first is not None and data.diagnosis_at(target, model, settled, compare=False) is first
    assert src.reads == 1
    data.diagnosis_at(target, model, fresh, compare=False)
    data.diagnosis_at(target, model, fresh, compare=False)
    assert src.reads == 3, "a window that can still change is read every time"
    src.clock = EPOCH + 400
    later = data.diagnosis_at(target, model, EPOCH + 360, compare=False)
    assert later is not None and later[0].end == EPOCH + 360 and src.reads == 4
