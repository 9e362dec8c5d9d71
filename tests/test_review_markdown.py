"""Markdown that reads as written: escaping by context, and the review's hostile names (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.read.markdown_text import cell, code, text
from app.read.review.render import to_markdown
from app.read.review.report import AlertEvent, build_review
from tests.test_review_report import _incident

HOSTILE = ("<img src=x onerror=alert(1)>", "[x](http://evil)", "![i](http://evil/p.png)")


def _html(md: str) -> str:
    """CommonMark with GitHub's tables and strikethrough, raw HTML allowed (as GitHub
    parses it before sanitising)."""
    markdown_it = pytest.importorskip("markdown_it")
    return str(markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md))


def test_prose_keeps_gt_parentheses_and_snake_case_as_they_are() -> None:
    prose = "TTFT p99 7.28 s > 2.00 s, 100% of it queueing (waiting avg 1,332); queue_bound"
    assert text(prose) == prose
    assert text("kv < 90%, a - b, 1. x, #3, x_y_z, 5!") == "kv < 90%, a - b, 1. x, #3, x_y_z, 5!"


def test_prose_escapes_only_what_would_start_markup_where_it_stands() -> None:
    assert text("[x](http://evil)") == r"\[x](http\://evil)"
    assert text("<img src=x> & &amp; <b") == r"\<img src=x> & \&amp; \<b"
    assert text("*a* _b_ `c` ~~d~~ $e$ www.x.io") == r"\*a\* \_b\_ \`c\` \~\~d\~\~ \$e\$ www\.x.io"
    assert text(r"a\b \* c") == r"a\b \\\* c"
    assert text("line\nbreak") == "line break"
    # At the start of a line: what would open a block, and nothing else.
    assert text("> 2 s", line_start=True) == r"\> 2 s"
    assert text("# 1", line_start=True) == r"\# 1"
    assert text("- x", line_start=True) == r"\- x"
    assert text("1. x", line_start=True) == r"1\. x"
    assert text("2.00 s over", line_start=True) == "2.00 s over"
    assert text("--max-num-seqs 256", line_start=True) == "--max-num-seqs 256"


def test_identifiers_are_code_spans_whatever_they_hold() -> None:
    assert code("llama_3") == "`llama_3`"
    assert code("a`b") == "``a`b``"
    assert code("`x`") == "`` `x` ``"
    assert code("a``b`") == "``` a``b` ```"
    assert code("") == '`""`'
    assert cell("`a|b` c\nd") == r"`a\|b` c d"
    for value in (*HOSTILE, "a`b", "``", "x` <img src=y>"):
        rendered = _html(f"name: {code(value)}")
        assert rendered.count("<code>") == 1 and "<img" not in rendered and "<a " not in rendered


def test_the_review_shows_hostile_names_as_text() -> None:
    for evil in HOSTILE:
        ds = [replace(d, model_name=evil, target="a|b") for d in _incident()]
        alert = AlertEvent(
            "PhasewatchQueueBound", "a|b", evil, "warning", 80.0, 130.0, f"queue on {evil}"
        )
        review = build_review(
            ds, source=evil, selector=evil, start=0, end=135, window=60, step=15, alerts=[alert]
        )
        md = to_markdown(review)
        assert f"## {code(evil)} @ `a|b`" in md
        rendered = _html(md)
        assert "<img" not in rendered and "<a " not in rendered, rendered
        (row,) = [line for line in md.splitlines() if line.startswith("| PhasewatchQueueBound")]
        assert row.count(" | ") == 5, row  # the pipes in the names do not split the row
