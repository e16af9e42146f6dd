"""The simulated annotator: truth labels from the reference path, seeded label errors, and the
AUROC of step scores against its truth."""

from __future__ import annotations

import pytest

from trainer_core.calibration.simulated import (
    auroc,
    normalise,
    same_call,
    simulate_labels,
    truth_labels,
)
from trainer_core.errors import InputError
from trainer_core.recording.schema import Step, Trajectory
from trainer_core.tasks.model import ToolCall

REFERENCE = [
    ToolCall(tool="calculator", params={"expression": "12 + 30"}),
    ToolCall(tool="submit", params={"answer": "42"}),
]


def _trajectory(*calls: tuple[str, dict]) -> Trajectory:
    return Trajectory(
        steps=[Step(index=i, tool=tool, params=params) for i, (tool, params) in enumerate(calls)]
    )


def test_the_reference_path_is_good_with_numbers_and_spaces_normalised():
    played = _trajectory(("calculator", {"expression": "  12 + 30 "}), ("submit", {"answer": 42}))
    assert truth_labels(played, REFERENCE) == [True, True]
    assert same_call({"tool": "Submit", "params": {"answer": "42.0"}}, REFERENCE[1])
    assert not same_call({"tool": "submit", "params": {"answer": "43"}}, REFERENCE[1])
    assert normalise("ABC-1", key="order_id") == normalise("abc-1", key="order_id")
    assert normalise("ABC-1", key="name") != normalise("abc-1", key="name")


def test_a_deviation_and_every_later_step_are_bad():
    played = _trajectory(
        ("calculator_v2", {"expression": "12 + 30"}),  # wrong tool
        ("calculator", {"expression": "12 + 30"}),  # the right call, but off the path now
        ("submit", {"answer": "42"}),
    )
    assert truth_labels(played, REFERENCE) == [False, False, False]
    wrong_answer = _trajectory(
        ("calculator", {"expression": "12+30"}), ("submit", {"answer": "42"})
    )
    assert truth_labels(wrong_answer, REFERENCE) == [False, False]  # 12+30 is not "12 + 30"
    too_long = _trajectory(
        ("calculator", {"expression": "12 + 30"}),
        ("submit", {"answer": "42"}),
        ("submit", {"answer": "42"}),
    )
    assert truth_labels(too_long, REFERENCE) == [True, True, False]
    missing_param = _trajectory(("calculator", {}), ("calculator", {"expression": "12 + 30"}))
    assert truth_labels(missing_param, REFERENCE) == [False, False]


def test_error_rate_zero_keeps_the_truth_and_one_flips_every_label():
    played = _trajectory(
        ("calculator", {"expression": "12 + 30"}), ("submit", {"answer": "41"}), ("submit", {})
    )
    exact = simulate_labels(played, REFERENCE, error_rate=0.0, seed=3, key=17)
    assert exact.truth == exact.given == [True, False, False] and exact.flipped == []
    wrong = simulate_labels(played, REFERENCE, error_rate=1.0, seed=3, key=17)
    assert wrong.truth == [True, False, False]
    assert wrong.given == [False, True, True] and wrong.flipped == [0, 1, 2]


def test_labels_are_deterministic_and_errors_come_at_about_the_rate():
    played = _trajectory(*[("calculator", {"expression": str(i)}) for i in range(40)])
    reference = [ToolCall(tool="calculator", params={"expression": str(i)}) for i in range(40)]
    runs = [
        simulate_labels(played, reference, error_rate=0.25, seed=5, key=key)
        for key in ("a", "a", "b")
    ]
    assert runs[0] == runs[1]  # same seed, trajectory and steps: the same labels
    assert runs[0].flipped != runs[2].flipped  # another trajectory: independent errors
    flips = sum(
        len(simulate_labels(played, reference, error_rate=0.25, seed=s, key=k).flipped)
        for s in range(5)
        for k in range(5)
    )
    assert 0.18 < flips / (25 * 40) < 0.32
    other_seed = simulate_labels(played, reference, error_rate=0.25, seed=6, key="a")
    assert other_seed.flipped != runs[0].flipped
    # a trajectory dict works as well as the object
    as_dict = simulate_labels(played.model_dump(), reference, error_rate=0.25, seed=5, key="a")
    assert as_dict == runs[0]


def test_bad_error_rates_are_refused():
    with pytest.raises(InputError, match="from 0 to 1"):
        simulate_labels(_trajectory(), REFERENCE, error_rate=1.5)


def test_auroc_is_the_mann_whitney_probability_with_ties_counting_half():
    assert auroc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert auroc([0.1, 0.2, 0.9, 0.8], [True, True, False, False]) == 0.0
    assert auroc([0.5, 0.5], [True, False]) == 0.5
    # 2 good × 2 bad = 4 pairs: (0.8>0.3) (0.8>0.5) (0.5=0.5 → ½) (0.5>0.3) → 3.5 / 4
    assert auroc([0.8, 0.5, 0.5, 0.3], [True, True, False, False]) == pytest.approx(0.875)
    assert auroc([0.8, None, 0.3], [True, True, False]) == 1.0  # unscored steps left out
    assert auroc([0.8, 0.3], [True, True]) is None  # one class only
    from scipy import stats as scipy_stats
    scores = [0.1, 0.4, 0.4, 0.35, 0.8, 0.7, 0.2, 0.4, 0.9, 0.05]
    labels = [False, True, False, True, True, False, False, True, True, False]
    good = [s for s, lb in zip(scores, labels, strict=True) if lb]
    bad = [s for s, lb in zip(scores, labels, strict=True) if not lb]
    u = scipy_stats.mannwhitneyu(good, bad).statistic
    assert auroc(scores, labels) == pytest.approx(u / (len(good) * len(bad)))
