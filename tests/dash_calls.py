"""Ask a page's Dash callback as the browser asks it, over HTTP, against the real app."""

from __future__ import annotations

from typing import Any

import httpx


def dash_callback(base: str, output: str, values: dict[tuple[str, str], Any], changed: str) -> str:
    """The answer of the callback whose outputs include ``output`` (``"id.property"``),
    with its inputs and states set from ``values`` (``(id, property) → value``; None where
    not given) and ``changed`` as the property that fired it."""
    deps = httpx.get(base + "/ui/_dash-dependencies", timeout=10).json()
    dep = next(d for d in deps if output in d["output"])

    def fill(items: list[dict[str, str]]) -> list[dict[str, Any]]:
        return [{**i, "value": values.get((i["id"], i["property"]))} for i in items]

    outputs = [
        {"id": part.split(".")[0], "property": part.split(".")[1]}
        for part in dep["output"].strip(".").split("...")
    ]
    body = {
        "output": dep["output"],
        "outputs": outputs,
        "inputs": fill(dep["inputs"]),
        "state": fill(dep["state"]),
        "changedPropIds": [changed],
    }
    r = httpx.post(base + "/ui/_dash-update-component", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.text
