"""Property-based fuzzing of the parser (app/scrape/parse.py) and of histogram_quantile
(app/windows/quantile.py).

Examples per property: ``PHASEWATCH_FUZZ_EXAMPLES`` (default 200, what ``make test``
runs); ``make fuzz`` runs them with 10,000 each.

* The parser never raises on any ``str`` — it has no error type of its own: a line it
  cannot read is counted in ``errors`` — whether the text is arbitrary, decoded from
  arbitrary bytes, or a real fixture page with near-miss mutations (long names and values
  among them); and its answer never depends on what its caches hold (the same cold and
  through caches every example of the module has filled), with label limits or without.
* Pages rendered by random prometheus_client registries parse to the samples
  prometheus_client's own parser reads (the ``vllm:`` ones, or all of them); with label
  limits, to the same samples, and a page is named over them exactly when one of the
  series prometheus_client reads is.
* ``histogram_quantile`` is monotone in ``q``, stays inside the bucket the rank falls in,
  and equals the plain reference below, written from Prometheus' documentation.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client import Counter as PromCounter
from prometheus_client import Gauge as PromGauge
from prometheus_client import Histogram as PromHistogram
from prometheus_client.exposition import generate_latest

from app.model import Quantile
from app.scrape.cache import ParseCache
from app.scrape.label_limits import LabelLimits
from app.scrape.parse import looks_like_prometheus, parse
from app.scrape.reader import PageReader
from app.scrape.result import ParseResult
from app.windows.quantile import histogram_quantile, histogram_quantiles
from tests.test_parse import FIXTURE_FILES, fresh, ours, reference

EXAMPLES = int(os.environ.get("PHASEWATCH_FUZZ_EXAMPLES", "200"))
settings.register_profile(
    "phasewatch-fuzz",
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("phasewatch-fuzz")

# --- the parser never raises --------------------------------------------------------------


def _key(result: ParseResult) -> tuple[object, ...]:
    """Everything a result says, NaN made equal to NaN (a NaN sample is not equal to itself)."""
    samples = [
        (s.name, s.labels, "NaN" if math.isnan(s.value) else s.value, s.timestamp)
        for s in result.samples
    ]
    return (
        samples,
        result.types,
        result.helps,
        result.errors,
        result.cut_last_line,
        result.skipped,
        result.over_limit,
    )


# Small enough that near-misses of real lines cross them (TRICKY holds long pieces).
SMALL_LIMITS = LabelLimits(labels=3, name_length=12, value_length=40)


@pytest.fixture(scope="module")
def warm() -> PageReader:
    """Caches shared by every example of the module, as a long-running scraper's are by
    every page it reads."""
    return PageReader()


@pytest.fixture(scope="module")
def limited() -> ParseCache:
    """As ``warm``, for pages parsed under ``SMALL_LIMITS``."""
    return ParseCache()


def _never_raises(text: str, warm: PageReader, limited: ParseCache | None = None) -> None:
    """Parse ``text`` cold and through the warm caches, without label limits and with
    ``SMALL_LIMITS``; cold and warm must agree, and the limits change nothing else."""
    for prefix in ("vllm:", None):
        cold = fresh(text, prefix)
        assert cold.errors >= 0 and cold.skipped >= 0
        assert not cold.cut_last_line or cold.errors > 0
        assert all(isinstance(s.value, float) for s in cold.samples)
        assert prefix is None or all(s.name.startswith(prefix) for s in cold.samples)
        assert cold.over_limit is None
        assert _key(parse(text, prefix=prefix, cache=warm.parse_cache)) == _key(cold)
        if limited is None:
            continue
        checked = parse(text, prefix=prefix, cache=ParseCache(), limits=SMALL_LIMITS)
        assert _key(checked)[:-1] == _key(cold)[:-1]
        over = any(SMALL_LIMITS.breach(s.name, s.labels) for s in cold.samples)
        assert over <= (checked.over_limit is not None)  # `_created` series count too
        again = parse(text, prefix=prefix, cache=limited, limits=SMALL_LIMITS)
        assert _key(again) == _key(checked)
    sniffed = looks_like_prometheus(text)
    assert sniffed in (True, False)
    assert warm.looks_like_prometheus(text) == sniffed


@FUZZ
@given(text=st.text())
def test_parse_never_raises_on_any_text(warm: PageReader, limited: ParseCache, text: str) -> None:
    _never_raises(text, warm, limited)


@FUZZ
@given(data=st.binary(), encoding=st.sampled_from(["utf-8", "latin-1", "utf-16"]))
def test_parse_never_raises_on_decoded_bytes(
    warm: PageReader, limited: ParseCache, data: bytes, encoding: str
) -> None:
    for errors in ("replace", "surrogateescape", "ignore"):
        try:
            text = data.decode(encoding, errors=errors)
        except UnicodeDecodeError:  # utf-16 with surrogateescape on an odd byte count
            continue
        _never_raises(text, warm, limited)


PAGES = [p.read_text() for p in FIXTURE_FILES]
FIXTURE_LINES = sorted({line for page in PAGES for line in page.split("\n") if line.strip()})
# What near-misses are made of: exposition syntax, number spellings, line ends, odd code points.
TRICKY = [*'{}",=\\ \t#:_.+-eE0\n\r', "NaN", "+Inf", "le", "_created", "\x00", "é", "\u2028"]
TRICKY += ["\ud800", "1_0", " 1700000000000", "# TYPE ", "# HELP "]
# Long label names and values, and a label too many (SMALL_LIMITS: 3, 12, 40).
TRICKY += ["a" * 13, "v" * 41, "x" * 5000, ',a="1",b="2",c="3"', ',long_label_name_x="1"']


@st.composite
def near_miss(draw: st.DrawFn, line: str) -> str:
    """``line`` after one to three edits: a character or token deleted, inserted,
    replaced, two characters swapped, a piece repeated, or the line cut."""
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "insert", "replace", "swap", "repeat", "cut"]))
        i = draw(st.integers(0, len(line)))
        j = min(len(line), i + draw(st.integers(1, 8)))
        token = draw(st.sampled_from(TRICKY))
        if op == "delete":
            line = line[:i] + line[j:]
        elif op == "insert":
            line = line[:i] + token + line[i:]
        elif op == "replace":
            line = line[:i] + token + line[j:]
        elif op == "swap" and j - i >= 2:
            line = line[:i] + line[j - 1] + line[i + 1 : j - 1] + line[i] + line[j:]
        elif op == "repeat":
            line = line[:j] + line[i:j] + line[j:]
        else:
            line = line[:i]
    return line


@FUZZ
@given(data=st.data())
def test_near_miss_lines_from_real_pages_never_raise(
    warm: PageReader, limited: ParseCache, data: st.DataObject
) -> None:
    lines = data.draw(st.lists(st.sampled_from(FIXTURE_LINES), min_size=1, max_size=20))
    lines = [data.draw(near_miss(line)) if data.draw(st.booleans()) else line for line in lines]
    _never_raises(data.draw(st.sampled_from(["\n", "\r\n"])).join(lines), warm, limited)


@FUZZ
@given(st.sampled_from(PAGES), st.data())
def test_a_known_page_with_near_misses_parses_as_if_never_seen(
    page: str, data: st.DataObject
) -> None:
    # A scraper's cache holds the page's template; the next page differs in a few lines.
    lines = page.split("\n")
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = data.draw(near_miss(lines[i]))
    mutated = "\n".join(lines)
    cache = ParseCache(eager_templates=data.draw(st.booleans()))
    for prefix in ("vllm:", None):
        for _ in range(2):
            parse(page, prefix=prefix, cache=cache)
        assert _key(parse(mutated, prefix=prefix, cache=cache)) == _key(fresh(mutated, prefix))
        assert _key(parse(page, prefix=prefix, cache=cache)) == _key(fresh(page, prefix))


# --- random prometheus_client registries round-trip ---------------------------------------

LABEL_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: not n.startswith("__") and n not in ("le", "quantile")
)
# Escapes (\\, \", \n), exposition syntax inside values, and any other code point
# prometheus_client can encode (surrogates cannot be written as UTF-8).
LABEL_VALUES = st.text(
    alphabet=st.sampled_from(list('ab01 _.,={}"\\\n\t#:-/') + ["é", "中"]),
    max_size=12,
) | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
# Names and values long enough to cross the label limits drawn against them.
LONG_LABEL_NAMES = LABEL_NAMES | st.text(alphabet="abc_", min_size=8, max_size=300).filter(
    lambda n: not n.startswith("__")
)
LONG_LABEL_VALUES = LABEL_VALUES | st.text(alphabet='ab "\\\n', min_size=20, max_size=3000)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
COUNTS = st.floats(min_value=0, max_value=1e12, allow_nan=False)
BOUNDS = st.floats(-1e6, 1e6) | st.floats(-1e300, 1e300) | st.floats(1e-9, 1e-3)


@st.composite
def registries(draw: st.DrawFn, long: bool = False) -> tuple[str, str]:
    """Render a random registry twice (values moved on in between): two scrapes.
    ``long``: with long label names and values."""
    label_name, label_value = (
        (LONG_LABEL_NAMES, LONG_LABEL_VALUES) if long else (LABEL_NAMES, LABEL_VALUES)
    )
    registry = CollectorRegistry()
    updates = []
    for index in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["counter", "gauge", "histogram"]))
        family = f"{draw(st.sampled_from(['vllm:', 'vllm:', 'http_']))}m{index}_{kind[0]}"
        label_names = draw(st.lists(label_name, max_size=3, unique=True))
        children = draw(
            st.lists(
                st.tuples(*[label_value for _ in label_names]),
                min_size=1 if label_names else 0,
                max_size=3,
                unique=True,
            )
        )
        if kind == "counter":
            metric: PromCounter | PromGauge | PromHistogram = PromCounter(
                family, "help", label_names, registry=registry
            )
        elif kind == "gauge":
            metric = PromGauge(
                family, 'help with "quotes" \\ and\nnewline', label_names, registry=registry
            )
        else:
            bounds = draw(st.lists(BOUNDS, min_size=1, max_size=8, unique=True))
            metric = PromHistogram(
                family, "help", label_names, buckets=sorted(bounds), registry=registry
            )
        for values in children or [()]:
            child = metric.labels(*values) if label_names else metric
            updates.append(
                (kind, child, draw(st.lists(COUNTS if kind != "gauge" else FLOATS, max_size=4)))
            )
    for kind, child, values in updates:
        _apply(kind, child, values[: len(values) // 2])
    first = generate_latest(registry).decode()
    for kind, child, values in updates:
        _apply(kind, child, values[len(values) // 2 :])
    return first, generate_latest(registry).decode()


def _apply(kind: str, child: object, values: list[float]) -> None:
    """Feed observations to a prometheus_client child metric."""
    for value in values:
        if kind == "counter":
            child.inc(value)  # type: ignore[attr-defined]
        elif kind == "gauge":
            child.set(value)  # type: ignore[attr-defined]
        else:
            child.observe(value)  # type: ignore[attr-defined]


def _shuffle_within_families(text: str, seed: int) -> str:
    """Reorder the sample lines inside each family block, as multiprocess output does."""
    rng = random.Random(seed)
    out: list[str] = []
    block: list[str] = []
    for line in text.split("\n"):
        if line.startswith("#") or not line:
            rng.shuffle(block)
            out.extend(block)
            block = []
            out.append(line)
        else:
            block.append(line)
    rng.shuffle(block)
    out.extend(block)
    return "\n".join(out)


@FUZZ
@given(registries(), st.integers(0, 2**16))
def test_random_registries_match_prometheus_client(pages: tuple[str, str], seed: int) -> None:
    cache = ParseCache()
    for text in (*pages, _shuffle_within_families(pages[1], seed)):
        for prefix in ("vllm:", None):
            expected = reference(text, prefix)
            assert ours(fresh(text, prefix)) == expected
            assert ours(parse(text, prefix=prefix, cache=cache)) == expected


LIMITS = st.builds(
    LabelLimits,
    labels=st.integers(0, 4),
    name_length=st.sampled_from([0, 8, 30, 128]),
    value_length=st.sampled_from([0, 10, 100, 1024]),
)


@FUZZ
@given(registries(long=True), LIMITS)
def test_label_limits_name_a_page_exactly_when_a_series_prometheus_client_reads_is_over(
    pages: tuple[str, str], limits: LabelLimits
) -> None:
    cache = ParseCache(eager_templates=True)
    for text in (*pages, pages[1]):  # the third parse reads through the template if any
        for prefix in ("vllm:", None):
            expected = reference(text, prefix)
            over = any(limits.breach(name, labels) for name, labels, _ in expected)
            cold = parse(text, prefix=prefix, cache=ParseCache(), limits=limits)
            warm = parse(text, prefix=prefix, cache=cache, limits=limits)
            for result in (cold, warm):
                assert ours(result) == expected  # the samples, as without limits
                assert (result.over_limit is not None) == over, result.over_limit
            assert warm.over_limit == cold.over_limit


@FUZZ
@given(registries(), st.integers(0, 2**32))
def test_cut_pages_match_prometheus_client_on_the_lines_it_accepts(
    pages: tuple[str, str], position: int
) -> None:
    text = pages[1]
    # The page holds _created times from the clock, so its length is not fixed.
    cut = text[: position % (len(text) + 1)]
    assert ours(fresh(cut)) == reference(cut)


# --- histogram_quantile -----------------------------------------------------------------


def plain_quantile(q: float, bounds: Sequence[float], cum: Sequence[float]) -> Quantile:
    """Prometheus' ``histogram_quantile`` on sorted finite ``bounds`` and non-decreasing
    cumulative counts ``cum`` (the last one the ``+Inf`` bucket), as its documentation
    describes it: the rank ``q · total`` is looked for in the first bucket whose count
    reaches it and interpolated linearly inside it; the lowest bucket starts at 0 when its
    bound is positive (and answers its bound when it is not); a rank beyond every finite
    bucket answers the highest finite bound ("≥")."""
    if math.isnan(q):
        return Quantile(math.nan)
    if q < 0 or q > 1:
        return Quantile(math.inf if q > 1 else -math.inf)
    total = cum[-1]
    if not bounds or total == 0:
        return Quantile(None)
    rank = q * total
    for i, upper in enumerate(bounds):
        if cum[i] >= rank:
            if i == 0 and upper <= 0:
                return Quantile(upper)
            lower = 0.0 if i == 0 else bounds[i - 1]
            below = 0.0 if i == 0 else cum[i - 1]
            inside = cum[i] - below
            if inside == 0:  # only q = 0 over an empty lowest bucket: 0/0, as in Go
                return Quantile(math.nan)
            return Quantile(lower + (upper - lower) * ((rank - below) / inside))
    return Quantile(bounds[-1], ge_top_bucket=True)


# Bounds as vLLM and clients write them (positive), or anywhere (a non-positive lowest one).
BOUND_LISTS = st.lists(st.floats(1e-6, 1e4), min_size=1, max_size=12, unique=True) | st.lists(
    st.floats(-1e3, 1e3), min_size=1, max_size=12, unique=True
)
# Increments of 0 or at least 1e-3 (counts, or rates of counts): never within the 1e-12
# relative delta that Prometheus treats as float noise, which the plain reference ignores.
INCREMENTS = st.integers(0, 10**6).map(float) | st.just(0.0) | st.floats(1e-3, 1e6)
QS = st.floats(0.0, 1.0) | st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0])


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@st.composite
def histograms(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    bounds = sorted(draw(BOUND_LISTS))
    increments = draw(st.lists(INCREMENTS, min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    cum: list[float] = []
    total = 0.0
    for inc in increments:
        total += inc
        cum.append(total)
    return bounds, cum


@FUZZ
@given(histograms(), st.lists(QS, min_size=1, max_size=8))
def test_quantile_equals_the_plain_reference(
    hist: tuple[list[float], list[float]], qs: list[float]
) -> None:
    bounds, cum = hist
    qs = [*qs, -0.5, 1.5, math.nan]
    got = histogram_quantiles(qs, bounds, cum)
    for q, answer in zip(qs, got, strict=True):
        expected = plain_quantile(q, bounds, cum)
        assert _close(answer.value, expected.value), (q, answer, expected)
        assert answer.ge_top_bucket == expected.ge_top_bucket, (q, answer, expected)
        assert _close(histogram_quantile(q, bounds, cum).value, answer.value)
    # The buckets' order does not matter (bound and count travel together).
    order = list(range(len(bounds)))
    random.Random(len(bounds)).shuffle(order)
    shuffled = histogram_quantiles(
        qs, [bounds[i] for i in order], [*(cum[i] for i in order), cum[-1]]
    )
    assert all(_close(a.value, b.value) for a, b in zip(shuffled, got, strict=True))


@FUZZ
@given(histograms(), st.lists(QS, min_size=2, max_size=10))
def test_quantile_is_monotone_in_q_and_inside_its_bucket(
    hist: tuple[list[float], list[float]], qs: list[float]
) -> None:
    bounds, cum = hist
    qs = sorted(qs)
    got = histogram_quantiles(qs, bounds, cum)
    if cum[-1] == 0:
        assert all(a.value is None for a in got)
        return
    values: list[float] = []
    for q, answer in zip(qs, got, strict=True):
        value = answer.value
        assert value is not None
        if math.isnan(value):  # 0/0: q = 0 over an empty lowest bucket, as in Prometheus
            assert q == 0 and cum[0] == 0
            continue
        rank = q * cum[-1]
        i = next((k for k, c in enumerate(cum[:-1]) if c >= rank), len(bounds))
        assert answer.ge_top_bucket == (i == len(bounds))
        upper = bounds[min(i, len(bounds) - 1)]
        lower = upper if i == len(bounds) or (i == 0 and upper <= 0) else 0.0
        if 0 < i < len(bounds):
            lower = bounds[i - 1]
        slack = 1e-12 * max(1.0, abs(upper), abs(lower))  # lower + (upper - lower) rounds
        assert lower - slack <= value <= upper + slack, (q, value, lower, upper)
        values.append(value)
    for a, b in zip(values, values[1:], strict=False):
        assert a <= b + 1e-12 * max(1.0, abs(b)), (a, b)
