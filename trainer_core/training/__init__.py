"""Trainers (SFT, DPO, GRPO) and what they share (:mod:`.common`), plus tiny local models for
tests and benchmarks (:mod:`.tiny`). Importing this package imports no torch: each trainer module
imports torch, transformers, peft and accelerate inside its functions."""
