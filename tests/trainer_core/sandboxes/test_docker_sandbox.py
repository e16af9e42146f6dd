"""DockerSandbox on podman's Docker API (scripts/podman-sandbox.sh): the coding tools, isolation,
limits, snapshots and the container's lifecycle.

Needs the Docker API at ``$DOCKER_HOST`` (default unix:///run/steplab-podman.sock) and the image
localhost/steplab-sandbox. Without them these tests skip, except under ``CI=true``, where they
fail. One container serves each group of tests (``reset()`` between tests) to keep this quick.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time

import pytest

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.tools import ToolResult, run_tool

IMAGE = "localhost/steplab-sandbox"
DOCKER_HOST = os.environ.get("DOCKER_HOST", "unix:///run/steplab-podman.sock")
SOURCE = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


def _unavailable(reason: str) -> None:
    reason = f"docker sandbox unavailable: {reason}; run scripts/podman-sandbox.sh"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the docker backend tests must run, not skip)", False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def docker_api():
    """The Docker API with the sandbox image, or a skip (a failure under CI=true)."""
    try:
        import docker
    except ImportError as exc:
        _unavailable(f"the docker SDK is not installed ({exc})")
    try:
        api = docker.APIClient(base_url=DOCKER_HOST, timeout=10, version="auto")
        api.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to connect means "not here"
        _unavailable(f"no Docker API at {DOCKER_HOST} ({exc})")
    try:
        api.inspect_image(IMAGE)
    except Exception as exc:  # noqa: BLE001
        _unavailable(f"the image {IMAGE} is missing at {DOCKER_HOST} ({exc})")
    yield api
    api.close()


def _sandbox(limits: SandboxLimits | None = None, **kwargs):
    from trainer_core.sandboxes.docker import DockerSandbox

    return DockerSandbox(limits or SandboxLimits(wall_seconds=10), base_url=DOCKER_HOST, **kwargs)


def _exists(api, container_id: str) -> bool:
    import docker

    try:
        api.inspect_container(container_id)
    except docker.errors.NotFound:
        return False
    return True


@pytest.fixture(scope="module")
def shared(docker_api):
    sandbox = _sandbox(
        SandboxLimits(wall_seconds=10, memory_mb=256, pids=64, output_bytes=4000),
        files={"calc.py": SOURCE, "notes/todo.txt": "fix add\n", "sentinel": "keep me\n"},
    )
    with sandbox:
        yield sandbox


@pytest.fixture
def sb(shared):
    """The shared sandbox, back at its baseline."""
    shared.reset()
    return shared


def call(sandbox, tool, **params) -> ToolResult:
    result = run_tool(sandbox, tool, params)
    assert isinstance(result, ToolResult)
    return result


def _ls(sandbox, path: str = ".") -> list[str]:
    return sandbox.exec(["ls", "-A", path]).stdout.split()


# --- the coding tools -------------------------------------------------------------------------


def test_read_file_numbers_lines_and_ranges(sb):
    lines = call(sb, "read_file", file_path="calc.py").observation.splitlines()
    assert lines[0] == "calc.py"
    assert lines[1] == "1\tdef add(a, b):" and lines[-1] == "6\t    return a - b"
    for start, end, expected in [
        (2, 2, ["2\t    return a - b"]),
        (5, None, ["5\tdef sub(a, b):", "6\t    return a - b"]),
        (None, 1, ["1\tdef add(a, b):"]),
        (5, 99, ["5\tdef sub(a, b):", "6\t    return a - b"]),
    ]:
        params = {"file_path": "calc.py", "start_line": start, "end_line": end}
        result = run_tool(sb, "read_file", {k: v for k, v in params.items() if v is not None})
        header, *body = result.observation.splitlines()
        assert result.error is None and "of 6" in header
        assert body == expected
    past = call(sb, "read_file", file_path="calc.py", start_line=9)
    assert past.error == "invalid_params" and "past the end" in past.observation


def test_read_file_missing_binary_empty_and_directory(sb):
    result = call(sb, "read_file", file_path="nope.py")
    assert result.error == "sandbox_error" and "no such file" in result.observation
    sb.write_file("blob.bin", b"\x00\x01\x02")
    result = call(sb, "read_file", file_path="blob.bin")
    assert result.error == "sandbox_error" and "binary" in result.observation
    sb.write_file("empty.txt", "")
    assert call(sb, "read_file", file_path="empty.txt").observation == "empty.txt is empty."
    result = call(sb, "read_file", file_path="notes")
    assert result.error == "sandbox_error" and "directory" in result.observation


def test_line_numbers_match_grep(sb):
    sb.write_file("odd.txt", "a\fb\nc\r\nd")  # form feed, CRLF, no final newline
    lines = call(sb, "read_file", file_path="odd.txt").observation.split("\n")[1:]
    assert [line.split("\t")[0] for line in lines] == ["1", "2", "3"]
    assert call(sb, "grep", pattern="^d", path="odd.txt").observation == "3:d"


def test_write_then_read_and_edit_refuses_non_utf8(sb):
    result = call(sb, "write_file", file_path="pkg/sub/new.py", content="A = 1\nB = 2\n")
    assert result.error is None and "12 bytes" in result.observation
    assert sb.read_file("pkg/sub/new.py") == b"A = 1\nB = 2\n"
    owner = sb.exec(["stat", "-c", "%u:%g %a", "pkg", "pkg/sub", "pkg/sub/new.py"]).stdout
    assert owner.split("\n")[:3] == ["65534:65534 755", "65534:65534 755", "65534:65534 644"]
    sb.write_file("latin1.txt", "café\n".encode("latin-1"))
    result = call(sb, "edit_file", file_path="latin1.txt", old_string="caf", new_string="tea")
    assert result.error == "sandbox_error" and "not UTF-8" in result.observation
    assert sb.read_file("latin1.txt") == "café\n".encode("latin-1")


def test_write_keeps_the_mode_of_an_existing_file(sb):
    sb.write_file("run.sh", "#!/bin/sh\necho one\n")
    assert sb.exec(["chmod", "755", "run.sh"]).ok
    sb.write_file("run.sh", "#!/bin/sh\necho two\n")
    assert sb.exec(["./run.sh"]).stdout == "two\n"


def test_paths_must_stay_in_the_workspace(sb):
    for path in ("../escape.txt", "/tmp/escape.txt", "a/../../escape.txt"):
        result = call(sb, "write_file", file_path=path, content="x")
        assert result.error == "sandbox_error", path
        assert "workspace" in result.observation
    assert not sb.exec(["ls", "/escape.txt", "/tmp/escape.txt"]).ok
    for path in ("../", "/etc", "notes/../../x"):
        assert call(sb, "grep", pattern="root", path=path).error == "sandbox_error", path


def test_symlinks_out_of_the_workspace_are_refused(sb):
    assert sb.exec("ln -s /etc etc && ln -s /etc/passwd pw && ln -s calc.py alias").ok
    assert sb.exec("mkdir real && ln -s real inside && ln -s /tmp tmp").ok
    for path in ("etc/passwd", "pw", "etc"):
        result = call(sb, "read_file", file_path=path)
        assert result.error == "sandbox_error" and "outside the workspace" in result.observation
    result = call(sb, "write_file", file_path="tmp/planted.txt", content="x")
    assert result.error == "sandbox_error" and "outside the workspace" in result.observation
    assert not sb.exec(["ls", "/tmp/planted.txt"]).ok
    assert sb.read_file("alias") == SOURCE.encode()  # a link inside the workspace is fine
    sb.write_file("inside/f.txt", "via link\n")
    assert sb.exec(["cat", "real/f.txt"]).stdout == "via link\n"


def test_edit_file_unique_missing_and_ambiguous(sb):
    result = call(
        sb,
        "edit_file",
        file_path="calc.py",
        old_string="def add(a, b):\n    return a - b",
        new_string="def add(a, b):\n    return a + b",
    )
    assert result.error is None and "line 1" in result.observation
    assert sb.read_file("calc.py").decode() == SOURCE.replace("a - b", "a + b", 1)
    missing = call(sb, "edit_file", file_path="calc.py", old_string="a * b", new_string="a")
    assert missing.error == "not_found" and "found 0 times" in missing.observation
    sb.reset()
    ambiguous = call(sb, "edit_file", file_path="calc.py", old_string="a - b", new_string="0")
    assert ambiguous.error == "ambiguous" and "found 2 times" in ambiguous.observation
    assert sb.read_file("calc.py").decode() == SOURCE
    absent = call(sb, "edit_file", file_path="x.py", old_string="a", new_string="b")
    assert absent.error == "sandbox_error"


def test_bash_exit_codes_output_and_timeout(sb):
    ok = call(sb, "bash", command="echo out; echo err >&2")
    assert ok.exit_code == 0 and ok.error is None
    assert ok.observation == "out\n[stderr]\nerr\n[exit code 0]"
    failed = call(sb, "bash", command="exit 3")
    assert failed.exit_code == 3 and failed.error == "nonzero_exit"
    assert call(sb, "bash", command="no-such-command-xyz").exit_code == 127
    slow = call(sb, "bash", command="sleep 5", timeout=0.5)
    assert slow.error == "timeout" and slow.exit_code == 124
    assert "timed out after 0.5s" in slow.observation and slow.duration < 2
    result = call(sb, "bash", command="pwd; ls /")
    assert result.observation.splitlines()[0] == "/work"


def test_grep_finds_matches(sb):
    result = call(sb, "grep", pattern="return a [-+] b")
    assert result.error is None and result.observation.splitlines() == [
        "calc.py:2:    return a - b",
        "calc.py:6:    return a - b",
    ]
    scoped = call(sb, "grep", pattern="FIX", path="notes", ignore_case=True)
    assert scoped.observation == "notes/todo.txt:1:fix add"
    assert call(sb, "grep", pattern="FIX", path="notes").observation == "No matches."
    sb.write_file("flags.txt", "use --version to see it\n")
    assert (
        call(sb, "grep", pattern="--version").observation == "flags.txt:1:use --version to see it"
    )


def test_grep_never_runs_the_pattern_through_a_shell(sb):
    patterns = [
        "'; rm -rf / #",
        "$(touch pwned)",
        "`touch pwned`",
        "x; touch pwned",
        "x && touch pwned",
        "| touch pwned",
        "$(rm sentinel)",
        '"; rm sentinel; echo "',
    ]
    for pattern in patterns:
        sb.write_file("haystack.txt", f"literal {pattern} here\n")
        result = call(sb, "grep", pattern=pattern)
        assert result.error in (None, "nonzero_exit"), pattern
    assert "pwned" not in _ls(sb)
    assert sb.read_file("sentinel") == b"keep me\n"


def test_list_dir(sb):
    root = call(sb, "list_dir")
    assert root.error is None
    for name in ("calc.py", "notes", "sentinel"):
        assert name in root.observation
    sub = call(sb, "list_dir", path="notes")
    assert "todo.txt" in sub.observation and "calc.py" not in sub.observation
    assert call(sb, "list_dir", path="nope").error == "nonzero_exit"
    assert call(sb, "list_dir", path="/").error == "sandbox_error"


def test_git_init_add_commit_log(sb):
    assert call(sb, "git", args=["log"]).error == "nonzero_exit"  # not a repository yet
    assert call(sb, "git", args=["init", "-q"]).exit_code == 0
    assert call(sb, "git", args=["add", "-A"]).exit_code == 0
    commit = call(sb, "git", args=["commit", "-q", "-m", "initial; $(touch pwned)"])
    assert commit.exit_code == 0, commit.observation
    call(
        sb,
        "edit_file",
        file_path="calc.py",
        old_string="add(a, b):\n    return a - b",
        new_string="add(a, b):\n    return a + b",
    )
    status = call(sb, "git", args=["status", "--short"])
    assert status.observation.splitlines()[0] == " M calc.py"
    assert call(sb, "git", args=["commit", "-qam", "fix add"]).exit_code == 0
    log = call(sb, "git", args=["log", "--format=%s|%an"])
    assert log.observation.splitlines()[:2] == [
        "fix add|Steplab Agent",
        "initial; $(touch pwned)|Steplab Agent",
    ]
    assert "pwned" not in _ls(sb)


def test_submit_and_finish(sb):
    submitted = call(sb, "submit", answer="42")
    assert submitted.done and submitted.answer == "42" and submitted.error is None
    assert call(sb, "finish").done


def test_interrupting_a_tool_call(sb):
    timer = threading.Timer(0.3, sb.interrupt)
    timer.start()
    try:
        result = call(sb, "bash", command="sleep 30")
    finally:
        timer.cancel()
    assert result.exit_code != 0 and result.duration < 3
    assert sb.exec(["true"]).ok  # the sandbox still works


# --- isolation and limits --------------------------------------------------------------------


def test_isolation_no_network_read_only_root_non_root(sb):
    assert sb.exec(["id", "-u"]).stdout == "65534\n"
    assert sb.exec(["id", "-g"]).stdout == "65534\n"
    caps = sb.exec(["grep", "-E", "^(CapEff|CapPrm|NoNewPrivs)", "/proc/self/status"]).stdout
    assert "CapEff:\t0000000000000000" in caps and "NoNewPrivs:\t1" in caps
    usr = sb.exec("touch /usr/pwned")
    assert usr.exit_code != 0 and "Read-only file system" in usr.stderr
    assert not sb.exec("echo x > /etc/pwned").ok
    net = sb.exec(
        [
            "python3",
            "-c",
            "import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)",
        ]
    )
    assert net.exit_code != 0 and "unreachable" in net.stderr.lower()
    assert sb.exec(["ls", "/sys/class/net"]).stdout.split() == ["lo"]
    assert sb.exec("echo scratch > /tmp/x && cat /tmp/x").stdout == "scratch\n"
    assert sb.info.backend == "docker" and sb.info.isolated is True
    assert sb.info.details["image"] == IMAGE and sb.info.details["docker_host"] == DOCKER_HOST


def test_endless_loop_is_killed_at_the_timeout(sb):
    started = time.monotonic()
    result = sb.exec("while true; do :; done", timeout=1)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code == 124 and not result.ok
    assert 1.0 <= elapsed < 3.0, elapsed
    hidden = sb.exec("sleep 61 & sleep 62 & wait", timeout=1)
    assert hidden.timed_out and hidden.duration < 3
    # Nothing of either command is left running.
    listing = sb.exec("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done").stdout
    commands = [line.strip() for line in listing.splitlines()]
    assert not [c for c in commands if c.startswith(("sleep 6", "bash -c while true"))], commands


def test_huge_output_is_truncated(sb):
    result = sb.exec("head -c 3000000 /dev/zero | tr '\\0' x; echo done >&2")
    assert result.ok and result.truncated
    assert result.stdout.startswith("x" * 4000)
    assert result.stdout.endswith("[... output truncated: 2996000 bytes dropped ...]\n")
    assert result.stderr == "done\n"


def test_exec_argv_stdin_and_environment(sb):
    result = sb.exec(["echo", "$(id)", "; ls", "*"])
    assert result.stdout == "$(id) ; ls *\n"
    assert sb.exec(["cat"], stdin="from stdin\n").stdout == "from stdin\n"
    assert sb.exec(["cat"]).stdout == ""  # no stdin: /dev/null
    env = sb.exec(["env"]).stdout
    assert "HOME=/work" in env and "DOCKER_HOST" not in env
    with pytest.raises(SandboxError):
        sb.exec([])
    with pytest.raises(SandboxError):
        sb.exec("true", timeout=0)


def test_snapshot_restore_reset(sb):
    sb.write_file("calc.py", "changed\n")
    sb.exec("mkdir -p build && echo o > build/out && chmod 500 build")
    snap = sb.snapshot()
    sb.write_file("calc.py", "changed again\n")
    sb.exec("rm sentinel && touch extra")
    sb.restore(snap)
    assert sb.read_file("calc.py") == b"changed\n"
    assert sorted(_ls(sb)) == ["build", "calc.py", "notes", "sentinel"]
    assert sb.read_file("build/out") == b"o\n"
    sb.reset()
    assert sb.read_file("calc.py") == SOURCE.encode()
    assert sorted(_ls(sb)) == ["calc.py", "notes", "sentinel"]
    sb.restore(snap)  # a snapshot survives a reset
    assert sb.read_file("calc.py") == b"changed\n"
    with pytest.raises(SandboxError, match="no snapshot"):
        sb.restore("0123456789abcdef")
    with pytest.raises(SandboxError, match="not a snapshot id"):
        sb.restore("../etc")


def test_limits_memory_and_pids(docker_api):
    limits = SandboxLimits(wall_seconds=20, memory_mb=128, pids=32)
    with _sandbox(limits) as sandbox:
        hog = sandbox.exec(["python3", "-c", "b = bytearray(400 * 1024 * 1024); print('alive')"])
        assert hog.exit_code != 0 and "alive" not in hog.stdout
        forks = sandbox.exec(
            [
                "python3",
                "-c",
                "import os, time\n"
                "n = 0\n"
                "try:\n"
                "    for _ in range(100):\n"
                "        if os.fork() == 0:\n"
                "            time.sleep(5); os._exit(0)\n"
                "        n += 1\n"
                "except OSError as e:\n"
                "    print('stopped at', n, e.errno)\n",
            ]
        )
        assert "stopped at" in forks.stdout, forks
        assert int(forks.stdout.split()[2]) < 32


# --- seeding, setup and lifecycle -------------------------------------------------------------


def test_files_and_repo_go_in_as_archives(docker_api, tmp_path):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('repo')\n")
    (repo / "README").write_text("from the repo\n")
    (repo / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (repo / "tool.sh").chmod(0o755)
    files = {"README": "overridden\n", "deep/er/data.bin": b"\x00\xff"}
    with _sandbox(repo=str(repo), files=files, setup=["echo built > built.txt"]) as sandbox:
        assert sandbox.read_file("README") == b"overridden\n"
        assert sandbox.read_file("deep/er/data.bin") == b"\x00\xff"
        assert sandbox.exec(["python3", "src/app.py"]).stdout == "repo\n"
        assert sandbox.exec(["./tool.sh"]).stdout == "tool\n"
        assert sandbox.read_file("built.txt") == b"built\n"
        owners = sandbox.exec("stat -c %u . README src src/app.py deep/er built.txt").stdout
        assert set(owners.split()) == {"65534"}
        sandbox.write_file("README", "edited\n")
        sandbox.reset()
        assert sandbox.read_file("README") == b"overridden\n"
        assert sandbox.read_file("built.txt") == b"built\n"

    tarball = tmp_path / "repo.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(repo, arcname=".")
    with _sandbox(repo=str(tarball)) as sandbox:
        assert sandbox.read_file("src/app.py") == b"print('repo')\n"
        assert sandbox.exec(["./tool.sh"]).stdout == "tool\n"

    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tf:
        info = tarfile.TarInfo("../../etc/evil")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    sandbox = _sandbox(repo=str(evil))
    with pytest.raises(SandboxError, match="escapes the workspace"):
        sandbox.start()


def test_failed_setup_raises_and_removes_the_container(docker_api):
    sandbox = _sandbox(setup=["echo broken >&2; exit 4"])
    with pytest.raises(SandboxError, match="exit code 4.*broken"):
        sandbox.start()
    assert sandbox.container_id is not None
    assert not _exists(docker_api, sandbox.container_id)


def test_close_removes_the_container(docker_api):
    sandbox = _sandbox()
    with pytest.raises(SandboxError, match="not started"):
        sandbox.exec(["true"])
    sandbox.start()
    container = sandbox.container_id
    assert _exists(docker_api, container)
    inspect = docker_api.inspect_container(container)
    assert inspect["HostConfig"]["ReadonlyRootfs"] is True
    assert inspect["Config"]["User"] == "65534:65534"
    sandbox.close()
    assert not _exists(docker_api, container)
    sandbox.close()  # idempotent
    with pytest.raises(SandboxError, match="closed"):
        sandbox.exec(["true"])
    with pytest.raises(SandboxError, match="closed"):
        sandbox.read_file("x")


def test_unreachable_api_and_missing_image_are_clear_errors(docker_api):
    from trainer_core.sandboxes.docker import DockerSandbox

    nowhere = DockerSandbox(base_url="unix:///nonexistent/docker.sock", client_timeout=5)
    with pytest.raises(SandboxError, match="podman-sandbox.sh"):
        nowhere.start()
    missing = _sandbox(image="localhost/steplab-no-such-image")
    with pytest.raises(SandboxError, match="podman-sandbox.sh"):
        missing.start()


# --- the coding environment on the docker backend ------------------------------------------


def test_coding_episode_on_the_docker_backend(docker_api, monkeypatch):
    from tests.trainer_core.envs.test_coding_env import TASK
    from trainer_core.envs import make

    monkeypatch.setenv("DOCKER_HOST", DOCKER_HOST)
    env = make("steplab/sandbox", backend="docker")
    try:
        first = env.reset(task=TASK)
        assert first.info["isolated"] is True
        sandbox = env.unwrapped.sandbox
        assert (
            sandbox.info.backend == "docker" and sandbox.info.details["docker_host"] == DOCKER_HOST
        )
        ts = None
        for action in TASK["reference_solution"]:
            ts = env.step(action)
            if ts.done:
                break
        assert ts is not None and ts.terminated and ts.reward == 1.0, ts.observation
    finally:
        env.close()
