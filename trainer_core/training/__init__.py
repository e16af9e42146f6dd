"""Trainers (SFT, DPO, GRPO, decoupled GRPO), one readable ``train(config, on_progress)`` each, and what they
share, by what it is:

- :mod:`.config` — the config dataclasses' base, YAML and field help; :mod:`.methods` — the
  methods by name and :func:`train_from_yaml` (re-exported here, the package's entry point);
- :mod:`.checkpoint` — the one owner of the checkpoint layout (save, resume, list, find);
- :mod:`.data` — dataset rows, encoding with the chat format, batches;
- :mod:`.modelling` — seeding, devices, the accelerator, model loading (LoRA), log-probs;
- :mod:`.loop` — the phases every ``train()`` shares; :mod:`.losses` — the losses' maths;
  :mod:`.advantages` — GRPO's advantage estimators (outcome, process, mixed);
- :mod:`.chunking` — long trajectories split by token length at step boundaries;
  :mod:`.curriculum` — the order SFT sees its examples in (seeded shuffle or a paced curriculum);
- :mod:`.lineage` — what each optimizer step consumed (``lineage.jsonl``, every trainer);
- :mod:`.episodes` (online GRPO episodes: token ids, behaviour log-probs, versions);
  :mod:`.decoupled` — the streaming trainer of decoupled RL (staleness bound, importance
  weights, published versions), :mod:`.offpolicy` — its weights and staleness admission,
  :mod:`.spool` — a file store of groups and versions for library use;
- :mod:`.tiny` (tiny local models for tests and benchmarks).

Importing this package imports no torch: each trainer module imports torch, transformers, peft
and accelerate inside its functions."""

from trainer_core.training.methods import METHODS, config_class, train_from_yaml, train_method

__all__ = ["METHODS", "config_class", "train_from_yaml", "train_method"]
