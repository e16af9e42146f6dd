"""Evaluation statistics: summaries of a run's episodes with intervals and pass@k / pass^k
(:mod:`trainer_core.evaluation.stats`), paired and unpaired comparisons of two runs with
multiple-testing correction (:mod:`trainer_core.evaluation.compare`), and leaderboards with
significance-based rank bounds and tie groups (:mod:`trainer_core.evaluation.leaderboard`), and
the GDI ranking of trajectories (:mod:`trainer_core.evaluation.gdi`).

Pure maths on plain records (numpy and scipy only): no database, no torch. Import from the
modules."""
