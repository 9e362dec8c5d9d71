"""``diagnose(window, config)``: the rules, their precedence, confidence and hints.

Order of decision:

1. **insufficient_data** — a core signal is missing, the window has no deltas, too little
   of it is covered, or too many scrapes failed. Rules that could still run are reported
   as secondary findings. Never healthy.
2. **idle** — nothing running, waiting or finishing.
3. The problem classes that hold, by precedence: **stalled** (requests present, no
   step, token or finish in the whole window: no load reading explains that — whatever
   the gauges do, nothing is served — so the load rules' readings are not listed beside
   it), then
   **kv_pressure** (a full pool makes
   requests wait, which makes them queue: it explains the others), then **queue_bound**
   (requests had not started: capacity, not the model), then **prefill_bound** before
   **decode_bound**: a late first token is queueing or prefill work itself (TTFT ≈
   queue + prefill), and the prefill chunks that delay it also stretch the steps the
   streams wait on. The others that hold are secondary findings.
4. **healthy** only when both latency rules could be judged and neither fired. A rule
   that could not be judged (a lower bound under its SLO) leaves the window
   insufficient_data; so do failed scrapes that leave nothing wrong to report.

A probe's window (``app.windows.probefacts.is_probe_window``: a client's view of a server, no load
gauges) is judged by ``probe.diagnose_probe`` instead.

``ttft_slo`` and ``itl_slo`` on the diagnosis are the one judgement of each SLO
(``slo.verdict``: over / unproven / within) the alert rules and the UI read too.

``baseline`` (the ``Derived`` numbers of the stream's healthy baseline) lets the
sub-causes that are about what changed compare with it (``rules``); the pipeline
assembles it only once a window is a problem, so :func:`with_baseline` re-decides a
problem window's sub-cause when it arrives.

Confidence = margin (how clearly the deciding values passed their thresholds, 0.5 at
the threshold) × sqrt(observations / min_observations) capped at 1 × window coverage.
"""

from __future__ import annotations

import dataclasses
import math

from app.diagnose import rules
from app.diagnose.assemble import Decision, assemble, confidence
from app.diagnose.classes import PROBLEM_CLASSES, DiagnosisClass, situation
from app.diagnose.config import DEFAULT_CONFIG, DiagnosisConfig, Slo
from app.diagnose.facts import Facts, derive
from app.diagnose.hints import rank_hints
from app.diagnose.probe import diagnose_probe, is_probe_window
from app.diagnose.records import Diagnosis, Evidence, Roofline, fmt_value
from app.diagnose.roofline import roofline
from app.diagnose.server import ServerView, resolve
from app.diagnose.slo import Breach
from app.model import CORE_SIGNALS, Derived, Window

C = DiagnosisClass
# The problem classes in order of precedence (module docstring; ``classes.VOCABULARY``).
_PRECEDENCE = PROBLEM_CLASSES


def diagnose(
    window: Window,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    *,
    failed_scrapes: int = 0,
    attempted_scrapes: int | None = None,
    baseline: Derived | None = None,
) -> Diagnosis:
    """Classify one window of one stream, with evidence, findings, confidence and hints.

    ``failed_scrapes`` of ``attempted_scrapes`` (default: failed + intervals + 1) is what
    the caller knows about scrapes the window lacks; the window itself only has deltas
    between successful ones. ``baseline``: the stream's healthy baseline, if known.
    """
    if is_probe_window(window):  # a probe's stream: judged as a client sees the server
        return diagnose_probe(
            window, config, failed_scrapes=failed_scrapes, attempted_scrapes=attempted_scrapes
        )
    facts = derive(window)
    slo = config.slo_for(window.target, window.model_name)
    hardware = config.hardware_for(window.target)
    roof = roofline(hardware, facts.itl_mean) if hardware else None
    server = server_view(window, config)

    judged = rules.inputs(facts, config, slo, baseline)
    results = {c: rules.PROBLEM_RULES[c](judged) for c in _PRECEDENCE}
    idle = rules.idle(facts, config)
    quality, quality_ev, quality_notes = _data_quality(
        window, facts, config, failed_scrapes, attempted_scrapes
    )
    evidence = quality_ev + idle.evidence + tuple(e for r in results.values() for e in r.evidence)
    firing = [results[c] for c in _PRECEDENCE if results[c].holds]
    if firing and firing[0].cls is C.STALLED:
        firing = firing[:1]  # nothing progresses: the load rules' findings are not findings
    notes = _notes(facts, config, slo, results, roof) + quality_notes + server.notes
    decision = _decide(facts, quality, idle, firing, judged, results, config, failed_scrapes)
    return assemble(
        window,
        decision,
        facts=facts,
        config=config,
        slo=slo,
        roof=roof,
        evidence=evidence,
        notes=notes,
        latencies=facts,
        ttft_slo=judged.breach.verdict,
        itl_slo=judged.decode.verdict,
        hint_server=server,
        server=server,
        baseline=baseline,
        missing=facts.missing,
    )


def _decide(
    facts: Facts,
    quality: str,
    idle: rules.RuleResult,
    firing: list[rules.RuleResult],
    judged: rules.Inputs,
    results: dict[DiagnosisClass, rules.RuleResult],
    config: DiagnosisConfig,
    failed_scrapes: int,
) -> Decision:
    """The class (module docstring's order of decision); the rules that hold are kept
    as findings whatever it is."""
    coverage = min(1.0, facts.coverage)
    if quality:
        return Decision(C.INSUFFICIENT_DATA, "Insufficient data: " + quality, 1.0, None, firing)
    if idle.holds:
        return Decision(C.IDLE, idle.summary, round(coverage, 2), None, firing)
    if firing:
        primary = firing[0]
        sure = confidence(primary.margin, primary.n, config, coverage)
        return Decision(primary.cls, primary.summary, sure, primary, firing)
    slo = judged.slo
    cls, summary, sure = _healthy_or_unknown(facts, judged.decode, results, slo, config, coverage)
    if cls is C.HEALTHY and failed_scrapes > 0:
        cls, sure = C.INSUFFICIENT_DATA, 1.0
        summary = (
            f"Insufficient data: {failed_scrapes} failed scrape(s) in the window; "
            "nothing wrong was seen in the rest"
        )
    return Decision(cls, summary, sure, None, firing)


def server_view(window: Window, config: DiagnosisConfig) -> ServerView:
    """The settings of the window's server the hints start from: the page's
    ``cache_config_info`` (``window.info``), the target's configured settings
    (``config.server_for``), vLLM's defaults (``app.diagnose.server``)."""
    return resolve(config.server_for(window.target), window.info)


def _healthy_or_unknown(
    f: Facts,
    decode: Breach,
    results: dict[DiagnosisClass, rules.RuleResult],
    slo: Slo,
    config: DiagnosisConfig,
    coverage: float,
) -> tuple[DiagnosisClass, str, float]:
    """Healthy needs every rule judged; an unjudgeable one names what is unknown.

    Requests present with no progress at all are ``stalled`` (a rule of its own), unless
    the window may be inside one step (``rules.stalled``: its healthy baseline's largest
    steps take longer than the window): nothing was measured either, so not healthy.
    """
    unknown = sorted(
        {
            e.signal
            for r in results.values()
            if r.holds is None
            for e in r.evidence
            if e.holds is None and e.threshold is not None
        }
    )
    if unknown:
        return C.INSUFFICIENT_DATA, f"Insufficient data: cannot judge {', '.join(unknown)}", 1.0
    progress = f.ttft_n + f.itl_n + f.step_n + (f.finished or 0.0) + (f.generation_tokens or 0.0)
    stall = results[C.STALLED]
    if progress == 0 and stall.summary.startswith("Insufficient data"):
        return C.INSUFFICIENT_DATA, stall.summary, 1.0
    if progress == 0 and (f.running_avg or 0.0) >= 1:
        summary = (
            f"Insufficient data: {fmt_value(f.running_avg)} requests running on average but "
            f"no token produced in {f.covered:.0f} s while the gauges moved (a step longer "
            "than the window?)"
        )
        return C.INSUFFICIENT_DATA, summary, 1.0
    ratios, counts = [], []
    if f.ttft_n > 0 and f.ttft_p99 is not None:
        ratios.append(f.ttft_p99 / slo.ttft_p99)
        counts.append(f.ttft_n)
    per_token = decode.evidence.value
    if per_token is not None:
        ratios.append(per_token / slo.itl_p99)
        counts.append(f.tpot_n if decode.evidence.signal == "tpot_p99" else f.itl_n)
    worst = max(ratios, default=0.0)
    margin = rules.breach_margin(1.0 / worst) if worst > 0 else 0.75
    sure = confidence(margin, min(counts, default=math.inf), config, coverage)
    decode_name = {"tpot_p99": "TPOT p99", "itl_p99_per_token": "ITL p99 per token"}.get(
        decode.evidence.signal, "ITL p99"
    )
    summary = (
        f"Within SLO: TTFT p99 {fmt_value(f.ttft_p99, 's', f.ttft_p99_ge)} ≤ "
        f"{fmt_value(slo.ttft_p99, 's')}, {decode_name} "
        f"{fmt_value(per_token, 's', decode.evidence.ge)} ≤ "
        f"{fmt_value(slo.itl_p99, 's')}, no KV or queue pressure"
    )
    return C.HEALTHY, summary, sure


def _data_quality(
    window: Window,
    f: Facts,
    config: DiagnosisConfig,
    failed: int,
    attempted: int | None,
) -> tuple[str, tuple[Evidence, ...], tuple[str, ...]]:
    """(reason the window cannot be judged or "", evidence, notes)."""
    rule = str(C.INSUFFICIENT_DATA)
    reasons: list[str] = []
    missing_core = [s for s in CORE_SIGNALS if s in f.missing]
    ev = [
        Evidence(
            rule,
            "missing_core_signals",
            float(len(missing_core)),
            "=",
            0.0,
            not missing_core,
            note=", ".join(missing_core),
        )
    ]
    if missing_core:
        reasons.append(f"missing {', '.join(missing_core)}")
    if window.intervals <= 0:
        reasons.append("no scrape intervals in the window")
    ev.append(
        Evidence(
            rule,
            "coverage",
            f.coverage,
            ">=",
            config.min_coverage,
            f.coverage >= config.min_coverage,
            "ratio",
            note="share of window with deltas",
        )
    )
    if window.intervals > 0 and f.coverage < config.min_coverage:
        reasons.append(f"only {f.coverage:.0%} of the window covered by scrapes")
    total = attempted if attempted is not None else failed + window.intervals + 1
    share = failed / total if total > 0 else 0.0
    ev.append(
        Evidence(
            rule,
            "failed_scrape_share",
            share,
            "<=",
            config.max_failed_scrape_share,
            share <= config.max_failed_scrape_share,
            "ratio",
            note=f"{failed} of {total}",
        )
    )
    if share > config.max_failed_scrape_share:
        reasons.append(f"{failed} of {total} scrapes failed")
    notes: list[str] = []
    if window.reset:
        notes.append("a counter reset (restart) inside the window: increases start from zero")
    if failed > 0 and share <= config.max_failed_scrape_share:
        notes.append(f"{failed} of {total} scrapes failed in the window")
    return "; ".join(reasons), tuple(ev), tuple(notes)


def _notes(
    f: Facts,
    config: DiagnosisConfig,
    slo: Slo,
    results: dict[DiagnosisClass, rules.RuleResult],
    roof: Roofline | None,
) -> tuple[str, ...]:
    """Caveats and near-misses worth reading next to the class."""
    notes: list[str] = []
    for name, n in (("TTFT", f.ttft_n), ("ITL", f.itl_n)):
        if 0 < n < config.min_observations:
            notes.append(f"{name} p99 from only {n:.0f} observations: little more than the max")
    waiting = f.waiting_avg is not None and f.waiting_avg >= config.waiting_min
    if waiting and not any(results[c].holds for c in (C.KV_PRESSURE, C.QUEUE_BOUND)):
        notes.append(
            f"requests queue (waiting avg {fmt_value(f.waiting_avg)}) but TTFT is within "
            "SLO: the server is near its admission limit"
        )
    if (
        f.kv_max is not None
        and f.kv_max >= config.kv_usage_high
        and not results[C.KV_PRESSURE].holds
    ):
        notes.append(
            f"KV cache {fmt_value(f.kv_max, 'ratio')} full, nothing blocked or evicted yet"
        )
    if roof is not None and slo.itl_p99 < 1.0 / roof.ceiling_tok_s:
        notes.append(
            f"the ITL SLO {fmt_value(slo.itl_p99, 's')} is below the single-stream floor "
            f"{fmt_value(1.0 / roof.ceiling_tok_s, 's')} (1 / ceiling) on this hardware"
        )
    if roof is not None:
        notes.append(roof.text())
    return tuple(notes)


def with_baseline(
    d: Diagnosis,
    window: Window,
    baseline: Derived | None,
    config: DiagnosisConfig = DEFAULT_CONFIG,
) -> Diagnosis:
    """``d`` with its sub-cause decided against the stream's healthy ``baseline``.

    The pipeline assembles a baseline only once a window is a problem (the baseline is
    the healthy data before the run began), so this re-runs the primary class's rule
    with it and replaces that rule's evidence, the sub-cause, the summary and the hints;
    the class, findings and confidence stay — but a stall the baseline's steps explain
    (one step may be longer than the window, ``rules.stalled``) is judged again. The
    SLOs are the ones ``d`` was judged against; ``config`` gives the thresholds. Any
    other window, or no baseline: ``d``.
    """
    if baseline is None or d.cls not in rules.PROBLEM_RULES or is_probe_window(window):
        return d
    facts = derive(window)
    slo = Slo(ttft_p99=d.slo_ttft_p99, itl_p99=d.slo_itl_p99)
    result = rules.PROBLEM_RULES[d.cls](rules.inputs(facts, config, slo, baseline))
    if d.cls is C.STALLED and result.holds is False:
        # The baseline's steps are longer than the window: it may be inside one step.
        return diagnose(window, config, baseline=baseline)
    rule = str(d.cls)
    at = next((i for i, e in enumerate(d.evidence) if e.rule == rule), len(d.evidence))
    kept = [e for e in d.evidence if e.rule != rule]
    evidence = (*kept[:at], *result.evidence, *kept[at:])
    also = tuple(situation(f.cls, f.sub_cause) for f in d.secondary)
    key = situation(d.cls, result.sub_cause)
    server = server_view(window, config)
    hints = rank_hints(
        key, facts, config, d.roofline, also=also, server=server, slo=slo, baseline=baseline
    )
    return dataclasses.replace(
        d, sub_cause=result.sub_cause, summary=result.summary, evidence=evidence, hints=hints
    )


def with_changed_hints(
    d: Diagnosis,
    window: Window,
    baseline: Derived | None,
    config: DiagnosisConfig = DEFAULT_CONFIG,
) -> Diagnosis:
    """``d`` with its hints ranked again now that its ``changes`` are known: the hints
    that address the headline change first (``hints.focus``), their evidence against
    the ``baseline``. A window that is not a problem, or has no changes: ``d``."""
    if not d.changes or d.cls not in rules.PROBLEM_RULES or is_probe_window(window):
        return d
    facts = derive(window)
    slo = Slo(ttft_p99=d.slo_ttft_p99, itl_p99=d.slo_itl_p99)
    also = tuple(situation(f.cls, f.sub_cause) for f in d.secondary)
    hints = rank_hints(
        d.label,
        facts,
        config,
        d.roofline,
        also=also,
        server=server_view(window, config),
        slo=slo,
        baseline=baseline,
        changes=d.changes,
    )
    return dataclasses.replace(d, hints=hints)
