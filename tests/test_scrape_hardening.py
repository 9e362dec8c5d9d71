"""Scrape hardening: streams past the caps, values a signal cannot take and duplicate
series are left out and named in target health, the target stays up, and the rest of
the page flows with no count lost or invented; a page with a series over the label
limits is refused whole and nothing of it is kept. Loopback targets (tests/faults.py)."""

from __future__ import annotations

import asyncio
import math
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import ScrapeConfig, TargetConfig, load_settings
from app.main import create_app
from app.model import IntervalDelta, Snapshot
from app.scrape.admission import StreamAdmission
from app.scrape.cache import ParseCache
from app.scrape.client import FetchResult
from app.scrape.label_limits import LabelLimits
from app.scrape.normalize import normalize
from app.scrape.parse import parse
from app.scrape.reader import PageReader
from app.sources.base import TargetState
from app.sources.live import ScrapeSource
from app.sources.process import process
from app.store.sqlite import Store
from tests.faults import FaultServer, Route, vllm_page
from tests.test_alerts_api import serving
from tests.test_parse import FIXTURE_FILES

LAB = 'engine="0",model_name="llama"'
REAL_RECORDING = Path(__file__).parent / "data" / "vllm_real" / "traffic2.tar.gz"
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
RUNNING = f"vllm:num_requests_running{{{LAB}}}"
WAITING = f"vllm:num_requests_waiting{{{LAB}}}"
KV = f"vllm:kv_cache_usage_perc{{{LAB}}}"


def with_value(page: str, series: str, value: str) -> str:
    """``page`` with the value of the one line of ``series`` replaced."""
    lines = page.split("\n")
    (hit,) = [i for i, line in enumerate(lines) if line.startswith(series + " ")]
    lines[hit] = f"{series} {value}"
    return "\n".join(lines)


def snap(text: str, cache: ParseCache | None = None) -> Snapshot:
    return normalize(parse(text, cache=cache or ParseCache()), target="t", ts=100.0)


def values_of(s: Snapshot) -> list[float]:
    """Every number a snapshot carries."""
    out: list[float] = []
    for stream in s.streams.values():
        for h in stream.histograms.values():
            out += [*h.counts, h.sum, h.count]
        out += [*stream.counters.values(), *stream.gauges.values()]
        out += [v for engine in stream.engines.values() for v in engine.values()]
    return out


def kinds(s: Snapshot) -> list[str]:
    return [p.kind.value for p in s.problems]


def signals(s: Snapshot, model: str = "llama") -> dict[str, object]:
    stream = s.streams[model]
    return {**stream.histograms, **stream.counters, **stream.gauges}


# --- invalid values (normalize) ---------------------------------------------------------

INVALID = [
    ("ttft_bucket_nan", f'{TTFT}_bucket{{{LAB},le="0.5"}}', "NaN", "ttft"),
    ("ttft_bucket_negative", f'{TTFT}_bucket{{{LAB},le="0.1"}}', "-1.0", "ttft"),
    ("ttft_buckets_fall", f'{TTFT}_bucket{{{LAB},le="1.0"}}', "5.0", "ttft"),
    ("ttft_inf_bucket_infinite", f'{TTFT}_bucket{{{LAB},le="+Inf"}}', "+Inf", "ttft"),
    ("ttft_sum_inf", f"{TTFT}_sum{{{LAB}}}", "+Inf", "ttft"),
    ("itl_count_negative", f"{ITL}_count{{{LAB}}}", "-1.0", "itl"),
    ("running_minus_inf", RUNNING, "-Inf", "running"),
    ("waiting_minus_inf", WAITING, "-Inf", "waiting"),
    ("waiting_negative", WAITING, "-3.0", "waiting"),
    ("kv_nan", KV, "NaN", "kv_usage"),
    ("kv_above_one", KV, "1.5", "kv_usage"),
    ("prompt_tokens_nan", f"vllm:prompt_tokens_total{{{LAB}}}", "NaN", "prompt_tokens"),
    (
        "generation_tokens_negative",
        f"vllm:generation_tokens_total{{{LAB}}}",
        "-1.0",
        "generation_tokens",
    ),
]


@pytest.mark.parametrize(
    ("series", "value", "signal"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_a_value_its_signal_cannot_take_leaves_the_signal_out_and_is_named(
    series: str, value: str, signal: str
) -> None:
    clean = snap(vllm_page(2))
    bad = snap(with_value(vllm_page(2), series, value))
    assert kinds(bad) == ["invalid_values"] and f"{signal} of 'llama'" in bad.problems[0].detail
    stream = bad.streams["llama"]
    assert signal in stream.withheld and signal in stream.missing
    assert signals(bad) == {k: v for k, v in signals(clean).items() if k != signal}
    assert all(math.isfinite(v) for v in values_of(bad))
    assert kinds(clean) == [] and clean.streams["llama"].withheld == ()


def test_an_invalid_series_leaves_its_signal_out_for_every_engine() -> None:
    page = vllm_page(2, engines=("0", "1"))
    page = with_value(page, 'vllm:num_requests_running{engine="1",model_name="llama"}', "-Inf")
    stream = snap(page).streams["llama"]
    # Engine 0 alone would read as engine 1 leaving (or 4 requests instead of 8).
    assert "running" not in stream.gauges and "running" in stream.withheld
    assert set(stream.engines) == {"0", "1"}  # both engines still there
    assert all("running" not in values for values in stream.engines.values())
    assert stream.gauges["waiting"] == 2.0


def test_values_of_families_phasewatch_does_not_read_are_left_alone() -> None:
    extra = (
        f'vllm:engine_sleep_state{{{LAB},sleep_state="awake"}} -Inf\n'
        f'vllm:engine_sleep_state{{{LAB},sleep_state="awake"}} NaN\n'
        f'vllm:num_requests_waiting_by_reason{{{LAB},reason="lora_budget"}} NaN\n'
        f'vllm:request_params_n_bucket{{{LAB},le="+Inf"}} NaN\n'
        "vllm:some_future_gauge -1e308\n"
    )
    s = snap(vllm_page(2) + extra)
    assert kinds(s) == [] and s.streams["llama"].withheld == ()
    assert signals(s) == signals(snap(vllm_page(2)))


# --- duplicate series (normalize) -------------------------------------------------------


def test_a_page_written_twice_is_used_once_and_named_duplicate_series() -> None:
    once = snap(vllm_page(2))
    twice = snap(vllm_page(2) + vllm_page(2))
    assert kinds(twice) == ["duplicate_series"]
    assert "first copy used" in twice.problems[0].detail
    # Not n/a (a bucket layout with repeated bounds), not doubled.
    assert signals(twice) == signals(once)
    assert twice.streams["llama"].withheld == ()


def test_copies_that_disagree_leave_their_signal_out() -> None:
    page = vllm_page(2) + f"{WAITING} 7.0\n" + f'{TTFT}_bucket{{{LAB},le="0.5"}} 19.0\n'
    s = snap(page)
    assert kinds(s) == ["duplicate_series"]
    assert set(s.streams["llama"].withheld) == {"waiting", "ttft"}
    assert signals(s) == {
        k: v for k, v in signals(snap(vllm_page(2))).items() if k not in ("waiting", "ttft")
    }


def test_duplicates_are_judged_on_every_page_read_through_a_template() -> None:
    cache = ParseCache(eager_templates=True)
    first = parse(vllm_page(2) + f"{WAITING} 1.0\n", cache=cache)
    assert kinds(normalize(first, target="t", ts=1.0)) == ["duplicate_series"]
    # The same layout again, read through its template; now the copies disagree.
    again = parse(vllm_page(3) + f"{WAITING} 9.0\n", cache=cache)
    assert again.memo is not None  # the template path
    s = normalize(again, target="t", ts=2.0)
    assert kinds(s) == ["duplicate_series"] and s.streams["llama"].withheld == ("waiting",)
    clean = parse(vllm_page(4) + f"{WAITING} 1.0\n", cache=cache)
    assert normalize(clean, target="t", ts=3.0).streams["llama"].gauges["waiting"] == 1.0


# --- baselines of a left-out signal (collector, loopback target) ------------------------


class Script:
    """The page source of a FaultServer: ``vllm_page(n)`` passed through ``edit``."""

    def __init__(self) -> None:
        self.edit: Callable[[str, int], str] = lambda text, n: text

    def __call__(self, path: str, route: Route) -> bytes:
        return self.edit(vllm_page(route.n), route.n).encode()


def nan_ttft(text: str, n: int) -> str:
    return with_value(text, f'{TTFT}_bucket{{{LAB},le="0.5"}}', "NaN")


def make_collector(tmp_path: Path, url: str, **scrape: Any) -> ScrapeSource:
    settings = load_settings(
        None,
        {
            "targets": [{"name": "a", "url": url}],
            "storage": {"path": str(tmp_path / "pw.db")},
            "scrape": {"timeout": 2.0, **scrape},
        },
    )
    return ScrapeSource(
        settings.scrape, settings.targets, Store(settings.storage.path), httpx.AsyncClient()
    )


def scrape(col: ScrapeSource, steps: list[tuple[float, Callable[[], None] | None]]) -> None:
    async def go() -> None:
        for t, action in steps:
            if action is not None:
                action()
            await col.read_round(t)
        await col.client.aclose()

    asyncio.run(go())


def stored(store: Store, model: str = "llama") -> list[IntervalDelta]:
    return store.intervals("a", model, 0, 1e12)


def test_a_left_out_histogram_keeps_its_baseline_so_no_count_is_lost_or_invented(
    tmp_path: Path,
) -> None:
    script = Script()
    with FaultServer(source=script) as srv:
        col = make_collector(tmp_path, srv.url("/metrics"))

        def bad() -> None:
            script.edit = nan_ttft

        def good() -> None:
            script.edit = lambda text, n: text

        scrape(col, [(100.0, None), (105.0, bad), (110.0, good)])
    rec = col.states["a"].last_record
    assert rec is not None and rec.ok and rec.error_kind is None
    (bad_rec,) = col.store.scrapes("a", 104.0, 106.0)
    assert bad_rec.ok and bad_rec.error_kind == "invalid_values"
    assert "ttft of 'llama'" in (bad_rec.error or "")
    at_105, at_110 = stored(col.store)
    assert "ttft" not in at_105.histograms and "ttft" in at_105.missing
    assert at_105.histograms["itl"].count == 100  # the rest of the page flowed
    assert not at_110.reset
    # Pages 1 → 3: 20 first tokens, all in the interval after the bad page.
    assert at_110.histograms["ttft"].count == 20
    assert at_110.histograms["ttft"].buckets == {0: 12, 1: 6, 2: 2}
    assert all(math.isfinite(v) for v in at_105.gauges.values())


def test_a_signal_invalid_from_the_first_scrape_gets_a_baseline_not_a_count(
    tmp_path: Path,
) -> None:
    script = Script()
    script.edit = nan_ttft
    with FaultServer(source=script) as srv:
        col = make_collector(tmp_path, srv.url("/metrics"))

        def good() -> None:
            script.edit = lambda text, n: text

        scrape(col, [(100.0, None), (105.0, good), (110.0, None)])
    at_105, at_110 = stored(col.store)
    # Page 2 is TTFT's first value: its 20 first tokens are history, not this interval's.
    assert "ttft" not in at_105.histograms and at_105.histograms["itl"].count == 100
    assert at_110.histograms["ttft"].count == 10


# --- stream caps ------------------------------------------------------------------------


def inventing(path: str, route: Route) -> bytes:
    """llama, then five model names never seen before, every page."""
    pages = [vllm_page(route.n)]
    pages += [vllm_page(route.n, model=f"gen-{route.n}-{i}") for i in range(5)]
    return "".join(pages).encode()


def test_new_streams_past_the_target_cap_are_refused_and_known_ones_keep_flowing(
    tmp_path: Path,
) -> None:
    with FaultServer(source=inventing) as srv:
        col = make_collector(tmp_path, srv.url("/metrics"), max_streams_per_target=3)
        scrape(col, [(100.0 + 5 * i, None) for i in range(4)])
        admitted = {"llama", "gen-1-0", "gen-1-1"}  # in page order, at the first page
        state = col.states["a"]
        rec = state.last_record
        assert rec is not None and rec.ok and rec.error_kind == "too_many_streams"
        assert state.problems == ("too_many_streams",)
        assert "5 new stream(s) refused" in (rec.error or "")
        assert set(state.last_ok.streams) <= admitted if state.last_ok else False
        # Refused streams reach nothing: not the store, its snapshots or the caps' count.
        assert {m for _, m in col.store.streams()} <= admitted
        assert set(col.store.last_snapshots()["a"][1]) == admitted
        assert col.admission.total == 3
        assert sum(d.histograms["ttft"].count for d in stored(col.store)) == 30
        col.store.close()

        # A restarted service knows its streams: the cap is still full.
        col = make_collector(tmp_path, srv.url("/metrics"), max_streams_per_target=3)
        assert col.admission.known("a") == admitted
        assert col.states["a"].problems == ("too_many_streams",)
        scrape(col, [(120.0, None)])
        assert col.admission.total == 3
        assert stored(col.store)[-1].histograms["ttft"].count == 10
        col.store.close()


def fetched(text: str) -> FetchResult:
    return FetchResult("http://t/metrics", 0.0, 0.01, text=text, nbytes=len(text))


def models_page(n: int, models: list[str]) -> str:
    return "".join(vllm_page(n, model=m) for m in models)


def test_the_cap_over_all_targets_refuses_new_streams_in_arrival_order() -> None:
    admission = StreamAdmission(max_per_target=64, max_total=4)
    a = TargetState(TargetConfig(name="a", url="http://a/metrics"))
    b = TargetState(TargetConfig(name="b", url="http://b/metrics"))
    a, out_a = process(a, fetched(models_page(1, ["a1", "a2", "a3"])), 100.0, admission=admission)
    b, out_b = process(b, fetched(models_page(1, ["b1", "b2", "b3"])), 100.0, admission=admission)
    assert out_a.snapshot is not None and sorted(out_a.snapshot.streams) == ["a1", "a2", "a3"]
    assert out_a.record.error_kind is None and a.problems == ()
    assert out_b.snapshot is not None and sorted(out_b.snapshot.streams) == ["b1"]
    assert out_b.record.ok and out_b.record.error_kind == "too_many_streams"
    assert "4 over all targets" in (out_b.record.error or "")
    page = models_page(2, ["a1", "a2", "a3", "a4"])
    a, out_a = process(a, fetched(page), 105.0, admission=admission)
    assert out_a.record.ok and out_a.record.error_kind == "too_many_streams"
    assert [d.model_name for d in out_a.deltas] == ["a1", "a2", "a3"]
    assert all(d.histograms["ttft"].count == 10 for d in out_a.deltas)


# --- what the service shows -------------------------------------------------------------


def test_a_partial_scrape_is_up_names_every_problem_and_exports_only_finite_values(
    tmp_path: Path,
) -> None:
    def partial(path: str, route: Route) -> bytes:
        page = with_value(vllm_page(route.n), WAITING, "-Inf")
        page += f"{KV} 0.5\n"  # a repeated series (the same value)
        return (page + vllm_page(route.n, model="other")).encode()

    with FaultServer(source=partial) as srv:
        settings = load_settings(
            None,
            {
                "targets": [{"name": "a", "url": srv.url("/metrics")}],
                "storage": {"path": str(tmp_path / "pw.db")},
                "scrape": {"timeout": 2.0, "max_streams_per_target": 1},
            },
        )
        with serving(create_app(settings, start_jobs=False)) as client:
            svc = client.app.state.service
            for _ in range(3):  # each round at its own time.time(): later than the last
                client.loop.run_until_complete(svc.scrape_job())
            client.loop.run_until_complete(svc.stream_metrics_job())
            (target,) = client.get("/api/v1/targets").json()
            health = client.get("/api/v1/health/components").json()["targets"]
            exported = client.get("/metrics").text
    assert target["up"] is True and target["models"] == ["llama"]
    assert target["problems"] == ["duplicate_series", "invalid_values", "too_many_streams"]
    assert target["last_error_kind"] == "duplicate_series"
    assert (
        "invalid_values: " in target["last_error"] and "too_many_streams: " in target["last_error"]
    )
    assert health["up"] == 1 and health["down"] == {}
    assert health["problems"] == {"duplicate_series": 1, "invalid_values": 1, "too_many_streams": 1}
    samples = [line.rpartition(" ") for line in exported.splitlines() if line[:1] not in ("#", "")]
    assert all(math.isfinite(float(value)) for _, _, value in samples)
    assert 'phasewatch_kv_usage_max{model_name="llama",target="a"} 0.5' in exported
    assert not any(key.startswith("phasewatch_waiting_avg{") for key, _, _ in samples)
    assert 'model_name="other"' not in exported


# --- label limits (parser, process, collector) ------------------------------------------

LONG_VALUE = "A" * 1_000_000


def long_label(page: str) -> str:
    """``page`` with a series whose model_name is a million characters long."""
    return page + f'vllm:num_requests_running{{model_name="{LONG_VALUE}"}} 1\n'


LIMITS = LabelLimits(labels=3, name_length=10, value_length=20)
OVER = [
    ("labels", 'vllm:x{a="1",b="2",c="3",d="4"} 1\n', "label limit exceeded", "label_limit (3)"),
    (
        "name_length",
        'vllm:x{a_very_long_name="1"} 1\n',
        "label name length limit exceeded",
        "label_name_length_limit (10)",
    ),
    (
        "value_length",
        f'vllm:x{{model_name="{"v" * 21}"}} 1\n',
        "label value length limit exceeded",
        "label_value_length_limit (20)",
    ),
    (
        "created_value_length",
        f'vllm:x_created{{model_name="{"v" * 21}"}} 1\n',
        "label value length limit exceeded",
        "label_value_length_limit (20)",
    ),
]


@pytest.mark.parametrize(
    ("line", "says", "setting"), [c[1:] for c in OVER], ids=[c[0] for c in OVER]
)
def test_a_series_over_a_label_limit_fails_the_page_naming_the_limit_and_the_setting(
    line: str, says: str, setting: str
) -> None:
    state = TargetState(TargetConfig(name="a", url="http://a/metrics"))
    reader = PageReader()
    state, good = process(state, fetched(vllm_page(1)), 100.0, limits=LIMITS, reader=reader)
    assert good.record.ok and good.snapshot is not None
    for ts in (105.0, 110.0):  # the second page is read through the caches the first filled
        bad_state, bad = process(
            state, fetched(vllm_page(2) + line), ts, limits=LIMITS, reader=reader
        )
        assert not bad.record.ok and bad.record.error_kind == "label_limit"
        assert says in (bad.record.error or "") and f"scrape.{setting}" in (bad.record.error or "")
        assert bad.snapshot is None and bad.deltas == []
        assert bad_state.last_ok is state.last_ok  # the baseline stays the last good page
    # Within the limits (or with none), the same page is used.
    _, fine = process(state, fetched(vllm_page(2) + line), 115.0, reader=reader)
    assert fine.record.ok and fine.record.error_kind is None
    assert fine.deltas[0].histograms["ttft"].count == 10


def test_zero_is_no_limit_and_a_page_within_the_limits_is_read_as_without_them() -> None:
    page = long_label(vllm_page(2))
    assert parse(page, cache=ParseCache(), limits=LabelLimits()).over_limit is None
    limited = ParseCache(eager_templates=True)
    for _ in range(3):  # cold, then through the series cache and the template
        within = parse(vllm_page(2), cache=limited, limits=LabelLimits.of(ScrapeConfig()))
        assert within.over_limit is None
        assert within.samples == parse(vllm_page(2), cache=ParseCache()).samples
    assert within.memo is not None  # the template path: nothing checked again


def real_pages() -> list[tuple[str, str]]:
    """Every real vLLM page of the fixtures, and the first of a real recording's."""
    pages = [(p.name, p.read_text()) for p in FIXTURE_FILES]
    with tarfile.open(REAL_RECORDING) as tar:
        first = next(m for m in tar.getmembers() if m.name.endswith(".prom"))
        body = tar.extractfile(first)
        assert body is not None
        pages.append((first.name, body.read().decode()))
    return pages


def test_the_default_label_limits_pass_every_real_vllm_page() -> None:
    limits = LabelLimits.of(ScrapeConfig())
    widest = 0
    for name, text in real_pages():
        result = parse(text, prefix=None, cache=ParseCache(), limits=limits)
        assert result.over_limit is None, name
        widest = max([widest, *(len(s.labels) for s in result.samples)])
    assert widest >= 37  # vLLM's cache_config_info: the default keeps a margin over it


def test_a_long_label_value_is_refused_as_label_limit_and_nothing_of_it_is_stored(
    tmp_path: Path,
) -> None:
    script = Script()
    with FaultServer(source=script) as srv:
        col = make_collector(tmp_path, srv.url("/metrics"))

        def hostile() -> None:
            script.edit = lambda text, n: long_label(text)

        def good() -> None:
            script.edit = lambda text, n: text

        scrape(col, [(100.0, None), (105.0, hostile), (110.0, None), (115.0, good)])
    (bad, again) = col.store.scrapes("a", 104.0, 111.0)
    for rec in (bad, again):
        assert not rec.ok and rec.error_kind == "label_limit"
        assert rec.error == (
            "label value length limit exceeded: model_name of vllm:num_requests_running is "
            "1,000,000 characters long, over scrape.label_value_length_limit (4,096)"
        )
    rec = col.states["a"].last_record
    assert rec is not None and rec.ok  # healed at the first good page
    # Nothing of the hostile pages reached the store, the snapshots or the caps...
    assert [m for _, m in col.store.streams()] == ["llama"]
    assert set(col.store.last_snapshots()["a"][1]) == {"llama"}
    assert col.admission.total == 1
    # ...or the parser's caches.
    cache = col.reader.parse_cache
    assert all(len(k) < 1000 for t in cache.tables.values() for k in t.series)
    assert all(len(v) < 1000 for t in cache.tables.values() for _, v in t.pairs)
    # No count lost: the delta after the gap covers the three intervals.
    (delta,) = stored(col.store)
    assert (delta.start, delta.end) == (100.0, 115.0)
    assert delta.histograms["ttft"].count == 30
