"""Agreement statistics: against scipy, the krippendorff package's documented examples and values
worked by hand; bootstrap intervals: coverage over synthetic replications and width against n."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from trainer_core.calibration.agreement import (
    MODEL_METRICS,
    Interval,
    _alpha_from_sums,
    _unit_sums,
    _value_counts,
    agreement_by,
    agreement_summary,
    bootstrap_interval,
    cohen_kappa,
    confusion_matrix,
    grouped,
    human_agreement,
    kendall,
    krippendorff_alpha,
    mae,
    model_agreement,
    pairwise_concordance,
    pearson,
    reliability_curve,
    spearman,
)
from trainer_core.errors import InputError

NAN = math.nan


def correlated(n: int, rho: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=n)
    return x[:, 0], x[:, 1]


def brute_concordance(h, m) -> float:
    """The definition, pair by pair."""
    good = total = 0.0
    for i in range(len(h)):
        for j in range(i + 1, len(h)):
            if h[i] == h[j]:
                continue
            total += 1
            if m[i] == m[j]:
                good += 0.5
            elif (h[i] < h[j]) == (m[i] < m[j]):
                good += 1
    return good / total


# --- human vs model: the statistics ---------------------------------------------------------


def test_correlations_and_mae_match_scipy_and_numpy():
    h, m = correlated(80, 0.6, seed=3)
    m = np.round(m, 1)  # ties for the rank statistics
    assert pearson(h, m) == pytest.approx(stats.pearsonr(h, m).statistic, abs=1e-12)
    assert spearman(h, m) == pytest.approx(stats.spearmanr(h, m).statistic, abs=1e-12)
    assert kendall(h, m) == pytest.approx(stats.kendalltau(h, m).statistic, abs=1e-12)
    assert mae(h, m) == pytest.approx(np.mean(np.abs(h - m)), abs=1e-12)


def test_pairs_with_a_missing_side_are_left_out():
    human = [0.0, 0.5, None, 1.0, 0.25, NAN]
    model = [0.1, 0.4, 0.9, None, 0.3, 0.2]
    # what is left: (0, .1), (.5, .4), (.25, .3)
    assert mae(human, model) == pytest.approx((0.1 + 0.1 + 0.05) / 3)
    assert pearson(human, model) == pytest.approx(
        stats.pearsonr([0.0, 0.5, 0.25], [0.1, 0.4, 0.3]).statistic
    )
    assert model_agreement(human, model)["mae"].n == 3


def test_concordance_by_hand():
    # pairs with distinct human labels: (0,1) (0,2) (0,3) (1,3) (2,3) — (1,2) is a human tie
    human = [0.0, 0.5, 0.5, 1.0]
    model = [0.2, 0.6, 0.1, 0.6]
    # (0,1) right; (0,2) wrong; (0,3) right; (1,3) model tie: ½; (2,3) right → 3.5 / 5
    assert pairwise_concordance(human, model) == pytest.approx(0.7)
    assert brute_concordance(human, model) == pytest.approx(0.7)
    assert pairwise_concordance(human, [0.3] * 4) == 0.5  # a constant model: every pair ½
    assert pairwise_concordance(human, [-v for v in human]) == 0.0
    assert pairwise_concordance(human, human) == 1.0


@pytest.mark.parametrize("n", [60, 1100])  # 1100: past the pair matrix, through scipy's tau
def test_concordance_matches_the_definition_with_ties(n):
    rng = np.random.default_rng(n)
    h = rng.integers(1, 6, size=n).astype(float)
    m = np.round(h / 5 + rng.normal(0, 0.3, size=n), 1)
    if n < 100:
        expected = brute_concordance(h, m)
    else:  # the definition, vectorised
        i, j = np.triu_indices(n, k=1)
        distinct = h[i] != h[j]
        dh, dm = np.sign(h[i] - h[j])[distinct], np.sign(m[i] - m[j])[distinct]
        expected = (np.sum(dh * dm > 0) + 0.5 * np.sum(dm == 0)) / distinct.sum()
    assert pairwise_concordance(h, m) == pytest.approx(expected, abs=1e-9)


def test_undefined_is_none_never_a_number():
    assert pearson([1.0, 2.0], [1.0, 3.0]) is None  # fewer than 3 pairs
    assert pearson([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]) is None  # a constant side
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
    assert kendall([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) is None
    assert pairwise_concordance([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None  # no human pair differs
    assert mae([], []) is None
    result = model_agreement([0.5] * 20, list(np.linspace(0, 1, 20)))
    assert result["pearson"] == Interval(None, None, None, 20)
    assert result["concordance"].value is None
    assert result["mae"].value == pytest.approx(0.2631578947368421)


def test_bad_input_says_what_is_wrong():
    with pytest.raises(InputError, match="pair up: 3 human labels, 2 model scores"):
        pearson([1, 2, 3], [1, 2])
    with pytest.raises(InputError, match="human label 1 must be a number"):
        mae([1, "good"], [1, 2])
    with pytest.raises(InputError, match="unknown metric.*auc; known: pearson"):
        model_agreement([1, 2, 3], [1, 2, 3], metrics=["auc"])
    with pytest.raises(InputError, match="level must be one of"):
        krippendorff_alpha([[1, 2]], level="ratio-ish")


def test_model_agreement_reports_every_metric_with_an_interval():
    h, m = correlated(120, 0.7, seed=11)
    result = model_agreement(h, m, n_resamples=300)
    assert list(result) == list(MODEL_METRICS)
    assert list(model_agreement(h, m, metrics=["mae", "kendall"])) == ["mae", "kendall"]
    for name, interval in result.items():
        assert interval.n == 120
        assert interval.low < interval.value < interval.high, name
    assert result["pearson"].value == pytest.approx(stats.pearsonr(h, m).statistic)
    assert result["concordance"].value == pytest.approx(brute_concordance(h, m))
    data = json.loads(json.dumps({k: v.to_dict() for k, v in result.items()}))
    assert set(data["kendall"]) == {"value", "low", "high", "n"}


def test_the_vectorised_kendall_bootstrap_is_scipys_kendalltau_on_each_resample():
    h, m = correlated(40, 0.5, seed=5)
    m = np.round(m, 1)
    fast = model_agreement(h, m, n_resamples=200, seed=7)["kendall"]
    slow = bootstrap_interval(
        lambda a, b: stats.kendalltau(a, b).statistic, h, m, n_resamples=200, seed=7
    )
    assert (fast.low, fast.value, fast.high) == pytest.approx((slow.low, slow.value, slow.high))


# --- bootstrap intervals ---------------------------------------------------------------------


def test_too_few_units_give_the_value_without_an_interval():
    result = model_agreement([0.0, 0.5, 1.0, 0.25], [0.1, 0.6, 0.8, 0.2])
    assert result["pearson"].value is not None
    assert result["pearson"].low is None and result["pearson"].high is None
    assert result["pearson"].n == 4


def test_identical_resamples_give_a_zero_width_interval():
    values = list(np.linspace(0, 1, 30))
    result = model_agreement(values, values, n_resamples=200)
    assert result["mae"] == Interval(0.0, 0.0, 0.0, 30)
    assert (result["concordance"].low, result["concordance"].high) == (1.0, 1.0)


def test_the_95_percent_interval_covers_the_true_correlation_90_to_98_percent_of_the_time():
    rho, hits = 0.5, 0
    for replication in range(200):
        h, m = correlated(100, rho, seed=1000 + replication)
        result = model_agreement(h, m, metrics=["pearson"], n_resamples=500, seed=replication)
        hits += result["pearson"].low <= rho <= result["pearson"].high
    assert 0.90 <= hits / 200 <= 0.98


def test_the_95_percent_interval_covers_the_true_mae_90_to_98_percent_of_the_time():
    # model = human + N(δ, σ): the true MAE is E|N(δ, σ)|
    delta, sigma = 0.3, 0.5
    truth = sigma * math.sqrt(2 / math.pi) * math.exp(-(delta**2) / (2 * sigma**2)) + delta * (
        1 - 2 * stats.norm.cdf(-delta / sigma)
    )
    hits = 0
    for replication in range(200):
        rng = np.random.default_rng(2000 + replication)
        human = rng.normal(size=100)
        model = human + rng.normal(delta, sigma, size=100)
        result = model_agreement(human, model, metrics=["mae"], n_resamples=500, seed=replication)
        interval = result["mae"]
        hits += interval.low <= truth <= interval.high
    assert 0.90 <= hits / 200 <= 0.98


def test_intervals_narrow_as_n_grows():
    def mean_width(n: int) -> float:
        widths = []
        for replication in range(10):
            h, m = correlated(n, 0.5, seed=3000 + replication)
            interval = model_agreement(
                h, m, metrics=["pearson", "mae"], n_resamples=300, seed=replication
            )
            widths.append([interval[k].high - interval[k].low for k in ("pearson", "mae")])
        return np.mean(widths, axis=0)

    small, large = mean_width(30), mean_width(300)
    # widths shrink like 1/√n: √10 ≈ 3.2 times narrower
    assert np.all(large < small / 2)


# --- between annotators ----------------------------------------------------------------------

# the krippendorff package's documented example (Krippendorff 2011, reliability data with gaps)
KRIPPENDORFF_EXAMPLE = [
    [NAN, NAN, NAN, NAN, NAN, 3, 4, 1, 2, 1, 1, 3, 3, NAN, 3],
    [1, NAN, 2, 1, 3, 3, 4, 3, NAN, NAN, NAN, NAN, NAN, NAN, NAN],
    [NAN, NAN, 2, 1, 3, 4, 4, NAN, 2, 1, 1, 3, 3, NAN, 4],
]
# and its second one (four coders, 12 units)
FOUR_CODERS = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_alpha_matches_the_packages_documented_examples():
    assert krippendorff_alpha(KRIPPENDORFF_EXAMPLE, "nominal") == pytest.approx(0.691358, abs=1e-6)
    assert krippendorff_alpha(KRIPPENDORFF_EXAMPLE, "interval") == pytest.approx(0.810845, abs=1e-6)
    assert krippendorff_alpha(FOUR_CODERS, "ordinal") == pytest.approx(0.815, abs=5e-4)
    words = {1: "very low", 2: "low", 3: "mid", 4: "high", 5: "very high"}
    as_words = [[words.get(v) for v in row] for row in FOUR_CODERS]
    assert krippendorff_alpha(as_words, "nominal") == pytest.approx(0.743, abs=5e-4)


def test_alpha_is_none_when_undefined():
    assert krippendorff_alpha([[1, 1, 1], [1, 1, 1]]) is None  # one value: no variation
    assert krippendorff_alpha([[1, None, 3], [None, 2, None]]) is None  # no unit labelled twice


def triples(rows):
    return [
        (f"u{unit}", f"a{annotator}", value)
        for annotator, row in enumerate(rows)
        for unit, value in enumerate(row)
    ]


def test_human_agreement_alpha_over_units_and_no_kappa_for_three_annotators():
    result = human_agreement(triples(KRIPPENDORFF_EXAMPLE), level="nominal", n_resamples=300)
    assert set(result) == {"alpha"}
    alpha = result["alpha"]
    assert alpha.value == pytest.approx(0.691358, abs=1e-6)
    assert alpha.n == 12  # the units at least two annotators labelled (resampled whole)
    assert alpha.low < alpha.value < alpha.high


def test_kappa_by_hand():
    # 2 × 2 table [[4, 1], [2, 3]]: p_o = .7, p_e = .5·.6 + .5·.4 = .5, kappa = .2 / .5
    a = ["y"] * 5 + ["n"] * 5
    b = ["y", "y", "y", "y", "n", "y", "y", "n", "n", "n"]
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # three ordered categories; a = 1,2,3,1, b = 1,3,3,2; marginals a (.5,.25,.25), b (.25,.25,.5)
    a, b = [1, 2, 3, 1], [1, 3, 3, 2]
    # unweighted: p_o = .5, p_e = .125 + .0625 + .125 = .3125
    assert cohen_kappa(a, b) == pytest.approx((0.5 - 0.3125) / (1 - 0.3125))
    # linear: observed disagreement (0+1+0+1)/4 = .5, expected Σ r_i c_j |i-j| = 1.0
    assert cohen_kappa(a, b, weights="linear") == pytest.approx(0.5)
    # quadratic: observed .5, expected Σ r_i c_j (i-j)² = 1.125 + .1875 + .3125 = 1.625
    assert cohen_kappa(a, b, weights="quadratic") == pytest.approx(1 - 0.5 / 1.625)
    assert cohen_kappa([1, 1, 1], [1, 1, 1]) is None  # one category: undefined
    assert cohen_kappa([1, None, 2, 2], [1, 2, None, 2]) == 1.0  # unshared units skipped


def test_two_annotators_get_kappa_weighted_by_level_and_a_relabel_replaces():
    a = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 2, 3]
    b = [1, 2, 3, 5, 5, 2, 2, 3, 4, 4, 2, 1]
    labels = [(u, "ann", v) for u, v in enumerate(a)] + [(u, "bob", v) for u, v in enumerate(b)]
    labels += [(11, "bob", 9), (11, "bob", 3)]  # bob relabels unit 11: 3 counts, not 1 or 9
    b[11] = 3
    result = human_agreement(labels, level="ordinal", n_resamples=300)
    assert set(result) == {"alpha", "kappa"}
    assert result["kappa"].value == pytest.approx(cohen_kappa(a, b, weights="linear"))
    assert result["kappa"].n == 12
    assert result["alpha"].value == pytest.approx(krippendorff_alpha([a, b], "ordinal"))
    nominal = human_agreement(labels, level="nominal", n_resamples=100)["kappa"]
    assert nominal.value == pytest.approx(cohen_kappa(a, b))


# --- plots and breakdowns --------------------------------------------------------------------


def test_reliability_curve_bins_the_model_scores():
    model = [0.05, 0.1, 0.45, 0.55, 1.0, None]
    human = [0.0, 0.2, 0.5, 0.7, 1.0, 0.3]
    curve = reliability_curve(model, human, bins=4)
    assert [(p["bin_low"], p["bin_high"], p["n"]) for p in curve] == [
        (0.0, 0.25, 2),
        (0.25, 0.5, 1),
        (0.5, 0.75, 1),
        (0.75, 1.0, 1),  # 1.0 falls in the last, closed bin
    ]
    assert curve[0]["mean_model"] == pytest.approx(0.075)
    assert curve[0]["mean_human"] == pytest.approx(0.1)
    empty = reliability_curve([0.1], [0.2], bins=2)[1]
    assert empty["n"] == 0 and empty["mean_human"] is None


def test_confusion_matrix_snaps_model_scores_to_the_nearest_level():
    human = [0.0, 0.0, 0.5, 1.0, 1.0]
    model = [0.1, 0.3, 0.55, 0.8, 0.25]  # 0.25 is halfway: the lower level
    result = confusion_matrix(human, model, levels=[1.0, 0.5, 0.0])
    assert result["levels"] == [0.0, 0.5, 1.0]
    assert result["counts"] == [[1, 1, 0], [0, 1, 0], [1, 0, 1]]
    assert result["n"] == 5


def records():
    rows = []
    rng = np.random.default_rng(0)
    for unit in range(30):
        truth = unit / 29
        for rubric, noise in (("goal", 0.05), ("tool", 0.3)):
            model = float(np.clip(truth + rng.normal(0, noise), 0, 1))
            for annotator in ("ann", "bob"):
                value = round(float(np.clip(truth + rng.normal(0, 0.1), 0, 1)) * 4) / 4
                rows.append(
                    {
                        "unit": unit,
                        "annotator": annotator,
                        "value": value,
                        "model": model,
                        "rubric": rubric,
                        "tool": "bash" if unit % 2 else None,
                        "version": 1,
                    }
                )
    return rows


def test_grouped_leaves_out_records_without_the_key():
    groups = grouped(records(), "tool")
    assert list(groups) == ["bash"] and len(groups["bash"]) == 60
    assert list(grouped(records(), lambda r: r["unit"] % 3)) == [0, 1, 2]


def test_agreement_by_rubric_matches_the_direct_calls():
    rows = records()
    by_rubric = agreement_by(rows, "rubric", n_resamples=200)
    assert list(by_rubric) == ["goal", "tool"]
    goal = [r for r in rows if r["rubric"] == "goal"]
    summary = by_rubric["goal"]
    assert (summary["n_items"], summary["n_annotators"], summary["n_labels"]) == (30, 2, 60)
    direct = human_agreement(
        [(r["unit"], r["annotator"], r["value"]) for r in goal], n_resamples=200
    )
    assert summary["human"]["alpha"] == direct["alpha"]
    assert summary["human"]["kappa"] == direct["kappa"]
    means = {u: np.mean([r["value"] for r in goal if r["unit"] == u]) for u in range(30)}
    models = {r["unit"]: r["model"] for r in goal}
    assert summary["model"]["mae"].value == pytest.approx(
        np.mean([abs(means[u] - models[u]) for u in range(30)])
    )
    assert summary["n_model_pairs"] == 30
    # the noisier rubric agrees less with people; the human-to-human ceiling stays high
    tool = by_rubric["tool"]
    assert tool["model"]["pearson"].value < summary["model"]["pearson"].value
    assert tool["human"]["alpha"].value > tool["model"]["pearson"].value
    pooled = agreement_summary(rows, n_resamples=100)
    assert pooled["n_items"] == 60  # (unit, rubric) items


def test_continuous_labels_get_interval_alpha_in_closed_form():
    rng = np.random.default_rng(4)
    truth = rng.uniform(size=40)
    rows = [list(np.round(truth + rng.normal(0, 0.1, size=40), 3)) for _ in range(3)]
    rows[0][5] = None
    # small enough for the package: the closed form gives its number
    counts, domain = _value_counts(rows, "interval")
    assert counts.shape[1] > 100  # ~120 distinct labels
    closed = float(_alpha_from_sums(*_unit_sums(counts, domain)))
    assert closed == pytest.approx(krippendorff_alpha(rows, "interval"), abs=1e-9)
    # 1500 units × ~4500 distinct labels would need a 3e10-element array in the package
    truth = rng.uniform(size=1500)
    labels = [
        (unit, annotator, float(truth[unit] + rng.normal(0, 0.1)))
        for unit in range(1500)
        for annotator in range(3)
    ]
    result = human_agreement(labels, "interval", n_resamples=200)["alpha"]
    expected = 1 - 0.01 / (np.var(truth) + 0.01)  # error variance .01 vs label variance
    assert result.value == pytest.approx(expected, abs=0.03)
    assert result.low < result.value < result.high and result.n == 1500
    with pytest.raises(InputError, match="too many for ordinal alpha; use level='interval'"):
        human_agreement(labels, "ordinal")
