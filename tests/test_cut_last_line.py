"""One bad last line: the complete lines are used, the bad one counted, and what the cut
could make wrong is withheld, so no delta is invented (issue #40, item 6).

Pages go through :func:`app.sources.process.process` (``PageFeed``), as every source's
do. A body that came short of its length is still a failed ``truncated`` scrape.
"""

from __future__ import annotations

from app.model import ErrorKind, IntervalDelta
from app.scrape.client import FetchResult
from app.scrape.cutline import signals_of
from app.sources.base import Outcome
from app.sources.process import PageFeed
from tests.pages import ITL_BOUNDS, ITL_STEP, TTFT_BOUNDS, TTFT_STEP, _hist

ENGINES = ("0", "1")


def two_engines(n: int) -> str:
    """vLLM's order: each family lists both engines' series, then the next family."""
    parts = []
    for name, bounds, step, total in (
        ("vllm:time_to_first_token_seconds", TTFT_BOUNDS, TTFT_STEP, 3.0),
        ("vllm:inter_token_latency_seconds", ITL_BOUNDS, ITL_STEP, 4.0),
    ):
        for e in ENGINES:
            lines = _hist(
                name, bounds, [n * c for c in step], n * total, f'engine="{e}",model_name="m"'
            )
            parts.append(lines if e == "0" else "\n".join(lines.split("\n")[2:]))
    for family, gauge in (("vllm:num_requests_running", 2.0), ("vllm:kv_cache_usage_perc", 0.5)):
        parts.append(f"# TYPE {family} gauge")
        parts += [f'{family}{{engine="{e}",model_name="m"}} {gauge}' for e in ENGINES]
    parts.append("# TYPE vllm:prompt_tokens_total counter")
    parts += [
        f'vllm:prompt_tokens_total{{engine="{e}",model_name="m"}} {1000.0 * n}' for e in ENGINES
    ]
    parts.append("# TYPE vllm:request_success_total counter")
    success = 'vllm:request_success_total{{engine="{}",finished_reason="stop",model_name="m"}} {}'
    parts += [success.format(e, 10.0 * n) for e in ENGINES]
    return "\n".join(parts) + "\n"


def cut_at(page: str, marker: str, keep: int) -> str:
    """``page`` cut ``keep`` characters into the line that holds ``marker``."""
    at = page.index(marker)
    start = page.rindex("\n", 0, at) + 1
    return page[: start + keep]


def feed(pages: list[str], start: float = 100.0) -> list[Outcome]:
    pf = PageFeed("a")
    return [
        pf(start + 5 * i, FetchResult("http://a/metrics", 0.0, 0.01, text=p, nbytes=len(p)))
        for i, p in enumerate(pages)
    ]


def delta(outcome: Outcome) -> IntervalDelta:
    (d,) = outcome.deltas
    return d


# The second engine's TTFT bucket line cut inside its le: everything after it is gone.
CUT_IN_TTFT = cut_at(
    two_engines(2), 'time_to_first_token_seconds_bucket{engine="1",model_name="m",le="1.0"', 52
)


def test_a_histogram_cut_mid_line_is_withheld_and_its_next_delta_covers_both_intervals() -> None:
    first, cut, after = feed([two_engines(1), CUT_IN_TTFT, two_engines(3)])
    assert cut.record.ok and cut.record.error_kind == ErrorKind.CUT_LAST_LINE
    assert cut.record.parse_errors == 1
    assert "ttft of 'm'" in (cut.record.error or "")
    # No phantom: nothing of the cut histogram (summed, engine 0 alone would read as a
    # reset), nor of the families after the cut, is a delta of that scrape.
    at_cut = delta(cut)
    assert not at_cut.reset and at_cut.histograms == {} and at_cut.counters == {}
    assert cut.snapshot is not None and "ttft" in cut.snapshot.streams["m"].withheld
    # The next page counts from the last values seen (t=100): two steps, both engines.
    nxt = delta(after)
    assert not nxt.reset
    assert nxt.histograms["ttft"].count == 2 * 2 * TTFT_STEP[-1]
    assert nxt.histograms["itl"].count == 2 * 2 * ITL_STEP[-1]
    assert nxt.counters["prompt_tokens"] == 2 * 2 * 1000.0
    assert nxt.counters["finished:stop"] == 2 * 2 * 10.0


def test_a_first_page_cut_mid_line_starts_a_baseline_and_counts_nothing_from_zero() -> None:
    cut, after, later = feed(
        [cut_at(two_engines(1), "vllm:prompt_tokens_total", 30), two_engines(2), two_engines(3)]
    )
    assert cut.record.ok and cut.record.error_kind == ErrorKind.CUT_LAST_LINE
    # The histograms came whole and have their delta; the counters the page did not reach
    # (and the one cut) start their baseline at t=105 instead of counting from zero.
    nxt = delta(after)
    assert nxt.histograms["ttft"].count == 2 * TTFT_STEP[-1]
    assert nxt.counters == {} and not nxt.reset
    assert delta(later).counters == {"prompt_tokens": 2000.0, "finished:stop": 20.0}


def test_a_cut_line_of_a_family_phasewatch_does_not_read_withholds_nothing() -> None:
    extra = (
        "# TYPE python_gc_objects_collected_total counter\npython_gc_objects_collected_total{gen"
    )
    first, cut = feed([two_engines(1), two_engines(2) + extra])
    assert cut.record.ok and cut.record.error_kind == ErrorKind.CUT_LAST_LINE
    assert cut.snapshot is not None and cut.snapshot.streams["m"].withheld == ()
    assert delta(cut).counters == {"prompt_tokens": 2000.0, "finished:stop": 20.0}


def test_a_line_cut_inside_its_name_withholds_every_signal_the_name_could_begin() -> None:
    assert signals_of("vllm:prompt_tok") == {
        "prompt_tokens",
        "prompt_tokens_local_compute",
        "prompt_tokens_local_cache_hit",
        "prompt_tokens_external_kv_transfer",
    }
    assert signals_of('vllm:request_success_total{engine="0",fini') == {"finished:"}
    assert signals_of('vllm:inter_token_latency_seconds_sum{engine="0"} 1.') == {"itl"}
    assert signals_of("# TYPE vllm:time_to_first_token_seconds hist") == frozenset()
    assert signals_of("vllm:cache_config_info{block_size=") == frozenset()


def test_a_body_that_came_short_of_its_length_stays_truncated() -> None:
    pf = PageFeed("a")
    pf(100.0, FetchResult("http://a/metrics", 0.0, 0.01, text=two_engines(1), nbytes=1))
    short = FetchResult(
        "http://a/metrics", 0.0, 0.01, error_kind=ErrorKind.TRUNCATED, error="the body ended early"
    )
    outcome = pf(105.0, short)
    assert not outcome.record.ok and outcome.record.error_kind == "truncated"
    assert outcome.deltas == [] and pf.state.last_ok is not None and pf.state.last_ok.ts == 100.0
