"""The trajectory pages' repeated fragments (``webapp/trajectories/fragments.py``) as template
tags: ``{% load trajectory_html %}``, then ``{% trajectory_rows rows %}`` and the like."""

from __future__ import annotations

from django import template

from webapp.trajectories import fragments

register = template.Library()


@register.simple_tag
def trajectory_rows(rows):
    return fragments.trajectory_rows(rows)


@register.simple_tag
def choice_menu(name, label, values, chosen):
    return fragments.choice_menu(name=name, label=label, values=values, chosen=chosen)


@register.simple_tag
def step_items(steps, branch=False):
    return fragments.step_items(steps, branch=bool(branch))


@register.simple_tag
def step_observation(step):
    return fragments.step_observation(step)


@register.simple_tag
def diff_rows(rows, left, right, scored_by):
    return fragments.diff_rows(rows=rows, left=left, right=right, scored_by=scored_by)


@register.simple_tag
def text_diff(observation, level):
    return fragments.text_diff(observation, level)
