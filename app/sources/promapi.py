"""A small client for the Prometheus HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics).

Only what phasewatch needs: instant queries (``/api/v1/query``, which with a range
selector ``x[5m]`` returns the raw stored samples) and range queries
(``/api/v1/query_range``). Queries are sent as POST forms, so long selectors never hit
URL length limits. Authentication is a bearer token or basic auth; TLS verification can
be switched off for self-signed test set-ups; extra headers carry e.g. Mimir's
``X-Scope-OrgID``.

Errors: every failure — connection refused, timeout, a non-2xx answer, a body that is not
the API's JSON, ``"status": "error"`` — raises :class:`PrometheusError` whose message
says which, with Prometheus' own ``errorType``/``error`` when it gave them. The message
names the URL without its password (:func:`app.redact.redact_url`): it is logged and
shown.

Label selectors: :func:`parse_matchers` reads ``{job="vllm", namespace=~"prod-.*"}`` into
matchers so that they can be combined with a ``__name__`` matcher (:func:`selector`) or
filtered (``up`` has no ``model_name``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import httpx

from app.redact import redact_url

__all__ = [
    "Matcher",
    "PromAPI",
    "PrometheusError",
    "Series",
    "parse_matchers",
    "selector",
]


class PrometheusError(RuntimeError):
    """The Prometheus API could not answer a query; the message says why."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher: ``label`` ``op`` (``=``, ``!=``, ``=~``, ``!~``) ``value`` (raw)."""

    label: str
    op: str
    value: str  # already quoted, as written: "vllm" or 'vllm' or `vllm`

    def text(self) -> str:
        return f"{self.label}{self.op}{self.value}"


_MATCHER = re.compile(
    r"""\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*
        ("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*(?:,|$)""",
    re.X,
)


def parse_matchers(text: str) -> list[Matcher]:
    """``{a="b", c=~"d"}`` (or empty) → matchers; ValueError naming what is wrong."""
    body = text.strip()
    if not body:
        return []
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"selector {text!r}: expected label matchers in braces")
    body = body[1:-1].strip()
    out: list[Matcher] = []
    pos = 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"selector {text!r}: cannot read a matcher at {body[pos:]!r}")
        out.append(Matcher(m.group(1), m.group(2), m.group(3)))
        pos = m.end()
    return out


def selector(name_regex: str | None, matchers: list[Matcher]) -> str:
    """A vector selector: ``{__name__=~"REGEX", <matchers>}``."""
    parts = [] if name_regex is None else [f'__name__=~"{name_regex}"']
    parts += [m.text() for m in matchers]
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a matrix answer: its labels (with ``__name__``) and (time, value)s."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


def _float(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


class PromAPI:
    """``/api/v1/query`` and ``/api/v1/query_range`` against one base URL."""

    def __init__(
        self,
        url: str,
        *,
        bearer_token: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        tls_verify: bool = True,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        hdrs = {"User-Agent": "phasewatch", **(headers or {})}
        if bearer_token:
            hdrs["Authorization"] = f"Bearer {bearer_token}"
        self._own = client is None
        self._client = client or httpx.AsyncClient(verify=tls_verify, follow_redirects=False)
        self._headers = hdrs
        self._auth = httpx.BasicAuth(*basic_auth) if basic_auth else None
        self._timeout = timeout

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def _post(self, path: str, form: dict[str, str]) -> Any:
        url = f"{self.url}/api/v1/{path}"
        shown = redact_url(url)  # errors are logged and shown: no password in them
        try:
            resp = await self._client.post(
                url,
                data=form,
                headers=self._headers,
                auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT,
                timeout=self._timeout,
            )
        except httpx.TimeoutException as exc:
            raise PrometheusError(f"{shown}: timed out after {self._timeout:g} s") from exc
        except httpx.HTTPError as exc:
            detail = redact_url(str(exc))
            raise PrometheusError(f"{shown}: {type(exc).__name__}: {detail}") from exc
        try:
            body = resp.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("status") == "error":
            raise PrometheusError(
                f"{shown}: {body.get('errorType', 'error')}: {body.get('error', '')} "
                f"(HTTP {resp.status_code}; query {form.get('query', '')[:200]!r})"
            )
        if not resp.is_success:
            raise PrometheusError(f"{shown}: HTTP {resp.status_code}: {resp.text[:200]!r}")
        if not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusError(f"{shown}: not a Prometheus API answer: {resp.text[:200]!r}")
        return body.get("data")

    async def query(self, expr: str, time: float) -> tuple[str, Any]:
        """An instant query at ``time``: ``(resultType, result)`` as the API gives them."""
        data = await self._post("query", {"query": expr, "time": _ts(time)})
        return str(data["resultType"]), data["result"]

    async def query_matrix(self, expr: str, time: float) -> list[Series]:
        """An instant query whose answer is a matrix (a range selector: raw samples)."""
        kind, result = await self.query(expr, time)
        if kind != "matrix":
            raise PrometheusError(f"expected a matrix from {expr!r}, got {kind}")
        return _matrix(result)

    async def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """``/api/v1/query_range``: values at ``start + k*step <= end``."""
        return _matrix(await self.query_range_result(expr, start, end, step))

    async def query_range_result(
        self, expr: str, start: float, end: float, step: float
    ) -> list[Any]:
        """:meth:`query_range`'s answer as the API's JSON gives it (``[{"metric": {…},
        "values": [[t, "v"], …]}, …]``), for a reader that needs no series objects."""
        data = await self._post(
            "query_range",
            {"query": expr, "start": _ts(start), "end": _ts(end), "step": repr(float(step))},
        )
        if data.get("resultType") != "matrix":
            raise PrometheusError(f"expected a matrix from query_range, got {data!r:.200}")
        return list(data["result"] or [])

    async def scalar(self, expr: str, time: float) -> float | None:
        """An instant query with one value (vector of one, or scalar); None when empty."""
        kind, result = await self.query(expr, time)
        if kind == "scalar":
            return _float(result[1])
        if kind == "vector" and result:
            return _float(result[0]["value"][1])
        return None


def _ts(t: float) -> str:
    """A time parameter: Unix seconds with millisecond precision (what Prometheus keeps)."""
    return f"{t:.3f}"


def _matrix(result: Any) -> list[Series]:
    out = []
    for item in result or []:
        # The decoded JSON object is ours: its names and values are str already.
        labels = item.get("metric") or {}
        points = [(float(t), _float(v)) for t, v in item.get("values") or []]
        out.append(Series(labels, points))
    return out
