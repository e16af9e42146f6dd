"""Wrappers, grouped by what they change: episode end and statistics (common), reward,
observation, recording. Compose them in any order; a stack is described and rebuilt by
``describe_stack`` / ``rebuild_stack`` in :mod:`trainer_core.envs.registry`."""

from trainer_core.envs.wrappers.base import Wrapper
from trainer_core.envs.wrappers.common import EpisodeStatistics, MaxSteps, Timeout
from trainer_core.envs.wrappers.observation import TruncateObservation
from trainer_core.envs.wrappers.recording import Recorder
from trainer_core.envs.wrappers.reward import StepReward

__all__ = [
    "EpisodeStatistics",
    "MaxSteps",
    "Recorder",
    "StepReward",
    "Timeout",
    "TruncateObservation",
    "Wrapper",
]
