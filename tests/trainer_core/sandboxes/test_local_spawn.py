"""How the local sandbox starts a command: under bubblewrap it is held until bubblewrap and the
sandbox's first process are in the sandbox's cgroups with lowered rlimits (no window in which
the command runs uncontained); a command that cannot be started leaves the sandbox's cgroups as
they were."""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import pytest

from tests.trainer_core.sandboxes import require_containment, require_isolation
from trainer_core.errors import SandboxError
from trainer_core.sandboxes import local
from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.local import LocalSandbox, process
from trainer_core.sandboxes.local import host as local_host
from trainer_core.sandboxes.local.command import bwrap_argv
from trainer_core.sandboxes.shared import command_env


@pytest.fixture
def isolated_and_contained():
    require_isolation()
    require_containment()
    return local.host_support()


@pytest.fixture
def unisolated_but_contained(monkeypatch):
    """Without bubblewrap (the plain-subprocess path), still in the sandbox's cgroups."""
    require_containment()
    fake = dataclasses.replace(local.host_support(), bwrap=None, bwrap_detail="off (the test)")
    monkeypatch.setattr(local_host, "_support", fake)
    monkeypatch.setattr(local_host, "_warned", set())
    return fake


def _members(group: str) -> list[int]:
    with open(os.path.join(group, "cgroup.procs")) as fh:
        return [int(p) for p in fh.read().split()]


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "(gone)"


def test_bubblewrap_and_every_process_of_the_command_are_in_the_cgroups(
    isolated_and_contained, tmp_path
):
    with LocalSandbox(SandboxLimits(wall_seconds=20), workdir_parent=str(tmp_path)) as sandbox:
        groups = sandbox.info.details["cgroup_groups"]
        runner = threading.Thread(target=sandbox.exec, args=(["sleep", "3"],))
        runner.start()
        try:
            deadline = time.monotonic() + 10
            seen: dict[str, list[str]] = {}
            while time.monotonic() < deadline:
                seen = {g: sorted(_name(p) for p in _members(g)) for g in groups}
                if all(names == ["bwrap", "bwrap", "sleep"] for names in seen.values()):
                    break
                time.sleep(0.02)
        finally:
            sandbox.interrupt()
            runner.join()
    # bubblewrap, the sandbox's first process (its pid 1) and the command, in every group
    assert all(names == ["bwrap", "bwrap", "sleep"] for names in seen.values()), seen


def test_the_sandbox_first_process_and_the_command_have_the_rlimits(
    isolated_and_contained, tmp_path
):
    limits = SandboxLimits(cpu_seconds=7, file_size_mb=3)
    with LocalSandbox(limits, workdir_parent=str(tmp_path)) as sandbox:
        result = sandbox.exec("cat /proc/1/limits /proc/self/limits")
    lines = result.stdout.splitlines()
    cpu = [line.split()[3:5] for line in lines if line.startswith("Max cpu time")]
    fsize = [line.split()[3:5] for line in lines if line.startswith("Max file size")]
    assert cpu == [["7", "7"], ["7", "7"]], result
    assert fsize == [[str(3 * 1024 * 1024)] * 2] * 2, result


@pytest.mark.parametrize(
    "bad, says",
    [
        (["--no-such-option"], "no-such-option"),  # bubblewrap stops before making a sandbox
        (["--ro-bind", "/no/such/dir", "/x"], "/no/such/dir"),  # fails while setting it up
    ],
)
def test_bubblewrap_that_fails_to_set_up_is_reported_and_runs_nothing(
    isolated_and_contained, tmp_path, bad, says
):
    support = isolated_and_contained
    cgroups = support.sandbox_cgroups(SandboxLimits())
    command = cgroups.command()
    try:
        argv = [*bwrap_argv(support.bwrap, str(tmp_path), network=False), *bad]
        deadline = time.monotonic() + 10
        proc = process.spawn(
            [*argv, "--", "/bin/echo", "it ran"],
            cwd=str(tmp_path),
            env=command_env(True),
            stdin_piped=False,
            rlimits=[],
            cgroups=command,
            held=True,
            deadline=deadline,
        )
        run = process.Run(proc, command)
        out, err, timed_out = process.collect(run, deadline, None, 65536)
        process.reap(run)
        assert not timed_out and time.monotonic() < deadline
        assert "it ran" not in out.text()
        assert proc.returncode != 0
        assert says in err.text()
        assert all(_members(g) == [] for g in cgroups.groups)
    finally:
        command.release()
        cgroups.remove()


@pytest.mark.filterwarnings("ignore:LocalSandbox. bubblewrap is not usable:RuntimeWarning")
def test_a_command_with_a_nul_byte_is_refused_and_holds_no_cgroup(
    unisolated_but_contained, tmp_path
):
    with LocalSandbox(SandboxLimits(wall_seconds=20), workdir_parent=str(tmp_path)) as sandbox:
        for cmd in (["echo", "a\x00b"], "echo a\x00b"):
            with pytest.raises(SandboxError, match="NUL"):
                sandbox.exec(cmd)
        # A stray that left the command's process group is killed through the cgroup, which
        # a command does only while no other command of the sandbox holds it.
        result = sandbox.exec("setsid sleep 30 & echo started")
        assert result.stdout == "started\n"
        groups = sandbox.info.details["cgroup_groups"]
        assert groups and all(_members(g) == [] for g in groups)
