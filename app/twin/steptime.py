"""The twin's step time: one engine iteration on the roofline of ``docs/concepts.md``
(pure).

``step = max(per_token · new tokens, base + per_context · cached tokens read) + per_seq ·
sequences`` (seconds). A step reads the weights once (``base``, with the fixed per-step
overhead) and the K/V of every scheduled sequence's context (``per_context``): decode is
bandwidth-bound, so extra sequences are almost free — until the tokens the step computes
(``per_token``: a prompt chunk) cost more than the reads, and the step is compute-bound.
``per_seq`` is the little each sequence adds (sampling, bookkeeping). BLIS fits a line of
the same quantities from request traces; here the roofline is fitted from windows.

The observations (``app.twin.stepobs.observations``), each a window of the span:

* **decode**: the mean inter-token gap ≈ the mean step a decoding sequence waits for:
  a share ``q`` of the steps carried a prompt chunk of ``T`` tokens (from the prompt
  tokens computed and the steps counted), the rest only decodes;
* **busy**: in a window where the engine never idled, its steps fill the window: the
  mean step is the covered seconds over the steps counted (``iteration_tokens``' count) —
  the same equation as a decode gap's, free of preemption stalls;
* **prefill**: the mean prefill time of a request (``request_prefill_time``: from its
  first scheduling to its first token) ≈ the steps that computed its uncached prompt in
  chunks of at most ``max_num_batched_tokens``.

Each step in an equation is on one side of the roofline — compute-bound or
memory-bound — and on its side the step is a line in the four terms, so the equations are
linear: ``y ≈ steps·base + seqs·per_seq + tokens·per_token + ctx·per_context`` with the
memory-bound steps' count and context in ``steps``/``ctx`` and the compute-bound steps'
tokens in ``tokens``. The sides are found by iteration: first every chunk step is taken as
compute-bound and every decode-only step (a token per running sequence) as memory-bound,
then each step, decode-only ones included, is put on the side the fitted terms give it —
the side the engine will price it on — and the fit is made again (``ROUNDS``); where the
sides do not settle (a few windows of one load level can make the rounds cycle), the
round's model that explains the observations best, each step on its own side, is kept.
Weighted least squares on relative errors, with a weak pull (ridge) toward a prior per
term; a slope the data do not pin down — negative, or less than
``MIN_T`` standard errors from 0 (its feature moves with another, or too little) — keeps
its prior, said in a warning (one load level gives no batch-size slope: the step is
taken as flat in the batch, as a bandwidth-bound decode is). Of two weak slopes the fixed
charge of a compute-bound step (``compute_base``) goes back to its prior before the price
of a prompt token: one prompt mix cannot tell them apart, and a fixed charge over the
memory floor would price every decode step as compute-bound. No term is negative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

TERMS: tuple[str, ...] = ("base", "per_seq", "per_token", "per_context", "compute_base")
# The model's shape, held at its priors by the fit: the overlap of its two sides, and
# attention's compute per pair (:class:`StepModel`).
SHAPE: tuple[str, ...] = ("overlap", "attention")
# A prior of ``per_context`` as a share of ``base`` (a cached token's read against the
# weights' read): where the data do not price the K/V read, it is tied to the base so.
POOL_READ = "pool_read"
Row = tuple[float, float, float, float, float]
RIDGE = 1e-3


@dataclass(frozen=True, slots=True)
class StepModel:
    """Seconds per step (module docstring). Duck-types the simulator's ``Physics`` for
    the engine: ``step_time``, ``overhead_s``, ``draft_time``.

    ``overlap``: the share of the smaller side of the roofline a step still pays (a step
    near the ridge reaches neither peak: at the ridge it costs ``1 + overlap`` times
    either side; a mixed step pays both, its chunk's compute and its decodes' reads).
    ``attention``: a prompt token's attention to one token of context, in prompt tokens'
    compute (``4·layers·hidden`` over ``2·params`` FLOPs: about ``1 / (6·hidden)``).
    Both are physics priors the fit holds fixed."""

    base: float
    per_seq: float
    per_token: float
    per_context: float
    compute_base: float = 0.0
    overlap: float = 0.0
    attention: float = 0.0

    @property
    def overhead_s(self) -> float:
        return self.base

    def step_time(
        self, new_tokens: int, attn_pairs: float, context_tokens: int, num_seqs: int
    ) -> float:
        """``attn_pairs``: every new token's context, summed (the engine's count, which
        holds the decodes' too: their context is ``context_tokens`` and is read, not
        computed, so it is taken off)."""
        memory = self.base + self.per_context * context_tokens
        pairs = attn_pairs - context_tokens if attn_pairs > context_tokens else 0.0
        compute = self.compute_base + self.per_token * (new_tokens + self.attention * pairs)
        if compute > memory:
            return compute + self.overlap * memory + self.per_seq * num_seqs
        return memory + self.overlap * compute + self.per_seq * num_seqs

    def draft_time(self, tokens: int, cost: float) -> float:
        return 0.0

    def scaled(self, k: float) -> StepModel:
        return replace(
            self,
            base=self.base * k,
            per_seq=self.per_seq * k,
            per_token=self.per_token * k,
            per_context=self.per_context * k,
            compute_base=self.compute_base * k,
        )

    def to_dict(self) -> dict[str, float]:
        return {t: float(f"{getattr(self, t):.4g}") for t in (*TERMS, *SHAPE)}


@dataclass(frozen=True, slots=True)
class Observation:
    """One window's equation (module docstring): ``y`` seconds, ``weight`` its trust.

    ``running``: sequences in a step; ``context``: cached tokens a step reads. A decode or
    busy observation is one mean step, of which a share ``chunk_share`` carried a prompt
    chunk of ``prompt`` tokens beside ``others`` decodes. A prefill observation is one
    request's prefill: a prompt of ``prompt`` uncached tokens in chunks of at most
    ``budget``, ``others`` tokens of other sequences beside each chunk. ``spread``: the
    prompt's lengths as multipliers of ``prompt`` with mean 1 (equally likely points of
    its distribution), so that the step's roofline is averaged over the lengths and not
    taken at the mean length (a step is convex in its tokens: short prompts sit on the
    memory floor).
    """

    kind: str  # "decode" | "busy" | "prefill"
    y: float
    weight: float
    running: float
    context: float
    prompt: float = 0.0
    others: float = 0.0
    chunk_share: float = 0.0
    budget: float = math.inf
    spread: tuple[float, ...] = (1.0,)
    tile: int = -1  # the window's index in the span; -1: none
    # The cached prefix every prompt token attends to besides its own prompt (the prefix
    # cache's hits), and — a decode observation's chunk being at most the budget — the
    # uncached prompt the chunk is part of (0: the chunk is the whole prompt).
    prefix: float = 0.0
    whole: float = 0.0


@dataclass(frozen=True, slots=True)
class StepFit:
    model: StepModel
    # Per term: "data" (pinned by the observations) or "prior: <why>".
    sources: dict[str, str]
    residual: float  # weighted RMS relative error of the observations
    observations: int
    warnings: tuple[str, ...]


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-18:
            return None
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                for c in range(col, n + 1):
                    m[r][c] -= f * m[col][c]
    return [m[i][n] / m[i][i] for i in range(n)]


ROUNDS = 4
# A feature whose ratio to the steps it is counted over varies by less than this share of
# its mean over the observations cannot be told from the base: the prior is kept.
MIN_SPREAD = 0.05
# A slope is taken from the data when it lies this many standard errors above 0.
MIN_T = 2.0


def _compute_bound(m: StepModel | None, tokens: float, ctx: float) -> bool:
    return m is None or m.compute_base + m.per_token * tokens >= m.base + m.per_context * ctx


def _step_row(m: StepModel | None, tokens: float, ctx: float, steps: float, overlap: float) -> Row:
    """``steps`` steps of ``tokens`` new tokens each (attention's pairs counted in), on
    their side of the roofline, paying ``overlap`` of the other side."""
    if _compute_bound(m, tokens, ctx):
        return (overlap * steps, 0.0, tokens * steps, overlap * ctx * steps, steps)
    return (steps, 0.0, overlap * tokens * steps, ctx * steps, overlap * steps)


def _add(a: Row, b: Row, k: float = 1.0) -> Row:
    return (a[0] + k * b[0], a[1] + k * b[1], a[2] + k * b[2], a[3] + k * b[3], a[4] + k * b[4])


def _row(o: Observation, m: StepModel | None, shape: tuple[float, float]) -> Row:
    """An observation's coefficients of the terms (``TERMS``), each of its chunk steps put
    on the side of the roofline ``m`` gives it (compute-bound when ``m`` is None),
    averaged over the prompt's ``spread``; ``shape``: the model's overlap and attention.
    A prompt of ``P`` uncached tokens after a cached prefix of ``h`` attends to
    ``P·h + P²/2`` pairs, a ``k``-th of them a chunk."""
    overlap, attention = shape
    row: Row = (0.0, 0.0, 0.0, 0.0, 0.0)
    share = 1.0 / len(o.spread)
    if o.kind == "prefill":
        for u in o.spread:
            p = o.prompt * u
            chunks = max(1.0, math.ceil(p / o.budget))
            tokens = p / chunks + o.others + attention * p * (o.prefix + p / 2) / chunks
            step = _step_row(m, tokens, o.context, chunks, overlap)
            row = _add(row, _add(step, (0.0, chunks * max(o.running, 1.0), 0.0, 0.0, 0.0)), share)
        return row
    q = o.chunk_share
    # The decode-only steps (a token per running sequence) on their side of the roofline
    # too, as the engine prices them (``StepModel.step_time``); memory-bound at first.
    if m is None:
        decode: Row = (1.0 - q, 0.0, overlap * (1.0 - q) * o.running, (1.0 - q) * o.context,
                       overlap * (1.0 - q))  # fmt: skip
    else:
        decode = _step_row(m, o.running, o.context, 1.0 - q, overlap)
    row = _add(_add(decode, (0.0, o.running, 0.0, 0.0, 0.0)), row)
    if q > 0:
        for u in o.spread:
            chunk = min(o.prompt * u, o.budget)
            # A chunk in the middle of its prompt: the prefix and half the prompt before it.
            pairs = chunk * (o.prefix + max(chunk, (o.whole or o.prompt) * u) / 2)
            tokens = chunk + o.others + attention * pairs
            row = _add(row, _step_row(m, tokens, o.context, q, overlap), share)
    return row


def fit_step(obs: list[Observation], priors: dict[str, tuple[float, str]]) -> StepFit | None:
    """The terms that explain ``obs`` best (module docstring); ``priors[term]`` is
    ``(value, why)``. None without a decode or busy observation."""
    obs = [
        o
        for o in obs
        if o.y > 0
        and o.weight > 0
        and all(math.isfinite(f) for f in (o.running, o.context, o.prompt, o.others))
    ]
    if not any(o.kind != "prefill" for o in obs):
        return None
    shape = tuple(priors[k][0] if k in priors else 0.0 for k in SHAPE)
    overlap, attention = shape
    model: StepModel | None = None
    # Each round's model, priced with its own sides of the roofline; where the sides do
    # not settle (few windows: the rounds cycle), the one that explains the data best.
    tried: list[tuple[float, StepModel, dict[str, str]]] = []
    for _ in range(ROUNDS):
        rows = [(_row(o, model, (overlap, attention)), o) for o in obs]
        values, sources = _fit_terms(rows, priors)
        if values["base"] <= 0:
            values["base"] = max(min(o.y for o in obs if o.kind != "prefill") * 0.5, 1e-4)
        new = StepModel(**values, overlap=overlap, attention=attention)
        if new == model:
            break
        model = new
        tried.append((_residual(obs, model), model, sources))
    _, model, sources = min(tried, key=lambda t: t[0])
    warnings: list[str] = []
    if not any(_row(o, model, (0.0, attention))[2] > 0 for o in obs):
        warnings.append(
            "no step was compute-bound: a prompt token is priced by its prior ("
            + priors["per_token"][1]
            + ")"
        )
    return StepFit(model, sources, _residual(obs, model), len(obs), tuple(warnings))


def _fit_terms(
    rows: list[tuple[Row, Observation]],
    priors: dict[str, tuple[float, str]],
) -> tuple[dict[str, float], dict[str, str]]:
    """Least squares over the terms the rows can show (module docstring)."""
    values = {t: priors[t][0] for t in TERMS}
    sources = {t: f"prior: {priors[t][1]}" for t in TERMS}
    tie = priors[POOL_READ][0] if POOL_READ in priors else 0.0
    free = [k for k in range(len(TERMS)) if k == 0 or _varies(rows, k)]
    for k in free:
        sources[TERMS[k]] = "data"
    tied = rows
    if 3 not in free and tie > 0:
        tied = _tied(rows, tie)
    while free:
        fit = _least_squares(tied, free, values)
        if fit is None:
            break
        coef, t = fit
        weak = [(t[i], k) for i, k in enumerate(free) if k != 0 and (coef[i] < 0 or t[i] < MIN_T)]
        if not weak:
            for k, c in zip(free, coef, strict=True):
                values[TERMS[k]] = max(c, 0.0)
            break
        # compute_base before per_token: where the two cannot be told apart, a compute-
        # bound step's cost is its tokens' (docs/concepts.md), not a fixed charge.
        _, k = min(weak, key=lambda tk: (tk[1] != 4, tk[0]))
        free.remove(k)
        values[TERMS[k]] = priors[TERMS[k]][0]
        sources[TERMS[k]] = f"prior: {priors[TERMS[k]][1]} (the data do not pin this slope down)"
        if k == 3 and tie > 0:
            tied = _tied(rows, tie)
    if tied is not rows:
        # The K/V read the data could not price: the prior's share of the weight read.
        values["per_context"] = tie * values["base"]
        sources["per_context"] = f"prior: {priors[POOL_READ][1]}"
    return values, sources


def _tied(rows: list[tuple[Row, Observation]], tie: float) -> list[tuple[Row, Observation]]:
    """The rows with ``per_context`` held at ``tie × base``: its column folded into the
    base's, so the base is fitted with the K/V read the prior gives it."""
    return [((r[0] + tie * r[3], r[1], r[2], 0.0, r[4]), o) for r, o in rows]


def _varies(rows: list[tuple[Row, Observation]], k: int) -> bool:
    """Whether term ``k``'s coefficient moves between the rows by more than ``MIN_SPREAD``
    of its mean, relative to the base's (the rows' steps), so that it can be told from
    the base at all."""
    ratios = [r[k] / r[0] if r[0] > 0 else r[k] for r, _ in rows if r[k] > 0 or r[0] > 0]
    present = [x for x in ratios if x > 0]
    if len(present) < 2:
        return bool(present) and any(r[0] == 0 for r, _ in rows)
    mean = sum(ratios) / len(ratios)
    var = sum((x - mean) ** 2 for x in ratios) / len(ratios)
    return mean > 0 and math.sqrt(var) / mean >= MIN_SPREAD


def predict(o: Observation, m: StepModel) -> float:
    """An observation's seconds under ``m``."""
    r = _row(o, m, (m.overlap, m.attention))
    return float(sum(getattr(m, t) * r[k] for k, t in enumerate(TERMS)))


def _residual(obs: list[Observation], m: StepModel) -> float:
    w = sum(o.weight for o in obs)
    err = sum(o.weight * ((predict(o, m) - o.y) / o.y) ** 2 for o in obs)
    return math.sqrt(err / w)


def _least_squares(
    rows: list[tuple[Row, Observation]],
    free: list[int],
    values: dict[str, float],
) -> tuple[list[float], list[float]] | None:
    """Weighted relative least squares over the ``free`` terms, the others fixed at
    ``values``; each free term pulled weakly toward its prior value. Returns the
    coefficients and their t statistics (coefficient over its standard error; infinite
    with no residual degrees of freedom)."""
    n = len(free)
    ata = [[0.0] * n for _ in range(n)]
    atb = [0.0] * n
    fixed = [k for k in range(len(TERMS)) if k not in free]
    scaled: list[tuple[list[float], float, float]] = []
    for feats, o in rows:
        scale = 1.0 / o.y  # relative errors
        w = o.weight
        rest = o.y - sum(values[TERMS[k]] * feats[k] for k in fixed)
        row = [feats[k] * scale for k in free]
        target = rest * scale
        scaled.append((row, target, w))
        for i in range(n):
            atb[i] += w * row[i] * target
            for j in range(n):
                ata[i][j] += w * row[i] * row[j]
    for i, k in enumerate(free):
        # Ridge toward the prior, scaled by the column's own size so units do not matter.
        lam = RIDGE * max(ata[i][i], 1e-30)
        ata[i][i] += lam
        atb[i] += lam * values[TERMS[k]]
    coef = _solve(ata, atb)
    if coef is None:
        return None
    dof = len(rows) - n
    if dof <= 0:
        return coef, [math.inf] * n
    wsum = sum(w for _, _, w in scaled)
    sse = sum(w * (t - sum(r[i] * coef[i] for i in range(n))) ** 2 for r, t, w in scaled)
    # Weights are relative trust, not inverse variances: scale them to the observations.
    mean_w = wsum / len(scaled)
    sigma2 = sse / dof / mean_w
    t_stats = []
    for i in range(n):
        col = _solve(ata, [1.0 if j == i else 0.0 for j in range(n)])
        var = sigma2 * col[i] * mean_w if col is not None else math.inf
        t_stats.append(abs(coef[i]) / math.sqrt(var) if var > 0 else math.inf)
    return coef, t_stats
