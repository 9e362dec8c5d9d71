"""Tests for app.scrape.parse: the rules one by one, then against prometheus_client."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from app.model import Sample
from app.scrape.cache import ParseCache
from app.scrape.parse import looks_like_prometheus, parse
from app.scrape.result import ParseResult
from tests.fixtures_path import FIXTURES

# Copies of ../shared/fixtures (captured and generated vLLM pages) live in tests/fixtures.
SHARED_FIXTURES = FIXTURES
FIXTURE_FILES = sorted(SHARED_FIXTURES.rglob("*.prom"))
GENERATED_033 = SHARED_FIXTURES / "vllm-generated" / "v0.33.0_V1_1engine_singleproc_GENERATED.prom"

Key = tuple[str, tuple[tuple[str, str], ...], object]


def fresh(text: str, prefix: str | None = "vllm:") -> ParseResult:
    """Parse with an empty cache, so that every test sees the careful path."""
    return parse(text, prefix=prefix, cache=ParseCache())


def _value_key(value: float) -> object:
    """Make NaN equal to NaN for multiset comparison."""
    return "NaN" if math.isnan(value) else float(value)


def ours(result: ParseResult) -> Counter[Key]:
    """Our samples as a multiset of (name, sorted labels, value)."""
    return Counter((s.name, s.labels, _value_key(s.value)) for s in result.samples)


def _accepted(line: str) -> bool:
    """Tell whether prometheus_client accepts ``line`` on its own."""
    try:
        list(text_string_to_metric_families(line))
    except Exception:  # the reference raises ValueError, IndexError, ...
        return False
    return True


def reference(text: str, prefix: str | None = "vllm:") -> Counter[Key]:
    """prometheus_client's samples, on the lines it accepts, without `_created` samples."""
    kept = "\n".join(line for line in text.split("\n") if _accepted(line))
    out: Counter[Key] = Counter()
    for family in text_string_to_metric_families(kept):
        for sample in family.samples:
            if prefix is not None and not sample.name.startswith(prefix):
                continue
            if sample.name.endswith("_created"):
                continue
            labels = tuple(sorted(sample.labels.items()))
            out[(sample.name, labels, _value_key(sample.value))] += 1
    return out


def only(result: ParseResult) -> Sample:
    """Return the single sample of a result."""
    assert len(result.samples) == 1, result
    return result.samples[0]


# --- ordering ---------------------------------------------------------------------------


def test_sum_before_buckets_parses() -> None:
    page = (
        "# TYPE vllm:h histogram\n"
        'vllm:h_sum{model_name="m"} 2.5\n'
        'vllm:h_count{model_name="m"} 2.0\n'
        'vllm:h_bucket{le="1.0",model_name="m"} 1.0\n'
        'vllm:h_bucket{le="+Inf",model_name="m"} 2.0\n'
    )
    names = [s.name for s in fresh(page).samples]
    assert names == ["vllm:h_sum", "vllm:h_count", "vllm:h_bucket", "vllm:h_bucket"]


def test_interleaved_engines_keep_their_labels() -> None:
    page = (
        'vllm:h_sum{engine="0",model_name="m"} 1.0\n'
        'vllm:h_sum{engine="1",model_name="m"} 2.0\n'
        'vllm:h_bucket{engine="0",le="+Inf",model_name="m"} 3.0\n'
        'vllm:h_bucket{engine="1",le="+Inf",model_name="m"} 4.0\n'
    )
    got = {(dict(s.labels)["engine"], s.name): s.value for s in fresh(page).samples}
    assert got == {
        ("0", "vllm:h_sum"): 1.0,
        ("1", "vllm:h_sum"): 2.0,
        ("0", "vllm:h_bucket"): 3.0,
        ("1", "vllm:h_bucket"): 4.0,
    }


def test_labels_come_back_sorted_whatever_the_written_order() -> None:
    page = (
        'vllm:x{model_name="m",le="0.5",engine="0"} 1\n'
        'vllm:x{le="1.0",engine="1",model_name="m"} 2\n'
    )
    result = fresh(page)
    assert [s.labels for s in result.samples] == [
        (("engine", "0"), ("le", "0.5"), ("model_name", "m")),
        (("engine", "1"), ("le", "1.0"), ("model_name", "m")),
    ]


def test_unsorted_labels_stay_right_when_read_through_a_cached_shape() -> None:
    cache = ParseCache()
    parse('vllm:x{b="1",a="2"} 1\n', cache=cache)
    result = parse('vllm:x{b="3",a="4"} 2\n', cache=cache)
    assert only(result).labels == (("a", "4"), ("b", "3"))


# --- labels -----------------------------------------------------------------------------


def test_escaped_label_values_are_unescaped() -> None:
    page = 'vllm:x{a="back\\\\slash",b="quo\\"te",c="new\\nline"} 1\n'
    assert dict(only(fresh(page)).labels) == {
        "a": "back\\slash",
        "b": 'quo"te',
        "c": "new\nline",
    }


def test_unknown_escape_is_kept_as_written() -> None:
    assert dict(only(fresh('vllm:x{a="tab\\there"} 1\n')).labels) == {"a": "tab\\there"}


def test_label_value_may_hold_braces_commas_spaces_and_equals() -> None:
    page = 'vllm:x{a="{x}, y=z",b="c d"} 3\n'
    assert dict(only(fresh(page)).labels) == {"a": "{x}, y=z", "b": "c d"}


def test_trailing_comma_and_blanks_in_label_block_are_accepted() -> None:
    page = 'vllm:x{ a = "1" , b="2", } 3\n'
    assert dict(only(fresh(page)).labels) == {"a": "1", "b": "2"}


def test_empty_label_block_gives_no_labels() -> None:
    assert only(fresh("vllm:x{} 3\n")).labels == ()


def test_repeated_label_name_is_an_error() -> None:
    result = fresh('vllm:x{a="1",a="2"} 3\n')
    assert result.samples == [] and result.errors == 1


def test_unquoted_label_value_is_an_error() -> None:
    result = fresh("vllm:x{a=1} 3\nvllm:y 1\n")
    assert [s.name for s in result.samples] == ["vllm:y"] and result.errors == 1


# --- values and timestamps --------------------------------------------------------------


def test_nan_and_infinities_parse() -> None:
    page = "vllm:a NaN\nvllm:b +Inf\nvllm:c -Inf\nvllm:d 1.5e-3\n"
    values = {s.name: s.value for s in fresh(page).samples}
    assert math.isnan(values["vllm:a"])
    assert values["vllm:b"] == math.inf and values["vllm:c"] == -math.inf
    assert values["vllm:d"] == 0.0015


def test_integer_millisecond_timestamp_becomes_seconds() -> None:
    sample = only(fresh('vllm:x{a="1"} 2 1700000000123\n'))
    assert sample.value == 2.0 and sample.timestamp == pytest.approx(1700000000.123)


def test_sample_without_timestamp_has_none() -> None:
    assert only(fresh("vllm:x 2\n")).timestamp is None


def test_non_integer_timestamp_is_an_error() -> None:
    result = fresh("vllm:x 2 17.5\n")
    assert result.samples == [] and result.errors == 1


def test_digit_separator_in_value_is_an_error() -> None:
    result = fresh("vllm:x 1_000\nvllm:y 1\n")
    assert [s.name for s in result.samples] == ["vllm:y"] and result.errors == 1


def test_tab_between_series_and_value_parses() -> None:
    assert only(fresh('vllm:x{a="1"}\t7\n')).value == 7.0


def test_a_stray_quote_after_a_cached_label_block_is_still_an_error() -> None:
    cache = ParseCache()
    for _ in range(2):
        parse('vllm:x{a="1",b="2"} 7\n', cache=cache)
    page = 'vllm:x{a="1",b="2"}"} 7\nvllm:x{a="1",b="2"}"x"} 7\n'
    result = parse(page, cache=cache)
    assert result == fresh(page) and result.errors == 2 and result.samples == []


def test_tab_before_a_timestamp_parses_the_same_once_the_series_is_cached() -> None:
    cache = ParseCache()
    for page in ('vllm:x{a="1"} 7\nvllm:y 1\nvllm:y_created 5\n',) * 2:
        parse(page, cache=cache)
    page = 'vllm:x{a="1"} 7\t1000\nvllm:y 1\t2000\nvllm:y_created 5\t3000\n'
    result = parse(page, cache=cache)
    assert result == fresh(page) and result.errors == 0
    assert [(s.value, s.timestamp) for s in result.samples] == [(7.0, 1.0), (1.0, 2.0)]


# --- _created, HELP/TYPE, comments ------------------------------------------------------


def test_created_gauge_families_are_dropped() -> None:
    page = (
        "# HELP vllm:c_total Requests.\n# TYPE vllm:c_total counter\n"
        'vllm:c_total{model_name="m"} 4.0\n'
        "# HELP vllm:c_created Requests.\n# TYPE vllm:c_created gauge\n"
        'vllm:c_created{model_name="m"} 1.7e+09\n'
    )
    result = fresh(page)
    assert [s.name for s in result.samples] == ["vllm:c_total"]
    assert result.types == {"vllm:c_total": "counter"}
    assert result.errors == 0


def test_created_samples_inside_counter_and_histogram_families_are_dropped() -> None:
    page = (
        "# TYPE vllm:c counter\nvllm:c_total 1\nvllm:c_created 1.7e9\n"
        '# TYPE vllm:h histogram\nvllm:h_bucket{le="+Inf"} 1\nvllm:h_count 1\n'
        "vllm:h_sum 2\nvllm:h_created 1.7e9\n"
    )
    names = [s.name for s in fresh(page).samples]
    assert names == ["vllm:c_total", "vllm:h_bucket", "vllm:h_count", "vllm:h_sum"]


def test_help_and_type_without_samples_are_recorded() -> None:
    page = (
        "# HELP vllm:num_requests_running Number of requests.\n"
        "# TYPE vllm:num_requests_running gauge\n"
    )
    result = fresh(page)
    assert result.samples == []
    assert result.types == {"vllm:num_requests_running": "gauge"}
    assert result.helps == {"vllm:num_requests_running": "Number of requests."}
    assert result.errors == 0 and not result.cut_last_line


def test_help_text_is_unescaped() -> None:
    result = fresh("# HELP vllm:x a\\\\b\\nc\n")
    assert result.helps == {"vllm:x": "a\\b\nc"}


def test_types_of_other_families_are_kept_with_a_prefix() -> None:
    page = "# TYPE http_requests_total counter\nhttp_requests_total 3\n"
    result = fresh(page)
    assert result.types == {"http_requests_total": "counter"}
    assert result.samples == [] and result.skipped == 1


def test_plain_comments_are_ignored() -> None:
    page = "# just a note\n#another\n# HELP\nvllm:x 1\n"
    result = fresh(page)
    assert len(result.samples) == 1 and result.errors == 0


def test_unknown_type_is_an_error_but_the_samples_still_parse() -> None:
    result = fresh("# TYPE vllm:x sparkline\nvllm:x 1\n")
    assert len(result.samples) == 1 and result.errors == 1 and result.types == {}


def test_iteration_tokens_total_is_read_as_a_histogram() -> None:
    page = (
        "# TYPE vllm:iteration_tokens_total histogram\n"
        'vllm:iteration_tokens_total_bucket{le="1.0",model_name="m"} 3.0\n'
        'vllm:iteration_tokens_total_bucket{le="+Inf",model_name="m"} 4.0\n'
        'vllm:iteration_tokens_total_count{model_name="m"} 4.0\n'
        'vllm:iteration_tokens_total_sum{model_name="m"} 9.0\n'
    )
    result = fresh(page)
    assert result.types == {"vllm:iteration_tokens_total": "histogram"}
    assert {s.name for s in result.samples} == {
        "vllm:iteration_tokens_total_bucket",
        "vllm:iteration_tokens_total_count",
        "vllm:iteration_tokens_total_sum",
    }


# --- line ends, blank lines, cut and garbage lines --------------------------------------


def test_crlf_line_ends_parse() -> None:
    page = '# TYPE vllm:x gauge\r\nvllm:x{a="1"} 2\r\n\r\nvllm:y 3\r\n'
    result = fresh(page)
    assert [(s.name, s.value) for s in result.samples] == [("vllm:x", 2.0), ("vllm:y", 3.0)]
    assert result.types == {"vllm:x": "gauge"} and result.errors == 0


def test_blank_and_whitespace_lines_are_ignored() -> None:
    result = fresh("\n\nvllm:x 1\n   \n\t\nvllm:y 2\n\n")
    assert len(result.samples) == 2 and result.errors == 0


def test_indented_sample_line_parses() -> None:
    assert only(fresh("  vllm:x 1\n")).value == 1.0


@pytest.mark.parametrize(
    "cut",
    [
        'vllm:x_bucket{le="0.1",model_name="bigscience/b',
        "vllm:time_to",
        "vl",
        'vllm:x{a="1"}',
        "# TYPE vllm:num_preemptions_total coun",
    ],
)
def test_cut_last_line_is_skipped_counted_and_flagged(cut: str) -> None:
    for ending in ("", "\n"):
        result = fresh('vllm:a{b="c"} 1\n' + cut + ending)
        assert [s.name for s in result.samples] == ["vllm:a"]
        assert result.errors == 1
        assert result.cut_last_line


def test_garbage_line_in_the_middle_is_skipped_and_counted_without_cut_flag() -> None:
    page = "vllm:a 1\n**_vllm:b 2_**\n<html>\nvllm:c 3\n"
    result = fresh(page)
    assert [s.name for s in result.samples] == ["vllm:a", "vllm:c"]
    assert result.errors == 2 and not result.cut_last_line


def test_lines_of_other_families_are_skipped_not_parsed() -> None:
    page = 'http_requests_total{handler="/v1"} 3\nprocess_open_fds 45.0\nvllm:x 1\n'
    result = fresh(page)
    assert [s.name for s in result.samples] == ["vllm:x"]
    assert result.skipped == 2 and result.errors == 0


def test_prefix_none_returns_every_family() -> None:
    page = 'http_requests_total{handler="/v1"} 3\nvllm:x 1\n'
    assert [s.name for s in fresh(page, prefix=None).samples] == ["http_requests_total", "vllm:x"]


LINE_KINDS = [
    "vllm:x 1",
    "vllm:x 2",
    "vllm:x junk",
    "vllm:x ",
    'vllm:x{a="1"} 2',
    'vllm:x{a="1"} }',
    'vllm:x{a="1"}\t3',
    'vllm:x{a="1",b="\\"q"} 2',
    'vllm:y{b="2",a="1"} 4',
    'vllm:y{b="3",a="1"} 5',
    "# TYPE vllm:x gauge",
    "# TYPE vllm:x counter",
    "# HELP vllm:x h",
    "# TYPE vllm:x gau",
    "garbage",
    "0",
    "",
    "  vllm:z 1",
    "vllm:x 1 1000",
    "vllm:x 1\t1000",
    'vllm:x{a="1"} 2\t1000',
    'vllm:x{a="1"}"} 2',
    "vllm:x 1 2 3",
    'vllm:x{a="1"}',
    "http_x 1",
    "http_x\t1",
    "http_x junk",
    "vllm:x_created 5",
    "vllm:x_created junk",
    "vllm:x_created",
    'vllm:x_created{a="1"} 5',
    'vllm:x_created{a="1"} }',
]


@given(st.lists(st.lists(st.sampled_from(LINE_KINDS), max_size=8), min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_any_cache_history_gives_what_a_fresh_parse_gives(pages: list[list[str]]) -> None:
    cache = ParseCache()
    for lines in pages + pages:  # each page twice: cold, then warm or from a template
        text = "\n".join(lines)
        for prefix in ("vllm:", None):
            assert parse(text, prefix=prefix, cache=cache) == fresh(text, prefix)


# --- recognising a Prometheus page ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n</html>\n",
        '{"detail": "Not Found"}',
        "Internal Server Error",
        "\x00\x01\x02binary\xff",
        "",
    ],
)
def test_non_prometheus_text_is_recognised(text: str) -> None:
    assert not looks_like_prometheus(text)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_every_fixture_looks_like_prometheus(path: Path) -> None:
    assert looks_like_prometheus(path.read_text())


# --- caches -----------------------------------------------------------------------------


def test_new_values_on_the_same_layout_come_through_the_template() -> None:
    cache = ParseCache()
    page = '# TYPE vllm:x gauge\nvllm:x{a="1"} {v}\nvllm:x_created{a="1"} 1.7e9\n'
    for value in (1, 2, 3, 4):
        assert only(parse(page.replace("{v}", str(value)), cache=cache)).value == value
    assert len(cache.templates) == 1


def test_changed_layout_falls_back_to_the_careful_path() -> None:
    cache = ParseCache()
    for _ in range(3):
        parse("vllm:x 1\nvllm:y 2\n", cache=cache)
    assert [s.value for s in parse("vllm:x 1\nvllm:y 2 1000\n", cache=cache).samples] == [1, 2]
    result = parse("vllm:x 1\nvllm:y 2_0\n", cache=cache)
    assert len(result.samples) == 1 and result.errors == 1
    result = parse("vllm:x 1\n# TYPE vllm:y counter\n", cache=cache)
    assert result.types == {"vllm:y": "counter"}


def test_cache_stays_within_its_bound() -> None:
    cache = ParseCache(max_entries=10, max_templates=2)
    for i in range(50):
        page = "".join(f'vllm:x{{a="{i}",b="{j}"}} 1\n' for j in range(5))
        for _ in range(2):
            assert len(parse(page, cache=cache).samples) == 5
        assert len(cache.templates) <= 2
        assert all(len(t.series) <= 10 + 5 for t in cache.tables.values())


def test_fixture_parses_identically_cold_warm_and_from_the_template() -> None:
    text = GENERATED_033.read_text()
    cold = fresh(text)
    cache = ParseCache()
    results = [parse(text, cache=cache) for _ in range(3)]
    assert all(r == cold for r in results)
    assert len(cold.samples) > 300 and cold.errors == 0


# --- differential against prometheus_client ---------------------------------------------


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_samples_match_prometheus_client(path: Path) -> None:
    text = path.read_text()
    cache = ParseCache()
    for prefix in ("vllm:", None):
        expected = reference(text, prefix)
        assert ours(fresh(text, prefix)) == expected
        for _ in range(3):  # known series, then through the page's template
            assert ours(parse(text, prefix=prefix, cache=cache)) == expected


def test_shared_fixtures_are_there() -> None:
    assert GENERATED_033.exists()
    assert len(FIXTURE_FILES) >= 14


# Random prometheus_client registries, arbitrary text and near-miss lines: test_fuzz.py.
