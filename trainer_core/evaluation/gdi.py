"""GDI, a "global desirability index" of a trajectory: a weighted sum of four components, each in
[0, 1] — its reward, its reuse in dataset builds, human feedback on it, and its recency.

The shape follows knowlyr-hub's GDI (``liuxiaotong/knowlyr-agent``,
``packages/hub/src/trajectoryhub/gdi.py``, docs/gdi.md cites the commit): the same four
dimensions, default weights, reuse normalisation, neutral feedback and recency decay. What
differs: the feedback component is human feedback (labels, scores, pairwise choices) rather than
a post-training improvement, a missing reward counts 0 as there, and weights that do not sum to 1
are normalised rather than refused.

Pure maths on plain numbers: no database.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

#: The four components, in the order they are shown.
COMPONENTS = ("reward", "reuse", "feedback", "recency")

#: knowlyr's defaults: intrinsic 0.35, utility 0.30, feedback 0.20, freshness 0.15.
DEFAULT_WEIGHTS: dict[str, float] = {
    "reward": 0.35,
    "reuse": 0.30,
    "feedback": 0.20,
    "recency": 0.15,
}
#: Reuse saturates at this many dataset builds (knowlyr's ``max_export_count``).
REUSE_SATURATION = 100
#: Recency = 1 / (1 + days × this) (knowlyr's ``FRESHNESS_DECAY_RATE``: 30 days → 0.4).
RECENCY_DECAY_PER_DAY = 0.05
#: The feedback of a trajectory nobody has judged (knowlyr's default feedback score).
NEUTRAL_FEEDBACK = 0.5


@dataclass(frozen=True, slots=True)
class Components:
    """The four components (each 0..1) and the weighted total."""

    reward: float
    reuse: float
    feedback: float
    recency: float
    total: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def parse_weights(text: str | dict[str, float] | None) -> dict[str, float]:
    """Weights from ``"reward=0.5,reuse=0.2,..."`` (or a dict); names left out keep their
    default. Normalised to sum 1. ValueError naming the problem: an unknown name, a value that is
    not a number ≥ 0, or weights that are all 0."""
    weights = dict(DEFAULT_WEIGHTS)
    if isinstance(text, dict):
        items = list(text.items())
    else:
        items = []
        for part in (text or "").split(","):
            if not part.strip():
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"GDI weight {part.strip()!r}: write name=value, e.g. reward=0.5.")
            items.append((name.strip(), value.strip()))
    for name, value in items:
        if name not in weights:
            raise ValueError(f"Unknown GDI component {name!r}: use {', '.join(COMPONENTS)}.")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"GDI weight {name}={value!r} is not a number.") from None
        if not number >= 0 or math.isinf(number):  # NaN too
            raise ValueError(f"GDI weight {name}={value!r} must be a finite number ≥ 0.")
        weights[name] = number
    total = sum(weights.values())
    if total <= 0:
        raise ValueError("The GDI weights are all 0: give at least one a positive weight.")
    return {name: weights[name] / total for name in COMPONENTS}


def reward_component(reward: float | None) -> float:
    """The reward clamped to [0, 1]; no reward counts 0."""
    if reward is None or math.isnan(reward):
        return 0.0
    return max(0.0, min(1.0, float(reward)))


def reuse_component(builds: int, saturation: int = REUSE_SATURATION) -> float:
    """log(1 + builds) / log(1 + saturation), at most 1: the first builds count most."""
    if builds <= 0:
        return 0.0
    return min(1.0, math.log1p(builds) / math.log1p(max(1, saturation)))


def feedback_component(signals: list[float]) -> float:
    """The mean of the human signals (each 0..1), or :data:`NEUTRAL_FEEDBACK` without any."""
    if not signals:
        return NEUTRAL_FEEDBACK
    return max(0.0, min(1.0, sum(signals) / len(signals)))


def recency_component(age_days: float, decay: float = RECENCY_DECAY_PER_DAY) -> float:
    """1 / (1 + age in days × decay); an age below 0 counts 0."""
    return 1.0 / (1.0 + max(0.0, age_days) * decay)


def gdi(
    *,
    reward: float | None,
    builds: int,
    feedback: list[float],
    age_days: float,
    weights: dict[str, float] | None = None,
) -> Components:
    """The components of one trajectory and their weighted total (``weights`` as
    :func:`parse_weights` returns them; the defaults when None)."""
    w = weights or DEFAULT_WEIGHTS
    parts = {
        "reward": reward_component(reward),
        "reuse": reuse_component(builds),
        "feedback": feedback_component(feedback),
        "recency": recency_component(age_days),
    }
    total = sum(w[name] * parts[name] for name in COMPONENTS)
    return Components(**{k: round(v, 6) for k, v in parts.items()}, total=round(total, 6))
