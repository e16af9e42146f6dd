"""Rewards: the rule layer, rubrics, the LLM judge, the combination of layers into step and
trajectory totals, and preference pairs. Each lives in its own module (import from there)."""
