"""The hints' predicted effects on the target page: each hint whose change the what-if
twin models, as the pricing job priced it on the stream's last 15 minutes
(``app.read.pricing``: read from its cache, never computed for the page), e.g.
"--max-num-seqs 16 (now 4): predicted: TTFT p99 2.4 s → 20 ms (18–23 ms), ITL p99 +0 %".
Until the job has priced them the panel says when they are due and asks again at each
refresh. Once priced, the diagnosis card shows each effect under its hint too."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, html

from app.diagnose.records import Diagnosis
from app.model import Window
from app.read.pageeffects import with_cached
from app.read.pricing import Pending, due_text
from app.ui import ids
from app.ui.components import data_attrs
from app.ui.context import PageContext

PENDING = "predicted effects of the hints: asking the twin's pricing job …"


def placeholder() -> html.Div:
    return html.Div(PENDING, id=ids.TARGET_EFFECTS, className="effects muted")


def cached(ctx: PageContext, d: Diagnosis, window: Window | None = None) -> Diagnosis:
    """``d`` with the effects its hints already have (no twin run), from ``window``'s
    p99s — the window the card shows — or in the incident's terms."""
    return with_cached(ctx.data, ctx.twin, d, window)


def register(app: Dash, ctx: PageContext) -> None:
    @app.callback(
        Output(ids.TARGET_EFFECTS, "children"),
        Output(ids.TARGET_EFFECTS, "className"),
        Input(ids.TARGET_STREAM, "data"),
        Input(ids.TARGET_MODEL, "value"),
        Input(ids.TARGET_TWIN_TICK, "n_intervals"),
    )
    def effects(stream: dict[str, Any] | None, model: str | None, _n: int | None) -> Any:
        if not stream or model is None:
            return "", "effects muted"
        d = ctx.pricer.effects(stream["target"], model)
        if d is None:
            return "", "effects muted"
        if isinstance(d, str):
            return d, "effects muted"
        if isinstance(d, Pending):
            text = f"predicted effects of the hints: {due_text(d, ctx.data.now())}"
            return text, "effects muted pending"
        items = [
            html.Li(
                [html.Code(h.action), html.Span(": "), h.effect.text()],
                className=" ".join(
                    ["effect", str(h.effect.verdict or "")]
                    + (["unreliable"] if h.effect.unreliable is not None else [])
                ).strip(),
                **data_attrs(
                    hint=h.id,
                    verdict=str(h.effect.verdict or ""),
                    regime="steady" if h.effect.backlog is None else "growing",
                ),
            )
            for h in d.hints
            if h.effect is not None
        ]
        head = html.Strong("Predicted effects of the hints (the twin, the last 15 minutes):")
        return [head, html.Ul(items)], "effects"
