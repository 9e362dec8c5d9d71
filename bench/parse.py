"""Benchmark phasewatch's exposition parser against prometheus_client's.

Input: the complete vLLM 0.33.0 page (tests/fixtures/vllm-generated). Both parsers read
the same 8 variants of it, whose values differ (scaled per variant), so that nothing can
profit from values seen before. prometheus_client is consumed fully
(``for f in families: list(f.samples)``); phasewatch returns the ``vllm:`` samples with
the default prefix (on this page every sample line is a ``vllm:`` line, so the prefix
filter saves nothing; ``phasewatch_ms_warm_all_families`` parses with ``prefix=None``).

Each measurement parses all 8 variants and reports the time per page; measurements of
all parsers are interleaved in shuffled order in one run, and the median over repeats
is reported (the machine is noisy and has 2 cores).

Which figure is the headline: ``speedup_vs_prometheus_client`` (the last line) uses
``phasewatch_ms_warm``, because that is what the service does in production: it parses
the same targets every 5 s, and their pages keep the same lines from scrape to scrape;
only the values change. The parser's bounded cache keeps the series texts
(``name{labels}``) and, per page layout, a template, so a steady-state scrape is read in
bulk. Values are never cached, and the variants make sure nothing can be.
``phasewatch_ms_warm_no_template`` is the same with templates off (series cache only).
``phasewatch_ms_cold`` is a first scrape with an empty cache (a new target, or a cache
too small for the fleet) and gets its own speedup line. The page's values repeat a lot
(zeros, saturated buckets) and the parser converts each distinct value text once per page;
the ``*_distinct_values`` lines rerun both parsers on variants where every value differs.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from app.scrape.cache import ParseCache  # noqa: E402
from app.scrape.parse import parse  # noqa: E402

# A copy of shared/fixtures/vllm-generated kept in the repo.
PAGE = (
    ROOT / "tests" / "fixtures" / "vllm-generated" / "v0.33.0_V1_1engine_singleproc_GENERATED.prom"
)
VARIANTS = 8
REPEATS = 15


def variant(text: str, factor: float, distinct: bool) -> str:
    """Return ``text`` with every finite sample value scaled (and made unique if asked)."""
    out = []
    for index, line in enumerate(text.split("\n")):
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            number = float(value)
            if number == number and abs(number) != float("inf"):
                number = number * factor + ((index + 1) / 1024 if distinct else 0.0)
                line = f"{key} {number!r}"
        out.append(line)
    return "\n".join(out)


def reference(text: str) -> int:
    """Parse with prometheus_client and consume every sample."""
    count = 0
    for family in text_string_to_metric_families(text):
        count += len(list(family.samples))
    return count


def timed(fn: Callable[[str], object], pages: list[str]) -> float:
    """Return milliseconds per page for parsing every page once."""
    gc.collect()
    start = time.perf_counter()
    for page in pages:
        fn(page)
    return (time.perf_counter() - start) * 1000.0 / len(pages)


def main() -> None:
    """Run the interleaved measurements and print ``name: value`` lines."""
    text = PAGE.read_text()
    same = [variant(text, 1.0 + k, distinct=False) for k in range(VARIANTS)]
    distinct = [variant(text, 1.0 + k, distinct=True) for k in range(VARIANTS)]
    warm_cache, warm_all_cache, warm_distinct_cache = ParseCache(), ParseCache(), ParseCache()
    no_template_cache = ParseCache(max_templates=0)
    for _ in range(2):  # the previous scrapes of this target
        parse(text, cache=warm_cache)
        parse(text, prefix=None, cache=warm_all_cache)
        parse(text, cache=warm_distinct_cache)
        parse(text, cache=no_template_cache)
    runs: dict[str, tuple[Callable[[str], object], list[str]]] = {
        "prometheus_client_ms": (reference, same),
        "phasewatch_ms_cold": (lambda t: parse(t, cache=ParseCache()), same),
        "phasewatch_ms_warm": (lambda t: parse(t, cache=warm_cache), same),
        "phasewatch_ms_warm_no_template": (lambda t: parse(t, cache=no_template_cache), same),
        "phasewatch_ms_warm_all_families": (
            lambda t: parse(t, prefix=None, cache=warm_all_cache),
            same,
        ),
        "prometheus_client_ms_distinct_values": (reference, distinct),
        "phasewatch_ms_warm_distinct_values": (
            lambda t: parse(t, cache=warm_distinct_cache),
            distinct,
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    rng = random.Random(0)
    order = list(runs)
    for _ in range(REPEATS):
        rng.shuffle(order)
        for name in order:
            fn, pages = runs[name]
            times[name].append(timed(fn, pages))
    median = {name: statistics.median(values) for name, values in times.items()}

    result = parse(text, cache=ParseCache())
    print(f"page_bytes: {len(text.encode())}")
    print(f"page_lines: {text.count(chr(10))}")
    print(f"vllm_samples: {len(result.samples)}")
    print(f"prometheus_client_samples: {reference(text)}")
    print(f"repeats: {REPEATS} x {VARIANTS} pages, median")
    for name in runs:
        print(f"{name}: {median[name]:.3f}")
    ref = median["prometheus_client_ms"]
    print(f"speedup_cold_vs_prometheus_client: {ref / median['phasewatch_ms_cold']:.1f}")
    no_template = median["phasewatch_ms_warm_no_template"]
    print(f"speedup_warm_no_template_vs_prometheus_client: {ref / no_template:.1f}")
    distinct_ratio = (
        median["prometheus_client_ms_distinct_values"]
        / median["phasewatch_ms_warm_distinct_values"]
    )
    print(f"speedup_warm_distinct_values_vs_prometheus_client: {distinct_ratio:.1f}")
    print(f"speedup_vs_prometheus_client: {ref / median['phasewatch_ms_warm']:.1f}")


if __name__ == "__main__":
    main()
