"""Where apps above trajectories plug into its pages without trajectories importing them.

- Step rewards in the diff: the rewards app registers a provider in its ``AppConfig.ready()``::

      hooks.register_step_rewards(provider)

  ``provider(left_id=..., right_id=...)`` returns ``(version, {trajectory_id: {step index: reward}})``
  for a reward-model version that scored both trajectories, or None. The diff then shows those
  rewards and their differences, and names the version.

(The bulk actions of the list page are the other hook: see ``bulk.py``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

StepRewards = tuple[Any, dict[int, dict[int, float | None]]]
StepRewardsProvider = Callable[..., StepRewards | None]  # (*, left_id, right_id)

_STEP_REWARDS: list[StepRewardsProvider] = []


def register_step_rewards(provider: StepRewardsProvider) -> None:
    if provider not in _STEP_REWARDS:
        _STEP_REWARDS.append(provider)


def step_rewards(left_id: int, right_id: int) -> StepRewards | None:
    """The first registered provider's answer for this pair (None: no provider, or no version
    scored both)."""
    for provider in _STEP_REWARDS:
        found = provider(left_id=left_id, right_id=right_id)
        if found is not None:
            return found
    return None
