"""SGLang's series read from a Prometheus server give the streams a scrape gives."""

from __future__ import annotations

import re

from app.scrape.normalize import normalize
from app.scrape.parse import parse
from app.scrape.result import ParseResult
from app.sources.promapi import Series
from app.sources.prompages import PageSet, family_regexes, name_regex
from tests.fixtures_path import FIXTURES

PAGE = FIXTURES / "sglang" / "main-00ae9c15_dp2_GENERATED.prom"


def test_sglang_series_from_prometheus_normalise_as_the_scraped_page() -> None:
    scraped = parse(PAGE.read_text())
    pages = PageSet()
    every = re.compile(name_regex())
    series = []
    for i, (name, labels, value, _) in enumerate(scraped.samples):
        # Half in the OpenMetrics spelling (sglang_…), as prometheus-client ≥ 0.23 serves.
        spelled = "sglang_" + name[7:] if i % 2 else name
        if not every.fullmatch(spelled):
            continue  # a family phasewatch does not read: not asked for
        series.append(
            Series({"__name__": spelled, "instance": "s", **dict(labels)}, [(5.0, value)])
        )
    pages.add(series)
    (target, by_ts), *_ = pages.drain()
    read = ParseResult(samples=by_ts[5.0], types={}, errors=0, cut_last_line=False)
    got = normalize(read, target=target, ts=5.0)
    want = normalize(scraped, target=target, ts=5.0)
    assert got.engine_kind == "sglang"
    assert got.streams.keys() == want.streams.keys()
    for model, stream in want.streams.items():
        other = got.streams[model]
        assert other.gauges == stream.gauges
        assert other.counters == stream.counters
        assert other.histograms == stream.histograms
        assert other.info == stream.info == {"engine_kind": "sglang"}


def test_each_sglang_family_has_its_query() -> None:
    families = [re.compile(rx) for rx in family_regexes()]
    for name in ("sglang:time_to_first_token_seconds_bucket", "sglang_num_queue_reqs"):
        assert sum(bool(f.fullmatch(name)) for f in families) == 1, name
