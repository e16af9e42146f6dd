"""The group view's figures come from the trainer's code: each step's advantage is the one its
trained tokens got, a step with no trained token (cut by max_length) has none, and the estimator
options stored by a run (old ones upgraded) are the trainer's."""

from __future__ import annotations

import pytest

from trainer_core.training.advantages import estimate
from trainer_core.training.data import Encoded
from trainer_core.training.episodes import Completion, Group
from trainer_core.training.group_view import estimator_settings, offline_group, step_advantages

IGNORE = -100


def _completion(reward, step_rewards, step_ids, labels):
    n = len(step_ids)
    return Completion(Encoded(list(range(n)), labels, step_ids, [1.0] * n), reward, step_rewards)


def test_each_steps_advantage_is_its_trained_tokens_and_a_cut_step_has_none():
    group = Group(
        [
            # steps 0 and 1; step 1's tokens were cut (no label): not trained
            _completion(1.0, [0.5, 1.0], [-1, 0, 0, 1], [IGNORE, 5, 6, IGNORE]),
            _completion(0.0, [-1.0], [-1, 0, 0], [IGNORE, 5, 6]),
        ],
        key="t",
    )
    settings = estimator_settings({"advantage": "process"})
    shown = step_advantages(group, settings)
    expected = estimate("process", [1.0, 0.0], [[0.5, 1.0], [-1.0]])
    assert shown[0][0] == pytest.approx(expected[0][0]) and shown[0][1] is None
    assert shown[1] == pytest.approx(expected[1])


def test_stored_options_load_as_the_trainer_loads_them():
    old = estimator_settings({"step_level_advantage": True, "process_weight": 0.25})
    assert (old.advantage, old.process_weight, old.scale_rewards) == ("mixed", 0.25, True)
    assert estimator_settings({}).advantage == "outcome"


def test_an_offline_row_without_the_tokenizer_has_one_step_per_assistant_message():
    row = {
        "prompt": [{"role": "user", "content": "2+2?"}],
        "completions": [
            [{"role": "assistant", "content": "4"}, {"role": "user", "content": "sure?"},
             {"role": "assistant", "content": "yes"}],
            [{"role": "assistant", "content": "5"}],
        ],
        "rewards": [0.9, 0.1],
        "outcome_rewards": [1.0, 0.0],
    }  # fmt: skip
    group, exact = offline_group(row, 0, estimator_settings({"advantage": "outcome"}))
    assert not exact and [c.reward for c in group.completions] == [1.0, 0.0]
    shown = step_advantages(group, estimator_settings({}))
    assert [len(s) for s in shown] == [2, 1]
    assert shown[0][0] == shown[0][1] > 0 > shown[1][0]
