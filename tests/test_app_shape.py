"""The shape every webapp app keeps (docs/architecture.md): views parse, call one service or
selector and render — no queries, no form classes; services and selectors take keyword-only
arguments; job kinds live in the app's jobs.py. Each rule is checked on the real tree, and each
checker is shown to catch a violation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WEBAPP = REPO / "webapp"

pytestmark = pytest.mark.sqlite

# Calls that run a query (or build one that the view would run): the ORM is for selectors and
# services. ``get_object_or_404`` counts: selectors offer ``<entity>_get(*, id)`` raising Http404.
ORM_ATTRIBUTES = {
    "objects",
    "filter",
    "exclude",
    "order_by",
    "select_related",
    "prefetch_related",
    "values_list",
    "annotate",
    "aggregate",
    "get_or_create",
    "update_or_create",
    "bulk_create",
    "select_for_update",
    "raw",
}  # not .values() / .extra / .exists(): dicts, errors and paths have them too
ORM_NAMES = {"get_object_or_404", "get_list_or_404", "Paginator", "get_user_model"}
FORM_BASES = {"Form", "ModelForm", "BaseForm", "BaseFormSet"}


def view_problems(source: str) -> list[str]:
    """What a views module must not do: define a form class, touch the ORM."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name in FORM_BASES:
                    problems.append(f"line {node.lineno}: form class {node.name}")
        elif isinstance(node, ast.Attribute) and node.attr in ORM_ATTRIBUTES:
            problems.append(f"line {node.lineno}: ORM use .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ORM_NAMES:
            problems.append(f"line {node.lineno}: ORM use {node.id}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("django.db"):
            problems.append(f"line {node.lineno}: imports {node.module}")
    return problems


def positional_parameters(source: str) -> list[str]:
    """Public module-level functions that take positional parameters."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            if node.args.args or node.args.posonlyargs or node.args.vararg:
                found.append(f"line {node.lineno}: {node.name}")
    return found


def _modules(name: str) -> list[Path]:
    return sorted(WEBAPP.glob(f"*/{name}"))


def test_views_define_no_forms_and_call_no_orm():
    views = _modules("views.py")
    assert len(views) >= 10
    problems = {
        str(path.relative_to(REPO)): found
        for path in views
        if (found := view_problems(path.read_text()))
    }
    assert not problems, f"views must call a selector or service instead: {problems}"


def test_the_view_check_catches_a_form_class_and_orm_use():
    bad = """
from django import forms
from django.shortcuts import get_object_or_404

class NameForm(forms.Form):
    name = forms.CharField()

def page(request, pk):
    row = get_object_or_404(Thing, pk=pk)
    rows = Thing.objects.filter(owner=row).order_by("name")
    return rows
"""
    problems = view_problems(bad)
    assert any("form class NameForm" in p for p in problems)
    assert any("get_object_or_404" in p for p in problems)
    assert any(".objects" in p for p in problems) and any(".filter" in p for p in problems)
    assert view_problems("def page(request):\n    return render(request, 'x.html')\n") == []


def test_services_and_selectors_take_keyword_only_arguments():
    modules = _modules("services.py") + _modules("selectors.py")
    assert len(modules) >= 18
    found = {
        str(path.relative_to(REPO)): names
        for path in modules
        if (names := positional_parameters(path.read_text()))
    }
    assert not found, f"make these keyword-only (def f(*, ...)): {found}"
    assert positional_parameters("def task_get(id):\n    pass\n") == ["line 1: task_get"]
    assert positional_parameters("def task_get(*, id):\n    pass\n") == []


def test_every_app_has_its_rooms():
    apps = [p.parent for p in _modules("models.py") if p.parent.name != "common"]
    assert len(apps) >= 11
    for app in apps:
        for room in ("services.py", "selectors.py", "views.py", "urls.py"):
            assert (app / room).is_file(), f"webapp/{app.name} has no {room}"


def test_job_kinds_are_registered_only_in_the_apps_jobs_modules():
    registering = sorted(
        str(path.relative_to(REPO))
        for path in WEBAPP.rglob("*.py")
        if "register_kind(" in path.read_text() and path.name not in ("kinds.py",)
    )
    assert registering, "no job kind is registered anywhere"
    assert all(name.endswith("/jobs.py") for name in registering), registering
    assert not list(WEBAPP.glob("*/*job.py")), "job runners live in <app>/jobs.py"
