"""Wrappers, grouped by what they change: episode end and statistics (common), reward,
observation, recording. Compose them in any order; ``describe_stack`` / ``rebuild_stack``."""

from trainer_core.envs.wrappers.base import Wrapper, describe_stack, rebuild_stack
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
    "describe_stack",
    "rebuild_stack",
]
