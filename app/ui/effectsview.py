"""The hints' predicted effects on the target page: each hint whose change the what-if
twin models, priced on the stream's last 15 minutes when the page asks
(``app.read.pageeffects``; kept 5 minutes and shared with the service's alerts), e.g.
"--max-num-seqs 16 (now 4): predicted: TTFT p99 2.4 s → 20 ms (18–23 ms), ITL p99 +0 %".
Once priced, the diagnosis card shows each effect under its hint too."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, html

from app.diagnose.records import Diagnosis
from app.model import Window
from app.read.pageeffects import current_priced, with_cached
from app.ui import ids
from app.ui.components import data_attrs
from app.ui.context import PageContext

PENDING = "predicted effects of the hints: computing (the twin replays the last 15 minutes) …"


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
    )
    def effects(stream: dict[str, Any] | None, model: str | None) -> tuple[Any, str]:
        if not stream or model is None:
            return "", "effects muted"
        d = current_priced(ctx.data, ctx.twin, stream["target"], model)
        if d is None:
            return "", "effects muted"
        if isinstance(d, str):
            return d, "effects muted"
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
