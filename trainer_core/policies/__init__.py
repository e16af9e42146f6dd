"""Policies: what chooses an agent's next action from its observation (scripted, model-backed...).

Each policy lives in its own module and is imported from there, so importing this package stays
light (no model libraries).
"""
