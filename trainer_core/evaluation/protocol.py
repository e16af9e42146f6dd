"""The protocol of a learning claim, as a table: stages (base → SFT → GRPO, or arms of an
ablation) evaluated on the same test tasks at several training seeds, reported per seed and
pooled.

- Per stage and seed: successes / tasks and the 95% Wilson interval.
- Pooled: the same over every (seed, task) pair.
- Each comparison (a stage against the previous one and against the start; or two arms): the
  exact McNemar test per seed and pooled over all (seed, task) pairs — one binomial test on the
  pairs only one side solved — with the difference of success rates.
- Several comparisons are one family: their pooled p-values are Holm-corrected together
  (:func:`holm_family`); a suite that is not the primary one is corrected with its own family.
- :func:`verdict` says in a plain sentence whether a gain is significant.

Input is plain: ``{stage: {seed: {task_id: solved}}}``. Every seed of a stage must hold the
same tasks as the other stages at that seed (paired), else :class:`InputError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trainer_core.errors import InputError
from trainer_core.evaluation.compare import adjust, mcnemar
from trainer_core.evaluation.stats import wilson_interval

__all__ = [
    "Comparison",
    "ProtocolReport",
    "StageResult",
    "holm_family",
    "protocol_report",
    "verdict",
]

Outcomes = Mapping[int, Mapping[str, bool]]  # seed -> task id -> solved


@dataclass
class Rate:
    successes: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.successes / self.n if self.n else 0.0

    def text(self) -> str:
        return f"{self.rate:.3f} [{self.low:.3f}, {self.high:.3f}] ({self.successes}/{self.n})"


def _rate(successes: int, n: int) -> Rate:
    low, high = wilson_interval(successes, n)
    return Rate(successes, n, low, high)


@dataclass
class StageResult:
    name: str
    per_seed: dict[int, Rate]
    pooled: Rate


@dataclass
class Test:
    """An exact McNemar test: ``gains`` pairs only the later side solved, ``losses`` only the
    earlier; ``effect`` the difference of success rates."""

    gains: int
    losses: int
    n: int
    effect: float
    p_value: float
    p_adjusted: float | None = None


@dataclass
class Comparison:
    before: str
    after: str
    per_seed: dict[int, Test]
    pooled: Test

    @property
    def label(self) -> str:
        return f"{self.before} → {self.after}"


@dataclass
class ProtocolReport:
    suite: str
    seeds: list[int]
    stages: list[StageResult]
    comparisons: list[Comparison] = field(default_factory=list)
    alpha: float = 0.05
    notes: list[str] = field(default_factory=list)

    def stage(self, name: str) -> StageResult:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def comparison(self, before: str, after: str) -> Comparison:
        for c in self.comparisons:
            if (c.before, c.after) == (before, after):
                return c
        raise KeyError((before, after))

    def lines(self) -> list[str]:
        """The table as text lines (what the demo and the benchmarks print)."""
        seeds = self.seeds
        out = [f"{self.suite}: success per training seed and pooled (95% Wilson)"]
        width = max(len(s.name) for s in self.stages) + 2
        header = "".join(f"{f'seed {seed}':<19}" for seed in seeds)
        out.append(f"  {'stage':<{width}}{header}pooled")
        for s in self.stages:
            cells = "".join(
                f"{s.per_seed[seed].rate:.2f} [{s.per_seed[seed].low:.2f},"
                f" {s.per_seed[seed].high:.2f}]  "
                for seed in seeds
            )
            out.append(f"  {s.name:<{width}}{cells}{s.pooled.text()}")
        if self.comparisons:
            out.append(
                "  exact McNemar, pooled over (seed, task) pairs; Holm-corrected over the "
                f"{len(self.comparisons)} comparisons"
            )
            for c in self.comparisons:
                per = ", ".join(f"{c.per_seed[seed].effect:+.2f}" for seed in seeds)
                p = c.pooled
                out.append(
                    f"  {c.label:<{2 * width + 3}} {p.effect:+.3f} (per seed {per}); "
                    f"{p.gains} gained, {p.losses} lost; p = {p.p_value:.2g}, "
                    f"Holm p = {p.p_adjusted:.2g}"
                )
                out.append(f"    {verdict(c, self.alpha)}")
        out += [f"  note: {note}" for note in self.notes]
        return out


def _test(before: Sequence[bool], after: Sequence[bool]) -> Test:
    result = mcnemar(before, after)
    gains = sum(1 for x, y in zip(before, after, strict=True) if y and not x)
    losses = sum(1 for x, y in zip(before, after, strict=True) if x and not y)
    n = len(before)
    p = 1.0 if result.p_value is None else result.p_value
    return Test(gains, losses, n, (gains - losses) / n if n else 0.0, p)


def _paired(results: Mapping[str, Outcomes], a: str, b: str, seed: int) -> tuple[list, list]:
    one, two = results[a][seed], results[b][seed]
    if set(one) != set(two):
        missing = sorted(set(one) ^ set(two))[:3]
        raise InputError(
            f"{a!r} and {b!r} were not evaluated on the same tasks at seed {seed} "
            f"(e.g. {missing}); evaluate every stage on the same test tasks"
        )
    tasks = sorted(one)
    return [bool(one[t]) for t in tasks], [bool(two[t]) for t in tasks]


def compare(results: Mapping[str, Outcomes], before: str, after: str) -> Comparison:
    seeds = sorted(results[before])
    per_seed, all_before, all_after = {}, [], []
    for seed in seeds:
        x, y = _paired(results, before, after, seed)
        per_seed[seed] = _test(x, y)
        all_before += x
        all_after += y
    return Comparison(before, after, per_seed, _test(all_before, all_after))


def holm_family(comparisons: Sequence[Comparison]) -> None:
    """Holm-correct the pooled p-values of ``comparisons`` as one family (in place)."""
    adjusted = adjust([c.pooled.p_value for c in comparisons], "holm")
    for c, p in zip(comparisons, adjusted, strict=True):
        c.pooled.p_adjusted = p


def protocol_report(
    results: Mapping[str, Outcomes],
    *,
    suite: str,
    pairs: Sequence[tuple[str, str]] | None = None,
    alpha: float = 0.05,
    common_tasks: bool = False,
) -> ProtocolReport:
    """The table of ``results`` (stages in order). ``pairs`` to compare; default: each stage
    against the previous one and, from the third on, against the first. ``common_tasks``: at a
    seed where some stage played fewer tasks (an evaluation cut short), compare every stage on
    the tasks all of them played, and say so in the report's notes (else: InputError)."""
    names = list(results)
    if not names:
        raise InputError("no stage to report")
    seeds = sorted(results[names[0]])
    for name in names:
        if sorted(results[name]) != seeds:
            raise InputError(f"stage {name!r} has seeds {sorted(results[name])}, not {seeds}")
    notes: list[str] = []
    if common_tasks:
        results, notes = _common_tasks(results, seeds)
    stages = []
    for name in names:
        per_seed = {
            seed: _rate(sum(map(bool, results[name][seed].values())), len(results[name][seed]))
            for seed in seeds
        }
        pooled = _rate(
            sum(r.successes for r in per_seed.values()), sum(r.n for r in per_seed.values())
        )
        stages.append(StageResult(name, per_seed, pooled))
    if pairs is None:
        pairs = [(names[i - 1], names[i]) for i in range(1, len(names))]
        pairs += [(names[0], names[i]) for i in range(2, len(names))]
    comparisons = [compare(results, a, b) for a, b in pairs]
    holm_family(comparisons)
    return ProtocolReport(suite, seeds, stages, comparisons, alpha, notes)


def _common_tasks(results: Mapping[str, Outcomes], seeds: list[int]) -> tuple[dict, list[str]]:
    out: dict[str, dict[int, dict[str, bool]]] = {name: {} for name in results}
    notes = []
    for seed in seeds:
        shared = set.intersection(*(set(results[name][seed]) for name in results))
        for name in results:
            played = results[name][seed]
            if len(played) > len(shared):
                notes.append(
                    f"seed {seed}: {len(played) - len(shared)} of {name}'s tasks left out: "
                    f"not every stage played them (only {len(shared)} tasks compared)"
                )
            out[name][seed] = {task: played[task] for task in shared}
    return out, notes


def verdict(comparison: Comparison, alpha: float = 0.05) -> str:
    """One plain sentence: is the pooled change significant (after Holm)?"""
    p = comparison.pooled
    adjusted = p.p_value if p.p_adjusted is None else p.p_adjusted
    change = f"{abs(p.effect) * 100:.1f} points"
    if adjusted < alpha:
        direction = "better" if p.effect > 0 else "worse"
        return (
            f"{comparison.after} is significantly {direction} than {comparison.before} "
            f"({'+' if p.effect > 0 else '−'}{change}, Holm-corrected p = {adjusted:.2g})."
        )
    return (
        f"The difference between {comparison.before} and {comparison.after} "
        f"({'+' if p.effect >= 0 else '−'}{change}) is not significant "
        f"(Holm-corrected p = {adjusted:.2g} ≥ {alpha}): it may be noise."
    )
