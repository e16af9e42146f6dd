"""Recording: the canonical trajectory schema, and (later) importers of real agent logs."""

from trainer_core.recording.schema import SCHEMA_VERSION, Outcome, Step, TaskRef, Trajectory, Usage

__all__ = ["SCHEMA_VERSION", "Outcome", "Step", "TaskRef", "Trajectory", "Usage"]
