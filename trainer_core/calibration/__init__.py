"""Human calibration: agreement between annotators and between people and the reward model
(:mod:`trainer_core.calibration.agreement`), and fitting a calibration — rubric weights and a
monotone map from model scores to human labels (:mod:`trainer_core.calibration.fit`). Import from
the modules (they import numpy and scipy)."""
