"""The CLI package: ``steplab --help`` lists every command from the table without importing a
command module, and the table's help is each command's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from webapp.cli import COMMANDS, load_command

REPO = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.sqlite


def test_the_table_help_is_each_commands_own_short_help():
    for name, (_, _, _, short_help) in COMMANDS.items():
        command = load_command(name)
        assert command.name == name
        assert command.get_short_help_str(limit=1000) == short_help, name


def test_help_and_file_commands_load_neither_django_nor_the_database_commands():
    probe = (
        "import sys; from click.testing import CliRunner; from webapp.cli import main; "
        "r = CliRunner().invoke(main, ['--help']); assert r.exit_code == 0, r.output; "
        "r = CliRunner().invoke(main, ['version']); assert r.exit_code == 0, r.output; "
        "loaded = [m for m in ('django', 'webapp.cli.database', 'webapp.cli.loop', "
        "'webapp.cli.serving', 'torch') if m in sys.modules]; print(loaded)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout
