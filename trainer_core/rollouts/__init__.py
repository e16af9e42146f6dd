"""Rollouts: ``collect()`` plays episodes of a policy in an environment and records them as
trajectories (see :mod:`trainer_core.rollouts.collect`)."""
