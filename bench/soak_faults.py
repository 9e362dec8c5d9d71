"""The faults a soak (bench/soak.py) switches on and off, and how it sees them shown.

Target faults are paths of one tests/faults.py server; ``refused`` is a second server
that stops listening; ``receiver_503`` is the webhook receiver answering 503. A fault is
seen when ``/api/v1/targets`` shows its error kind for a scrape that started after the
switch (a restart: an interval marked ``reset``; the receiver: its error kind in
``/api/v1/health/components``).
"""

from __future__ import annotations

import argparse
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.faults import FaultServer

# Faults that last until healed: FaultServer mode and parameters → the error kind shown.
STATES: dict[str, tuple[str, dict[str, Any], str]] = {
    "hang": ("hang", {}, "timeout"),
    "http_500": ("status", {"status": 500}, "http_status"),
    "http_404": ("status", {"status": 404}, "http_status"),
    "html": ("html", {}, "not_prometheus"),
    "junk": ("junk", {}, "not_prometheus"),
    "truncated": ("truncated", {}, "truncated"),
    "huge": ("huge", {}, "too_large"),
    "huge_stream": ("huge_stream", {}, "too_large"),
    "gzip_bomb": ("gzip_bomb", {}, "too_large"),
    "flap": ("flap", {}, "http_status"),
}
# Faults that happen once: the target restarts (counters from 0), or its TTFT buckets change.
EVENTS = {"restart": "reset", "layout_change": "bucket_layout_changed"}
KINDS = [*STATES, *EVENTS, "refused", "receiver_503"]


@dataclass
class Slot:
    """A fault target: its name, its path on the fault server, what it is doing now."""

    name: str
    path: str
    fault: str = "ok"
    since: float = 0.0
    events: list[tuple[str, float]] = field(default_factory=list)


class Soak:
    """The faults, their switching and what the service showed of them."""

    def __init__(
        self, args: argparse.Namespace, srv: FaultServer, gone: FaultServer, hooks: FaultServer
    ) -> None:
        self.args, self.srv, self.gone, self.hooks = args, srv, gone, hooks
        self.slots = [Slot(f"fault-{i:03d}", f"/fault-{i}") for i in range(args.fault_targets - 2)]
        self.api = ""  # the service's /api/v1, once it listens
        self.rng = random.Random(args.seed)
        kinds = [*STATES, *EVENTS]
        self.rng.shuffle(kinds)
        self.cycle = itertools.cycle(kinds)
        self.injected: set[str] = set()
        self.seen: set[str] = set()
        self.gone_since: float | None = None
        self.hook_since: float | None = None
        self.api_failures = 0
        # A scrape this long after a switch surely started after it, whether its time is
        # its round's start or its end (a round lasts the scrape timeout and a little).
        self.lag = args.timeout + 1.0
        # Each state lasts at least this long, so that a round starts after the switch, ends
        # and is looked at before the next one.
        self.hold = 2 * args.interval + args.timeout + 3.0
        self.hook_hold = self.hold
        self.trace: list[str] = []  # what was switched and what health showed, in order
        self.shown: dict[str, str | None] = {}

    def switch(self, now: float) -> None:
        """Switch faults on and off at random; the first time, every one of them at once."""
        first = not self.injected
        share = 1.0 if first else self.args.switch_share
        for slot in self.slots:
            if now - slot.since < self.hold or self.rng.random() >= share:
                continue
            slot.since = now
            if slot.fault != "ok":
                self.srv.set(slot.path, "ok")
                slot.fault = "ok"
                self.trace.append(f"{now:.2f} {slot.name} ok")
                continue
            kind = next(self.cycle)
            self.injected.add(kind)
            self.trace.append(f"{now:.2f} {slot.name} {kind}")
            if kind in STATES:
                mode, params, _ = STATES[kind]
                self.srv.set(slot.path, mode, **params)
                slot.fault = kind
            elif kind == "restart":
                self.srv.restart(slot.path)
                slot.events.append((kind, now))
            else:
                route = self.srv.route(slot.path)
                self.srv.set(slot.path, "ok", layout=1 - route.layout)
                slot.events.append((kind, now))
        if self.gone_since is None and self.rng.random() < share:
            self.gone.refuse()
            self.gone_since = now
            self.injected.add("refused")
            self.trace.append(f"{now:.2f} fault-gone-* refused")
        elif self.gone_since is not None and now - self.gone_since >= self.hold:
            self.gone.listen()
            self.gone_since = None
            self.trace.append(f"{now:.2f} fault-gone-* ok")
        if self.hook_since is None and (first or self.rng.random() < share / 3):
            self.hooks.set("/hook", "status", status=503)
            self.hook_since = now
            self.hook_hold = 4 * self.hold  # until a send fails (alerts come every 15 s)
            self.injected.add("receiver_503")
            self.trace.append(f"{now:.2f} receiver 503")
        elif self.hook_since is not None and now - self.hook_since >= self.hook_hold:
            self.hooks.set("/hook", "ok")
            self.hook_since = None
            self.trace.append(f"{now:.2f} receiver ok")

    def heal(self) -> None:
        for slot in self.slots:
            self.srv.set(slot.path, "ok")
            slot.fault = "ok"
        self.gone.listen()
        self.gone_since = None
        self.hooks.set("/hook", "ok")
        self.hook_since = None

    def get(self, path: str, **params: Any) -> Any:
        try:
            return httpx.get(self.api + path, params=params, timeout=10).json()
        except (httpx.HTTPError, ValueError):
            self.api_failures += 1
            return None

    def look(self) -> None:
        """Note the faults that target and component health show now."""
        targets = self.get("/targets", limit=10_000)  # the API's largest page: every target
        if targets is None:
            return
        by_name = {t["name"]: t for t in targets}
        for slot in self.slots:
            t = by_name.get(slot.name) or {}
            scraped = t.get("last_scrape") or 0.0
            fresh = scraped > slot.since + self.lag
            kind = t.get("last_error_kind")
            if self.shown.get(slot.name, "") != kind:
                self.shown[slot.name] = kind
                self.trace.append(f"{t.get('last_scrape')} {slot.name} shows {kind}")
            if slot.fault in STATES and fresh and kind == STATES[slot.fault][2]:
                self.seen.add(slot.fault)
            # Shown for one scrape only, and by no other fault: any scrape after the change.
            changed = [t for k, t in slot.events if k == "layout_change"]
            if kind == EVENTS["layout_change"] and changed and scraped > changed[-1]:
                self.seen.add("layout_change")
        if self.gone_since is not None:
            gone = [t for t in targets if t["name"].startswith("fault-gone-")]
            since = self.gone_since + self.lag
            if any(t["last_error_kind"] == "refused" and t["last_scrape"] > since for t in gone):
                self.seen.add("refused")
        if self.hook_since is not None:
            health = self.get("/health/components") or {}
            since = self.hook_since
            kinds = {
                r.get("last_error_kind")
                for r in health.get("receivers", [])
                if (r.get("last_error_at") or 0.0) > since
            }
            if "http_5xx" in kinds:
                self.seen.add("receiver_503")
                self.hook_hold = self.hold  # a send failed: it may heal at the next switch

    def restarts_seen(self) -> None:
        """A restart shows as an interval marked ``reset`` soon after it (unless the bucket
        layout changed around then too, which marks the same)."""
        step, span = self.args.interval, self.hold + self.args.interval
        for slot in self.slots:
            layouts = [t for k, t in slot.events if k == "layout_change"]
            for kind, t in slot.events:
                if kind != "restart" or any(abs(t - u) < 2 * span for u in layouts):
                    continue
                got = self.get(
                    "/windows", target=slot.name, start=t, end=t + span, window=step, step=step
                )
                if got and any(w.get("reset") for w in got):
                    self.seen.add("restart")
                    return

    def rounds(self, base: str) -> dict[str, int]:
        """Scrape rounds missed and per-target gaps, from the service's own /metrics."""
        try:
            text = httpx.get(base + "/metrics", timeout=10).text
        except httpx.HTTPError:
            self.api_failures += 1
            return {}
        out = {}
        for name in ("rounds_missed", "gaps"):
            metric = f"phasewatch_scrape_{name}_total "
            values = [line.split()[-1] for line in text.splitlines() if line.startswith(metric)]
            out[f"scrape_{name}"] = int(float(values[0])) if values else -1
        return out
