"""LocalSandbox: workspace lifecycle, limits and isolation (bubblewrap + cgroups/rlimits)."""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import tarfile
import threading
import time
import uuid
import warnings

import pytest

from tests.trainer_core.sandboxes import require_containment, require_isolation
from trainer_core.errors import SandboxError, SteplabError
from trainer_core.sandboxes import local
from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.local import LocalSandbox
from trainer_core.sandboxes.local import host as local_host
from trainer_core.sandboxes.local.host import probe_cgroups

HAS_PYTHON_INSIDE = os.path.exists("/usr/bin/python3")

# Each cgroup version probed once, when this module is collected. Every containment test runs
# once per version that contains commands here (v1 on a hybrid machine, v2 on a pure v2 one);
# "none" where neither does: then it fails under CI=true (and skips outside CI).
PROBES = {version: probe_cgroups(version) for version in ("v1", "v2")}
CGROUP_VERSIONS = [v for v, (_, parents, _) in PROBES.items() if len(parents) == 2] or ["none"]


@pytest.fixture
def isolated():
    require_isolation()


@pytest.fixture
def sb(tmp_path):
    with LocalSandbox(
        SandboxLimits(wall_seconds=10, memory_mb=256, pids=64),
        files={"hello.txt": "hello\n", "pkg/mod.py": "X = 1\n"},
        workdir_parent=str(tmp_path),
    ) as sandbox:
        yield sandbox


@pytest.fixture
def unisolated(monkeypatch):
    """Pretend bubblewrap is missing: the plain-subprocess fallback."""
    real = local.host_support()
    fake = dataclasses.replace(real, bwrap=None, bwrap_detail="disabled by the test")
    monkeypatch.setattr(local_host, "_support", fake)
    monkeypatch.setattr(local_host, "_warned", set())
    return fake


@pytest.fixture(params=CGROUP_VERSIONS)
def contained(request, monkeypatch):
    """This machine as probed, its sandboxes' cgroups made by one cgroup version."""
    if request.param == "none":
        require_containment()
    driver, parents, detail = PROBES[request.param]
    support = dataclasses.replace(
        local.host_support(), cgroup_driver=driver, cgroup_parents=parents, cgroup_detail=detail
    )
    monkeypatch.setattr(local_host, "_support", support)
    return support


@pytest.fixture
def uncontained(monkeypatch):
    """Pretend this machine has no usable cgroup."""
    real = local.host_support()
    fake = dataclasses.replace(real, cgroup_parents={}, cgroup_detail="none here (the test)")
    monkeypatch.setattr(local_host, "_support", fake)
    monkeypatch.setattr(local_host, "_warned", set())
    monkeypatch.delenv(local_host.UNCONTAINED_SETTING, raising=False)
    return fake


def _stray_processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if marker in line]


def _wait_no_strays(marker: str, timeout: float = 3.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        strays = _stray_processes(marker)
        if not strays or time.monotonic() > deadline:
            return strays
        time.sleep(0.05)


# --- lifecycle ------------------------------------------------------------------------------


def test_sandbox_error_is_a_steplab_error():
    assert issubclass(SandboxError, SteplabError)


def test_start_writes_files_and_runs_in_the_workspace(sb):
    assert sb.read_file("hello.txt") == b"hello\n"
    result = sb.exec(["cat", "pkg/mod.py"])
    assert result.ok and result.stdout == "X = 1\n"
    assert result.duration > 0


def test_exec_list_is_argv_not_shell(sb):
    result = sb.exec(["echo", "$(id)", "; ls", "*"])
    assert result.stdout == "$(id) ; ls *\n"


def test_exec_string_is_bash(sb):
    result = sb.exec("echo $((6 * 7)) && echo err >&2; exit 3")
    assert result.stdout == "42\n"
    assert result.stderr == "err\n"
    assert result.exit_code == 3
    assert not result.ok


def test_exec_stdin(sb):
    result = sb.exec(["wc", "-c"], stdin="x" * 300_000)
    assert result.stdout.strip() == "300000"


def test_missing_command_is_a_failed_result_not_an_exception(sb):
    result = sb.exec(["definitely-not-a-command-xyz"])
    assert result.exit_code != 0


def test_exec_rejects_bad_commands(sb):
    with pytest.raises(SandboxError):
        sb.exec([])
    with pytest.raises(SandboxError):
        sb.exec(["echo", 3])  # type: ignore[list-item]


def test_unstarted_and_closed_sandboxes_refuse_work(tmp_path):
    sandbox = LocalSandbox(workdir_parent=str(tmp_path))
    with pytest.raises(SandboxError, match="not started"):
        sandbox.exec("true")
    sandbox.start()
    workspace = sandbox.workspace
    assert os.path.isdir(workspace)
    sandbox.close()
    sandbox.close()  # idempotent
    assert not os.path.exists(workspace)
    assert os.listdir(tmp_path) == []
    with pytest.raises(SandboxError, match="closed"):
        sandbox.exec("true")


def test_setup_commands_run_before_the_baseline(tmp_path):
    with LocalSandbox(
        files={"a.txt": "1"},
        setup=["echo built > build.log", "mkdir -p out && cp a.txt out/"],
        workdir_parent=str(tmp_path),
    ) as sandbox:
        assert sandbox.read_file("build.log") == b"built\n"
        sandbox.write_file("a.txt", "changed")
        sandbox.exec("rm -rf out build.log")
        sandbox.reset()
        assert sandbox.read_file("a.txt") == b"1"
        assert sandbox.read_file("out/a.txt") == b"1"
        assert sandbox.read_file("build.log") == b"built\n"


def test_failing_setup_raises_with_command_and_stderr_and_cleans_up(tmp_path):
    sandbox = LocalSandbox(
        setup=["echo ok", "echo 'missing dependency foo' >&2; exit 7"], workdir_parent=str(tmp_path)
    )
    with pytest.raises(SandboxError) as info:
        sandbox.start()
    message = str(info.value)
    assert "missing dependency foo" in message
    assert "exit 7" in message and "exit code 7" in message
    assert os.listdir(tmp_path) == []


def test_repo_directory_is_copied(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "main.py").write_text("print('hi')\n")
    (repo / "link").symlink_to("src/main.py")
    with LocalSandbox(repo=str(repo), files={"extra.txt": "x"}) as sandbox:
        assert sandbox.read_file("src/main.py") == b"print('hi')\n"
        assert os.path.islink(os.path.join(sandbox.workspace, "link"))
        assert sandbox.read_file("extra.txt") == b"x"
    assert (repo / "src" / "main.py").exists()  # the source is untouched


def _tarball(path, members):
    with tarfile.open(path, "w:gz") as tf:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload.encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = payload
                tf.addfile(info)
    return str(path)


def test_repo_tarball_is_extracted(tmp_path):
    archive = _tarball(
        tmp_path / "repo.tar.gz",
        [("proj/README", "file", "read me\n"), ("proj/link", "symlink", "README")],
    )
    with LocalSandbox(repo=archive, workdir_parent=str(tmp_path)) as sandbox:
        assert sandbox.read_file("proj/README") == b"read me\n"
        assert sandbox.read_file("proj/link") == b"read me\n"


@pytest.mark.parametrize(
    "member",
    [
        ("../escape.txt", "file", "x"),
        ("/abs/escape.txt", "file", "x"),
        ("a/../../escape.txt", "file", "x"),
        ("passwd", "symlink", "/etc/passwd"),
        ("up", "symlink", "../../.."),
    ],
)
def test_repo_tarball_members_escaping_are_rejected(tmp_path, member):
    archive = _tarball(tmp_path / "evil.tar.gz", [("ok.txt", "file", "fine"), member])
    parent = tmp_path / "sandboxes"
    parent.mkdir()
    with pytest.raises(SandboxError, match="outside|escapes"):
        LocalSandbox(repo=archive, workdir_parent=str(parent)).start()
    assert not (tmp_path / "escape.txt").exists()
    assert os.listdir(parent) == []


def test_repo_that_is_neither_dir_nor_tarball(tmp_path):
    with pytest.raises(SandboxError, match="neither"):
        LocalSandbox(repo=str(tmp_path / "nope"), workdir_parent=str(tmp_path)).start()
    bad = tmp_path / "bad.tar"
    bad.write_text("not a tarball")
    with pytest.raises(SandboxError, match="tarball"):
        LocalSandbox(repo=str(bad), workdir_parent=str(tmp_path)).start()


# --- files ----------------------------------------------------------------------------------


def test_write_then_read_creates_parents(sb):
    sb.write_file("deep/er/file.bin", b"\x00\x01")
    sb.write_file("deep/text.txt", "héllo")
    assert sb.read_file("deep/er/file.bin") == b"\x00\x01"
    assert sb.read_file("deep/text.txt") == "héllo".encode()
    assert sb.exec(["cat", "deep/text.txt"]).stdout == "héllo"


def test_file_paths_must_stay_in_the_workspace(sb, tmp_path):
    for bad in ("../escape", "a/../../escape", "/etc/passwd", "/tmp/x", ""):
        with pytest.raises(SandboxError):
            sb.write_file(bad, "nope")
        with pytest.raises(SandboxError):
            sb.read_file(bad)
    assert not (tmp_path / "escape").exists()
    with pytest.raises(SandboxError, match="absolute"):
        sb.read_file("/etc/passwd")
    with pytest.raises(SandboxError, match="outside the workspace"):
        sb.write_file("../escape", "x")


def test_symlinks_escaping_the_workspace_are_rejected(sb, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(str(secret), os.path.join(sb.workspace, "leak"))
    os.symlink("/", os.path.join(sb.workspace, "root"))
    sb.exec("ln -s ../../.. up")  # made by the agent, inside the sandbox
    with pytest.raises(SandboxError, match="outside the workspace"):
        sb.read_file("leak")
    with pytest.raises(SandboxError, match="outside the workspace"):
        sb.write_file("leak", "overwrite")
    with pytest.raises(SandboxError, match="outside the workspace"):
        sb.write_file("root/tmp/planted", "x")
    with pytest.raises(SandboxError, match="outside the workspace"):
        sb.read_file("up/etc/hostname")
    assert secret.read_text() == "host secret"
    # A link that stays inside is fine.
    os.symlink("hello.txt", os.path.join(sb.workspace, "alias"))
    assert sb.read_file("alias") == b"hello\n"


def test_read_errors_are_sandbox_errors(sb):
    with pytest.raises(SandboxError, match="no such file"):
        sb.read_file("missing.txt")
    with pytest.raises(SandboxError, match="directory"):
        sb.read_file("pkg")
    with pytest.raises(SandboxError, match="directory"):
        sb.write_file("pkg", "x")


# --- snapshots ------------------------------------------------------------------------------


def test_snapshot_restore_and_reset(sb):
    sb.write_file("hello.txt", "v2\n")
    sb.exec("mkdir -p build && echo artefact > build/out && ln -s hello.txt link")
    snap = sb.snapshot()
    sb.write_file("hello.txt", "v3\n")
    sb.exec("rm -rf build && echo new > new.txt && chmod 000 pkg")
    sb.restore(snap)
    assert sb.read_file("hello.txt") == b"v2\n"
    assert sb.read_file("build/out") == b"artefact\n"
    assert os.path.islink(os.path.join(sb.workspace, "link"))
    assert not os.path.exists(os.path.join(sb.workspace, "new.txt"))
    sb.reset()
    assert sb.read_file("hello.txt") == b"hello\n"
    assert sb.read_file("pkg/mod.py") == b"X = 1\n"
    assert sorted(os.listdir(sb.workspace)) == ["hello.txt", "pkg"]
    assert sb.exec("cat hello.txt").stdout == "hello\n"  # commands see the restored tree
    with pytest.raises(SandboxError):
        sb.restore("no-such-snapshot")
    with pytest.raises(SandboxError):
        sb.restore("../../etc")


# --- limits ---------------------------------------------------------------------------------


def test_endless_loop_is_killed_at_the_timeout(sb):
    started = time.monotonic()
    result = sb.exec("echo before; while true; do :; done", timeout=1)
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert result.exit_code == local.TIMEOUT_EXIT_CODE
    assert not result.ok
    assert result.stdout == "before\n"  # what arrived before the kill
    assert elapsed < 2.0


def test_default_wall_time_comes_from_the_limits(tmp_path):
    with LocalSandbox(SandboxLimits(wall_seconds=0.5), workdir_parent=str(tmp_path)) as sandbox:
        result = sandbox.exec(["sleep", "10"])
    assert result.timed_out and result.duration < 1.5


def test_background_jobs_do_not_outlive_the_command(sb):
    marker = f"steplab-bg-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    result = sb.exec(f"sleep 30 {marker} 2>/dev/null & sleep 30 & echo started")
    assert result.stdout == "started\n"
    assert time.monotonic() - started < 2.0
    assert _wait_no_strays(marker) == []


def test_huge_output_is_truncated_with_a_marker(tmp_path):
    limits = SandboxLimits(output_bytes=10_000)
    with LocalSandbox(limits, workdir_parent=str(tmp_path)) as sandbox:
        started = time.monotonic()
        result = sandbox.exec("yes | head -c 50000000; yes e | head -c 30000 >&2")
        elapsed = time.monotonic() - started
    assert result.exit_code == 0
    assert result.truncated
    body, _, marker = result.stdout.rpartition("[... output truncated: ")
    assert len(body) == 10_000
    assert marker.startswith(f"{50_000_000 - 10_000} bytes dropped")
    assert "[... output truncated: 20000 bytes dropped ...]" in result.stderr
    assert elapsed < 10


def test_small_output_is_not_truncated(sb):
    result = sb.exec("printf 'abc'")
    assert result.stdout == "abc" and not result.truncated


def test_memory_hog_is_contained(tmp_path):
    limits = SandboxLimits(memory_mb=128, wall_seconds=20)
    if HAS_PYTHON_INSIDE:
        cmd = ["python3", "-c", "b = bytearray(500 * 1024 * 1024); print('allocated')"]
    else:  # tail keeps the whole newline-free line in memory
        cmd = "head -c 500000000 /dev/zero | tail -c 1 >/dev/null && echo allocated"
    with LocalSandbox(limits, workdir_parent=str(tmp_path)) as sandbox:
        result = sandbox.exec(cmd)
    assert result.exit_code != 0
    assert "allocated" not in result.stdout


def test_memory_limit_covers_the_whole_command_with_a_cgroup(contained, tmp_path):
    """Each process stays under the address-space rlimit; only the cgroup sees the total."""
    if not HAS_PYTHON_INSIDE:
        pytest.skip("no /usr/bin/python3 on this machine")
    hog = "python3 -c 'import time; b = bytearray(60 * 1024 * 1024); time.sleep(1)'"
    cmd = (
        f"for i in 1 2 3 4; do {hog} & done; fails=0; "
        "for j in $(jobs -p); do wait $j || fails=$((fails + 1)); done; echo fails=$fails"
    )
    with LocalSandbox(SandboxLimits(memory_mb=128), workdir_parent=str(tmp_path)) as sandbox:
        result = sandbox.exec(cmd)
    assert result.stdout.startswith("fails=") and result.stdout != "fails=0\n"
    assert "Killed" in result.stderr  # the cgroup's OOM killer


def test_cpu_time_limit(tmp_path):
    limits = SandboxLimits(cpu_seconds=1, wall_seconds=10)
    with LocalSandbox(limits, workdir_parent=str(tmp_path)) as sandbox:
        started = time.monotonic()
        result = sandbox.exec("while true; do :; done")
    assert not result.timed_out  # the CPU limit (SIGXCPU/SIGKILL) came first
    assert result.exit_code != 0
    assert time.monotonic() - started < 5


def test_file_size_limit(tmp_path):
    limits = SandboxLimits(file_size_mb=1)
    with LocalSandbox(limits, workdir_parent=str(tmp_path)) as sandbox:
        result = sandbox.exec("head -c 5000000 /dev/zero > big.bin")
        size = os.path.getsize(os.path.join(sandbox.workspace, "big.bin"))
    assert result.exit_code != 0
    assert size <= 1024 * 1024


def test_interrupt_from_another_thread_stops_a_command(sb):
    timer = threading.Timer(0.3, sb.interrupt)
    started = time.monotonic()
    timer.start()
    try:
        result = sb.exec(["sleep", "30"])
    finally:
        timer.cancel()
    assert time.monotonic() - started < 3
    assert result.exit_code != 0
    assert not result.timed_out
    assert sb.exec("echo still usable").stdout == "still usable\n"


def _group_file(groups: list[str], parent: str, name: str) -> str:
    """The file ``name`` of the group under ``parent`` (v1: a group per controller)."""
    (group,) = [g for g in groups if os.path.dirname(g) == parent]
    with open(os.path.join(group, name)) as fh:
        return fh.read()


def test_a_sandbox_has_one_cgroup_emptied_after_each_command_and_removed_at_close(
    contained, tmp_path
):
    parents = contained.cgroup_parents
    v2 = contained.cgroup_driver.version == "v2"
    limits = SandboxLimits(memory_mb=64, pids=16)
    with LocalSandbox(limits, workdir_parent=str(tmp_path)) as sandbox:
        details = sandbox.info.details
        groups = details["cgroup_groups"]
        assert details["cgroup_version"] == contained.cgroup_driver.version
        assert {os.path.dirname(g) for g in groups} == set(parents.values())
        assert _group_file(groups, parents["pids"], "pids.max").strip() == "16"
        memory_max = "memory.max" if v2 else "memory.limit_in_bytes"
        assert int(_group_file(groups, parents["memory"], memory_max)) == 64 * 1024 * 1024
        peak = "memory.peak" if v2 else "memory.max_usage_in_bytes"
        for _ in range(2):  # the same groups for every command, empty after each
            result = sandbox.exec("sleep 30 & echo started")
            assert result.stdout == "started\n"
            assert int(_group_file(groups, parents["memory"], peak)) > 0  # it ran in the group
            assert sandbox.info.details["cgroup_groups"] == groups
            for parent in set(parents.values()):
                assert _group_file(groups, parent, "cgroup.procs").split() == []
    assert [g for g in groups if os.path.exists(g)] == []


def test_without_containment_the_sandbox_refuses_to_run_commands(uncontained, tmp_path):
    with pytest.raises(SandboxError) as caught:
        LocalSandbox(workdir_parent=str(tmp_path)).start()
    message = str(caught.value)
    assert "will not run commands without containment" in message
    assert "no usable memory or pids cgroup" in message and "none here (the test)" in message
    assert "STEPLAB_SANDBOX_CGROUP_ROOT" in message and "STEPLAB_SANDBOX_UNCONTAINED=1" in message
    assert os.listdir(tmp_path) == []  # no workspace was made


def test_uncontained_commands_run_only_when_allowed_with_a_warning(
    uncontained, tmp_path, monkeypatch
):
    monkeypatch.setenv("STEPLAB_SANDBOX_UNCONTAINED", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with LocalSandbox(workdir_parent=str(tmp_path)) as sandbox:
            assert sandbox.exec("echo ran").stdout == "ran\n"
            details = sandbox.info.details
    assert any("WITHOUT cgroup containment" in str(w.message) for w in caught)
    assert details["cgroup_groups"] == [] and details["cgroup_version"] is None
    assert not details["cgroup_memory"] and not details["cgroup_pids"]
    if os.geteuid() == 0:
        assert details["fork_bomb_containment"].startswith("none")


def test_cgroup_v2_root_setting_is_used_or_says_why_not(tmp_path, monkeypatch):
    from trainer_core.sandboxes.local.cgroup_v2 import unified_mount

    mount = unified_mount()
    root = os.path.join(mount or "/sys/fs/cgroup", f"steplab-test-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("STEPLAB_SANDBOX_CGROUP_ROOT", root)
    driver, parents, detail = probe_cgroups()  # the setting puts v2 first
    try:
        if "v2" in CGROUP_VERSIONS:
            assert driver.version == "v2" and parents == {"pids": root, "memory": root}
            group = driver.create(parents, SandboxLimits(memory_mb=32, pids=8))
            assert os.path.dirname(group.groups[0]) == root
            group.remove()
            assert not os.path.exists(group.groups[0])
        elif mount is None:
            assert "no cgroup2 file system is mounted" in detail
        else:  # e.g. a hybrid machine: v1 holds the controllers, v2 has none to give
            assert f"cgroup v2 at {mount}: not usable" in detail
            assert "controller to give" in detail or "cannot" in detail
            assert not os.path.exists(root)  # the probe made it and took it away again
    finally:
        if os.path.isdir(root):
            os.rmdir(root)


def test_info_describes_the_backend(sb):
    info = sb.info
    assert info.backend == "local"
    assert info.isolated is (local.host_support().bwrap is not None)
    assert info.details["workspace"] == sb.workspace
    assert "fork_bomb_containment" in info.details


# --- isolation (bubblewrap) -----------------------------------------------------------------


def test_isolated_commands_see_work_as_home_and_cwd(isolated, sb):
    result = sb.exec('pwd; echo "$HOME"; hostname; ls /')
    lines = result.stdout.split("\n")
    assert lines[:3] == ["/work", "/work", "sandbox"]
    assert "root" not in lines and "home" not in lines  # the host's tree is not there
    assert sb.info.isolated is True


def test_host_environment_does_not_leak_in(isolated, sb, monkeypatch):
    monkeypatch.setenv("STEPLAB_SECRET_TOKEN", "s3cr3t")
    result = sb.exec("env")
    assert "s3cr3t" not in result.stdout
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in result.stdout


def test_no_network(isolated, sb):
    if HAS_PYTHON_INSIDE:
        probe = [
            "python3",
            "-c",
            "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2); print('CONNECTED')",
        ]
    else:
        probe = "exec 3<>/dev/tcp/1.1.1.1/53 && echo CONNECTED"
    result = sb.exec(probe, timeout=5)
    assert result.exit_code != 0
    assert "CONNECTED" not in result.stdout
    interfaces = sb.exec(["cat", "/proc/net/dev"]).stdout.splitlines()[2:]
    assert [line.split(":")[0].strip() for line in interfaces] == ["lo"]


def test_network_flag_shares_the_host_network(isolated, tmp_path):
    with open("/proc/net/dev") as fh:
        host = sorted(line.split(":")[0].strip() for line in fh.read().splitlines()[2:])
    with LocalSandbox(SandboxLimits(network=True), workdir_parent=str(tmp_path)) as sandbox:
        inside = sandbox.exec(["cat", "/proc/net/dev"]).stdout.splitlines()[2:]
    assert sorted(line.split(":")[0].strip() for line in inside) == host


def test_no_writes_outside_the_workspace(isolated, sb):
    name = f"steplab-pwned-{uuid.uuid4().hex[:8]}"
    for target in (f"/usr/{name}", f"/etc/{name}", f"/{name}", f"/usr/bin/{name}"):
        result = sb.exec(["touch", target])
        assert result.exit_code != 0, target
        assert "Read-only file system" in result.stderr or "denied" in result.stderr
        assert not os.path.exists(target)
    # /tmp is private to the command: writable, but nothing reaches the host's /tmp.
    result = sb.exec(f"echo x > /tmp/{name} && cat /tmp/{name}")
    assert result.stdout == "x\n"
    assert not os.path.exists(f"/tmp/{name}")
    assert sb.exec(["cat", f"/tmp/{name}"]).exit_code != 0  # gone for the next command


def test_no_capabilities_and_own_pid_namespace(isolated, sb):
    result = sb.exec("grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'")
    cap_line, count = result.stdout.split("\n")[:2]
    assert cap_line.split()[1] == "0000000000000000"
    assert int(count) < 10  # only the sandbox's own processes are visible


def test_git_works_inside(isolated, sb):
    result = sb.exec(
        "git init -q && git add -A && git commit -qm 'first commit' && git log --format='%an|%s'"
    )
    assert result.ok, result.stderr
    assert result.stdout.strip() == f"{local.GIT_NAME}|first commit"


@pytest.mark.skipif(not HAS_PYTHON_INSIDE, reason="no /usr/bin/python3 on this machine")
def test_debian_python_works_inside(isolated, sb):
    result = sb.exec(["python3", "-c", "import json, ssl; print(json.dumps([6 * 7]))"])
    assert result.stdout == "[42]\n", result.stderr


def test_fork_bomb_is_contained(isolated, contained, tmp_path):
    with LocalSandbox(SandboxLimits(pids=64), workdir_parent=str(tmp_path)) as sandbox:
        containment = sandbox.info.details["fork_bomb_containment"]
        assert containment == f"pids cgroup {contained.cgroup_driver.version} (pids.max)"
        marker = f"bomb{uuid.uuid4().hex[:10]}"
        started = time.monotonic()
        # The first bomb keeps its foreground busy; the second is the classic one-liner.
        bombs = [f":(){{ :|:& }};:; sleep 10 # {marker}", f":(){{ :|:& }};: # {marker}"]
        results = [sandbox.exec(["bash", "-c", bomb], timeout=2) for bomb in bombs]
        assert time.monotonic() - started < 8
        assert results[0].timed_out
        assert _wait_no_strays(marker) == []
        assert sandbox.exec("echo alive").stdout == "alive\n"


# --- without bubblewrap ---------------------------------------------------------------------


def test_without_bwrap_commands_run_unisolated_with_a_warning(unisolated, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sandbox = LocalSandbox(SandboxLimits(wall_seconds=5), workdir_parent=str(tmp_path))
        sandbox.start()
    try:
        assert any("WITHOUT isolation" in str(w.message) for w in caught)
        assert sandbox.info.isolated is False
        result = sandbox.exec("pwd; echo $HOME")
        assert result.stdout.split() == [sandbox.workspace, sandbox.workspace]
        assert sandbox.exec(["no-such-command-xyz"]).exit_code == 127
        started = time.monotonic()
        result = sandbox.exec("while true; do :; done", timeout=1)
        assert result.timed_out and time.monotonic() - started < 2
        marker = f"steplab-fallback-{uuid.uuid4().hex[:8]}"
        sandbox.exec(f"sleep 30 {marker} 2>/dev/null & echo started")
        assert _wait_no_strays(marker) == []
    finally:
        sandbox.close()


def test_probe_result_is_cached():
    assert local.host_support() is local.host_support()


def test_bwrap_on_path_matches_the_probe():
    if shutil.which("bwrap") is None:
        assert local.host_support().bwrap is None
    else:
        assert "bwrap" in local.host_support().bwrap_detail
