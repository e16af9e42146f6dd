"""The docker sandbox: one long-lived container per sandbox, driven through the Docker API.

Works with Docker and with podman's Docker API (``scripts/podman-sandbox.sh`` sets that up
here and builds ``localhost/steplab-sandbox``: Debian bookworm minbase with python3 and git).
The ``docker`` SDK is imported only when a :class:`DockerSandbox` starts.

The container (``start()``):

* runs a tiny reaping loop as PID 1 (``sleep`` in a ``sh`` loop; orphans are reaped by it);
* has no network unless ``limits.network`` (``network_mode="none"``);
* a read-only root; the workspace ``/work`` and ``/tmp`` are tmpfs mounts (``/work`` is the
  only place meant to be written; it counts against the container's memory when written from
  inside);
* runs as ``nobody`` (65534:65534), with every capability dropped and ``no-new-privileges``;
* limits: ``memory_mb`` -> cgroup memory (no extra swap), ``pids`` -> the pids cgroup,
  ``cpu_seconds`` and ``file_size_mb`` -> RLIMIT_CPU / RLIMIT_FSIZE for every process, the
  ``cpus`` argument -> a CPU quota (``nano_cpus``), nofile 1024:20000 and nproc 1024.

``files``, ``repo`` (a directory or a tarball) and every later ``write_file`` go in as tar
archives (``put_archive``), owned by 65534; ``read_file`` and ``snapshot`` come out as archives
(``get_archive``). Snapshots are kept in memory (a tar of ``/work``); ``restore`` empties
``/work`` and puts the archive back.

Each ``exec`` runs ``timeout --signal=KILL <wall>`` inside the container under a small ``sh``
wrapper that records the command's process group and, once the command is over, kills what it
left behind in that group. The client also guards the deadline: if the exec has not ended half
a second after it, the group is SIGKILLed through a second exec, and if the stream still does
not end the connection is cut. A timed-out command reports ``timed_out=True`` and exit code
124, like the local backend. Processes that leave the group on purpose (``setsid``) outlive
their command until ``close()`` removes the container.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import posixpath
import re
import signal
import socket
import tarfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.base import ExecResult, Sandbox, SandboxInfo, SandboxLimits
from trainer_core.sandboxes.local import TIMEOUT_EXIT_CODE, _Capture, _command_env

_log = logging.getLogger(__name__)

DEFAULT_IMAGE = "localhost/steplab-sandbox"
STEPLAB_PODMAN_SOCKET = "unix:///run/steplab-podman.sock"  # scripts/podman-sandbox.sh
DOCKER_DEFAULT_SOCKET = "unix:///var/run/docker.sock"
WORKDIR = "/work"
USER = "65534:65534"  # nobody:nogroup
_UID = _GID = 65534
_RUN_DIR = "/tmp/.steplab"  # pid files and stdin files of running commands (mode 0700)
_SETUP_HINT = "run scripts/podman-sandbox.sh (or point DOCKER_HOST at a Docker daemon)"

_BACKSTOP = 0.5  # the exec is still running this long after its deadline: kill it from here
_DRAIN_AFTER_KILL = 1.5  # after that kill, how long to wait for the stream to end
_SNAPSHOT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MODE_DIR = 1 << 31  # Go's os.FileMode bits, as the archive stat header reports them
_MODE_SYMLINK = 1 << 27
_MAX_LINK_HOPS = 40

# PID 1: sleeps forever, reaps orphans (dash's wait reaps any child), exits on TERM/INT.
_INIT = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"]

# Runs one command: $1 run id, $2 seconds, $3 stdin file ('' for /dev/null), then the argv.
# timeout(1) puts itself in a new process group (pid = pgid), recorded for interrupt() and the
# client-side deadline; whatever the command leaves behind in that group dies with it.
_WRAPPER = r"""d=/tmp/.steplab id=$1 secs=$2 in=${3:-/dev/null}
shift 3
timeout --signal=KILL "$secs" "$@" <"$in" &
p=$!
echo "$p" >"$d/$id.pid"
wait "$p" 2>/dev/null
rc=$?
kill -9 "-$p" 2>/dev/null
rm -f "$d/$id.pid" "$d/$id.in"
exit "$rc"
"""

# Kills one command's process group (waits a little for its pid file: it may be starting).
_KILL_RUN = r"""f=/tmp/.steplab/$1.pid i=0
while [ ! -s "$f" ] && [ "$i" -lt 50 ]; do sleep 0.02; i=$((i + 1)); done
p=$(cat "$f" 2>/dev/null) || exit 0
kill -9 "-$p" "$p" 2>/dev/null
exit 0
"""

# Empties the workspace (made writable first: a command may have chmod-ed parts of it).
_WIPE = "chmod -R u+rwX /work 2>/dev/null; find /work -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +"


def _docker():
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxError(f"the docker sandbox needs the docker SDK (pip install docker): {exc}")
    return docker


def default_base_url() -> str:
    """``$DOCKER_HOST``, else the steplab podman socket when it exists, else Docker's socket."""
    env = os.environ.get("DOCKER_HOST")
    if env:
        return env
    if os.path.exists(STEPLAB_PODMAN_SOCKET.removeprefix("unix://")):
        return STEPLAB_PODMAN_SOCKET
    return DOCKER_DEFAULT_SOCKET


def _remove_container(api: Any, container_id: str) -> None:
    try:
        api.remove_container(container_id, force=True, v=True)
    except Exception as exc:
        if getattr(exc, "status_code", None) != 404:
            _log.warning("could not remove sandbox container %s: %s", container_id[:12], exc)
    try:
        api.close()
    except Exception:  # noqa: S110 - best effort
        pass


@dataclass(eq=False)
class _Run:
    run_id: str
    out: _Capture
    err: _Capture
    exec_id: str | None = None
    response: Any = None
    done: threading.Event = field(default_factory=threading.Event)
    killed: bool = False
    interrupted: bool = False
    cancelled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class DockerSandbox(Sandbox):
    """A container with the workspace at ``/work``; see the module docstring.

    ``files`` (path -> text or bytes) and ``repo`` (a directory, or a .tar/.tar.gz/.tgz
    tarball) seed the workspace (the repo first, then the files over it), then each ``setup``
    shell command runs; the result is the baseline that ``reset()`` returns to.
    ``base_url`` defaults to :func:`default_base_url`; ``client_timeout`` bounds every API call
    except a running command's output stream (that one is bounded by the command's timeout).
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen dataclass
        *,
        image: str = DEFAULT_IMAGE,
        files: dict[str, str | bytes] | None = None,
        repo: str | None = None,
        setup: list[str] | None = None,
        base_url: str | None = None,
        client_timeout: float = 60,
        cpus: float | None = 2.0,
        workspace_mb: int = 1024,
        tmp_mb: int = 256,
    ) -> None:
        self.limits = limits
        self.image = image
        self._files = dict(files or {})
        self._repo = repo
        self._setup = list(setup or [])
        self.base_url = base_url or default_base_url()
        self._client_timeout = client_timeout
        self._cpus = cpus
        self._workspace_mb = workspace_mb
        self._tmp_mb = tmp_mb
        self._api: Any = None
        self._container: str | None = None
        self._finalizer: weakref.finalize | None = None
        self._snapshots: dict[str, bytes] = {}
        self._baseline: str | None = None
        self._lock = threading.Lock()
        self._running: set[_Run] = set()
        self._started = False
        self._closed = False

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._started:
            raise SandboxError("this sandbox was already started; make a new one")
        self._started = True
        docker = _docker()
        try:
            self._api = api = docker.APIClient(
                base_url=self.base_url, timeout=self._client_timeout, version="auto"
            )
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"cannot reach the Docker API at {self.base_url}: {exc}; {_SETUP_HINT}"
            ) from None
        try:
            self._check_image()
            host_config = api.create_host_config(**self._host_config())
            created = api.create_container(
                self.image,
                _INIT,
                user=USER,
                working_dir=WORKDIR,
                environment=_command_env(True),
                hostname="sandbox",
                labels={"steplab.sandbox": "1"},
                network_disabled=not self.limits.network,
                host_config=host_config,
            )
            self._container = created["Id"]
            self._finalizer = weakref.finalize(self, _remove_container, api, self._container)
            api.start(self._container)
            self._put("/tmp", _tar([_Entry(".steplab", None, 0o700)]))
            self._put(WORKDIR, self._seed_archive())
            for command in self._setup:
                result = self.exec(command)
                if not result.ok:
                    why = (
                        f"timed out after {self.limits.wall_seconds}s"
                        if result.timed_out
                        else f"exit code {result.exit_code}"
                    )
                    detail = (result.stderr.strip() or result.stdout.strip())[-2000:]
                    raise SandboxError(
                        f"setup command {command!r} failed ({why}): {detail or '(no output)'}"
                    )
            self._baseline = self.snapshot()
        except BaseException as exc:
            self.close()
            if isinstance(exc, docker.errors.DockerException):
                raise SandboxError(f"cannot start the sandbox container: {exc}") from None
            raise

    def _check_image(self) -> None:
        docker = _docker()
        try:
            self._api.inspect_image(self.image)
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"the sandbox image {self.image!r} is not there ({self.base_url}); {_SETUP_HINT}"
            ) from None
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(
                f"cannot reach the Docker API at {self.base_url}: {exc}; {_SETUP_HINT}"
            ) from None

    def _host_config(self) -> dict[str, Any]:
        docker = _docker()
        lim = self.limits
        ulimits = [
            docker.types.Ulimit(name="nofile", soft=1024, hard=20000),
            docker.types.Ulimit(name="nproc", soft=1024, hard=1024),
        ]
        if lim.cpu_seconds is not None:
            n = int(lim.cpu_seconds)
            ulimits.append(docker.types.Ulimit(name="cpu", soft=n, hard=n))
        if lim.file_size_mb is not None:
            n = int(lim.file_size_mb) * 1024 * 1024
            ulimits.append(docker.types.Ulimit(name="fsize", soft=n, hard=n))
        config: dict[str, Any] = {
            "read_only": True,
            "tmpfs": {
                WORKDIR: f"rw,exec,nosuid,nodev,size={int(self._workspace_mb)}m",
                "/tmp": f"rw,exec,nosuid,nodev,size={int(self._tmp_mb)}m",
            },
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "ulimits": ulimits,
        }
        if not lim.network:
            config["network_mode"] = "none"
        if lim.memory_mb is not None:
            config["mem_limit"] = f"{int(lim.memory_mb)}m"
            config["memswap_limit"] = f"{int(lim.memory_mb)}m"  # no escaping into swap
        if lim.pids is not None:
            config["pids_limit"] = int(lim.pids)
        if self._cpus is not None:
            config["nano_cpus"] = int(self._cpus * 1e9)
        return config

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            runs = list(self._running)
        for run in runs:
            run.interrupted = True
        if self._finalizer is not None:
            self._finalizer()  # removes the container (its processes die with it)
        elif self._api is not None:
            try:
                self._api.close()
            except Exception:  # noqa: S110 - best effort
                pass
        for run in runs:
            if not run.done.wait(2.0):
                self._cancel(run)
        self._snapshots.clear()

    @property
    def container_id(self) -> str | None:
        return self._container

    @property
    def info(self) -> SandboxInfo:
        lim = self.limits
        return SandboxInfo(
            backend="docker",
            isolated=True,
            details={
                "image": self.image,
                "docker_host": self.base_url,
                "container": self._container,
                "network": lim.network,
                "user": USER,
                "read_only_root": True,
                "workdir_inside": WORKDIR,
                "memory_mb": lim.memory_mb,
                "pids": lim.pids,
                "cpus": self._cpus,
                "rlimits": ["cpu", "fsize", "nofile", "nproc"],
                "fork_bomb_containment": "pids cgroup (pids_limit)"
                if lim.pids is not None
                else "RLIMIT_NPROC 1024",
            },
        )

    # --- commands ---------------------------------------------------------------------------

    def exec(
        self, cmd: str | list[str], *, timeout: float | None = None, stdin: str | None = None
    ) -> ExecResult:
        self._require_started()
        if isinstance(cmd, str):
            argv = ["bash", "-c", cmd]
        elif isinstance(cmd, list | tuple) and cmd and all(isinstance(a, str) for a in cmd):
            argv = list(cmd)
        else:
            raise SandboxError("exec() takes a shell string or a non-empty list of strings (argv)")
        if any("\x00" in a for a in argv):
            raise SandboxError("a command must not contain NUL bytes")
        wall = self.limits.wall_seconds if timeout is None else float(timeout)
        if wall <= 0:
            raise SandboxError(f"timeout must be positive, got {timeout!r}")
        cap = self.limits.output_bytes
        run = _Run(uuid.uuid4().hex, _Capture(cap), _Capture(cap))
        docker = _docker()
        api = self._api
        started = time.monotonic()
        stdin_path = ""
        try:
            if stdin is not None:
                name = f"{run.run_id}.in"
                self._put(_RUN_DIR, _tar([_Entry(name, stdin.encode("utf-8"), 0o600)]))
                stdin_path = f"{_RUN_DIR}/{name}"
            wrapped = [
                "/bin/sh",
                "-c",
                _WRAPPER,
                "steplab-exec",
                run.run_id,
                f"{max(wall, 0.01):.3f}",
            ]
            wrapped += [stdin_path, *argv]
            created = api.exec_create(self._container, wrapped, user=USER, workdir=WORKDIR)
            run.exec_id = created["Id"]
            with self._lock:
                self._running.add(run)
            run.response = self._start_exec(run.exec_id)
        except (docker.errors.DockerException, OSError) as exc:
            with self._lock:
                self._running.discard(run)
            raise SandboxError(f"cannot run {argv[0]!r} in the sandbox container: {exc}") from None
        reader = threading.Thread(
            target=_pump, args=(run,), name=f"steplab-docker-exec-{run.run_id[:8]}", daemon=True
        )
        reader.start()
        if run.interrupted or self._closed:
            self._kill(run)
        timed_out = False
        try:
            deadline = started + wall
            give_up_at: float | None = None
            while not run.done.is_set():
                now = time.monotonic()
                if not run.killed and now >= deadline + _BACKSTOP:
                    timed_out = True
                    self._kill(run)
                    give_up_at = time.monotonic() + _DRAIN_AFTER_KILL
                elif run.killed and give_up_at is None:  # interrupt() from another thread
                    give_up_at = now + _DRAIN_AFTER_KILL
                if give_up_at is not None and now >= give_up_at:
                    self._cancel(run)
                    break
                limit = give_up_at if give_up_at is not None else deadline + _BACKSTOP
                run.done.wait(max(0.01, min(0.25, limit - now)))
            reader.join(2.0)
            exit_code = self._exit_code(run)
        finally:
            with self._lock:
                self._running.discard(run)
            _close_response(run.response)
        duration = time.monotonic() - started
        if exit_code == 128 + signal.SIGKILL and duration >= wall and not run.interrupted:
            timed_out = True  # timeout(1) inside the container killed it
        if timed_out:
            exit_code = TIMEOUT_EXIT_CODE
        elif run.interrupted:
            exit_code = -signal.SIGKILL
        elif exit_code is None:
            raise SandboxError(
                f"lost track of {argv[0]!r} in the sandbox container (no exit code); "
                "the container may be gone"
            )
        return ExecResult(
            stdout=run.out.text(),
            stderr=run.err.text(),
            exit_code=exit_code,
            duration=duration,
            timed_out=timed_out,
            truncated=bool(run.out.dropped or run.err.dropped),
        )

    def _start_exec(self, exec_id: str) -> Any:
        """POST /exec/{id}/start with the connection hijacked; returns the raw response. (The
        SDK's own readers read the socket under the HTTP layer's buffer, which can hold the
        first output bytes; :func:`_pump` reads through that buffer instead.)"""
        api = self._api
        response = api._post_json(
            api._url("/exec/{0}/start", exec_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": False, "Detach": False},
            stream=True,
        )
        api._raise_for_status(response)
        raw_sock = _raw_socket(response)
        if raw_sock is not None:
            raw_sock.settimeout(None)  # a quiet command may run longer than client_timeout
        return response

    def _exit_code(self, run: _Run) -> int | None:
        if run.exec_id is None:
            return None
        end = time.monotonic() + 3.0
        while True:
            try:
                state = self._api.exec_inspect(run.exec_id)
            except Exception:
                return None
            if not state.get("Running") or time.monotonic() > end:
                code = state.get("ExitCode")
                return code if isinstance(code, int) and not state.get("Running") else None
            time.sleep(0.01)

    def _kill(self, run: _Run) -> None:
        with run.lock:
            if run.killed:
                return
            run.killed = True
        if run.done.is_set() or self._container is None:
            return
        try:
            self._quick_exec(["/bin/sh", "-c", _KILL_RUN, "steplab-kill", run.run_id])
        except Exception as exc:
            _log.debug("could not kill run %s: %s", run.run_id, exc)

    def _cancel(self, run: _Run) -> None:
        """Cut the output stream (a reader blocked on it wakes up with EOF)."""
        run.cancelled = True
        sock = _raw_socket(run.response)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def interrupt(self) -> None:
        with self._lock:
            runs = list(self._running)
        for run in runs:
            run.interrupted = True
            self._kill(run)

    def _quick_exec(self, argv: list[str]) -> tuple[int | None, bytes]:
        """A short helper command (not subject to the output cap); (exit code, stdout+err)."""
        api = self._api
        exec_id = api.exec_create(self._container, argv, user=USER, workdir=WORKDIR)["Id"]
        output = api.exec_start(exec_id)
        code = api.exec_inspect(exec_id).get("ExitCode")
        return code, output or b""

    # --- files ------------------------------------------------------------------------------

    def _stat(self, path: str) -> dict | None:
        """The archive stat of ``path`` (symlinks: of the link, with ``linkTarget`` resolved),
        or None when it does not exist (a dangling symlink still has a stat)."""
        api = self._api
        url = api._url("/containers/{0}/archive", self._container)
        response = api.head(url, params={"path": path}, timeout=self._client_timeout)
        header = response.headers.get("X-Docker-Container-Path-Stat")
        if response.status_code == 404 and not header:
            return None
        if response.status_code not in (200, 404):
            api._raise_for_status(response)
        if not header:
            return None
        stat = json.loads(base64.b64decode(header))
        stat["exists"] = response.status_code == 200
        return stat

    def _resolve(self, path: str) -> tuple[str, dict | None, list[str]]:
        """(where ``path`` leads inside /work, its stat or None, the missing trailing parts).

        Relative paths only, never out of /work, neither by ``..`` nor through a symlink."""
        self._require_started()
        if not isinstance(path, str) or not path.strip():
            raise SandboxError("path must be a non-empty string relative to the workspace root")
        if "\x00" in path:
            raise SandboxError("path must not contain NUL bytes")
        if path.startswith("/"):
            raise SandboxError(
                f"{path!r} is an absolute path; give a path relative to the workspace root "
                "(e.g. 'src/main.py')"
            )
        norm = posixpath.normpath(posixpath.join(WORKDIR, path))
        if not _within(norm):
            raise SandboxError(f"{path!r} resolves outside the workspace; that is not allowed")
        parts = [p for p in norm[len(WORKDIR) :].split("/") if p]
        docker = _docker()
        current, stat = WORKDIR, None
        hops = 0
        try:
            for index, part in enumerate(parts):
                candidate = f"{current}/{part}"
                rest = parts[index + 1 :]
                stat = self._stat(candidate)
                if stat is not None and stat.get("mode", 0) & _MODE_SYMLINK:
                    target = posixpath.normpath(stat.get("linkTarget") or candidate)
                    hops += 1
                    if not _within(target) or hops > _MAX_LINK_HOPS:
                        raise SandboxError(
                            f"{path!r} resolves outside the workspace (through a symlink); "
                            "that is not allowed"
                        )
                    if not stat["exists"]:  # dangling: the name it points to is free
                        missing = [posixpath.basename(target), *rest]
                        return posixpath.join(target, *rest), None, missing
                    candidate = target
                    stat = self._stat(target)
                if stat is None:
                    return posixpath.join(candidate, *rest), None, [part, *rest]
                current = candidate
        except (docker.errors.DockerException, OSError) as exc:  # OSError: requests' errors too
            raise SandboxError(f"cannot look up {path!r} in the sandbox: {exc}") from None
        return current, stat, []

    def read_file(self, path: str) -> bytes:
        target, stat, _missing = self._resolve(path)
        if target == WORKDIR or (stat is not None and _is_dir(stat)):
            raise SandboxError(f"{path!r} is a directory, not a file")
        if stat is None:
            raise SandboxError(f"{path!r}: no such file in the workspace")
        docker = _docker()
        try:
            stream, _ = self._api.get_archive(self._container, target)
            data = b"".join(stream)
        except docker.errors.NotFound:
            raise SandboxError(f"{path!r}: no such file in the workspace") from None
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"cannot read {path!r}: {exc}") from None
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tf:
                for member in tf:
                    if member.isfile():
                        fh = tf.extractfile(member)
                        assert fh is not None
                        return fh.read()
        except tarfile.TarError as exc:
            raise SandboxError(
                f"cannot read {path!r}: bad archive from the daemon: {exc}"
            ) from None
        raise SandboxError(f"{path!r} is not a regular file")

    def write_file(self, path: str, content: str | bytes) -> None:
        target, stat, missing = self._resolve(path)
        if target == WORKDIR or (stat is not None and _is_dir(stat)):
            raise SandboxError(f"{path!r} is a directory; give a file path")
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        mode = (stat.get("mode", 0) & 0o777) if stat is not None else 0o644
        if missing:  # target does not exist: put its missing parents and itself into the base
            base = target
            for _ in missing:
                base = posixpath.dirname(base)
            entries = [
                _Entry("/".join(missing[: i + 1]), None, 0o755) for i in range(len(missing) - 1)
            ]
            entries.append(_Entry("/".join(missing), data, mode))
        else:
            base = posixpath.dirname(target)
            entries = [_Entry(posixpath.basename(target), data, mode or 0o644)]
        try:
            self._put(base, _tar(entries))
        except SandboxError as exc:
            raise SandboxError(f"cannot write {path!r}: {exc}") from None

    def _put(self, dest: str, archive: bytes) -> None:
        docker = _docker()
        try:
            ok = self._api.put_archive(self._container, dest, archive)
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"cannot copy into {dest} in the sandbox container: {exc}") from None
        if not ok:
            raise SandboxError(f"the daemon refused an archive for {dest}")

    # --- snapshots --------------------------------------------------------------------------

    def snapshot(self) -> str:
        self._require_started()
        docker = _docker()
        try:
            stream, _ = self._api.get_archive(self._container, f"{WORKDIR}/.")
            data = b"".join(stream)
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"cannot snapshot the workspace: {exc}") from None
        snapshot_id = uuid.uuid4().hex[:16]
        self._snapshots[snapshot_id] = data
        return snapshot_id

    def restore(self, snapshot_id: str) -> None:
        self._require_started()
        if not isinstance(snapshot_id, str) or not _SNAPSHOT_ID.match(snapshot_id):
            raise SandboxError(f"{snapshot_id!r} is not a snapshot id")
        data = self._snapshots.get(snapshot_id)
        if data is None:
            raise SandboxError(f"no snapshot {snapshot_id!r} in this sandbox")
        docker = _docker()
        try:
            code, output = self._quick_exec(["/bin/sh", "-c", _WIPE])
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"cannot restore snapshot {snapshot_id!r}: {exc}") from None
        if code != 0:
            detail = output.decode("utf-8", "replace").strip()[-500:]
            raise SandboxError(
                f"cannot restore snapshot {snapshot_id!r}: emptying the workspace failed "
                f"(exit {code}): {detail}"
            )
        self._put(WORKDIR, data)

    def reset(self) -> None:
        self._require_started()
        if self._baseline is None:
            raise SandboxError("no baseline yet: start() did not finish")
        self.restore(self._baseline)

    # --- helpers ----------------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")
        if self._container is None:
            raise SandboxError(
                "this sandbox is not started; call start() or use it in a with block"
            )

    def _seed_archive(self) -> bytes:
        """/work itself (owned by 65534), the repo, then the files, as one tar."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
            _add(out, _Entry(".", None, 0o755))
            if self._repo is not None:
                _add_repo(out, self._repo)
            made: set[str] = set()
            for path, content in self._files.items():
                rel = _relative(path)
                parts = rel.split("/")
                for i in range(1, len(parts)):
                    parent = "/".join(parts[:i])
                    if parent not in made:
                        made.add(parent)
                        _add(out, _Entry(parent, None, 0o755))
                data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
                _add(out, _Entry(rel, data, 0o644))
        return buf.getvalue()


# --- output stream ------------------------------------------------------------------------------


def _raw_socket(response: Any) -> socket.socket | None:
    try:
        raw = response.raw._fp.fp.raw  # SocketIO under the HTTP layer's buffer
    except AttributeError:
        return None
    return getattr(raw, "_sock", None) or (raw if isinstance(raw, socket.socket) else None)


def _close_response(response: Any) -> None:
    if response is None:
        return
    try:
        response.close()
    except Exception:  # noqa: S110 - best effort
        pass


def _pump(run: _Run) -> None:
    """Reads the multiplexed output stream (8-byte frame headers: stream, 0, 0, 0, size)."""
    try:
        fp = run.response.raw._fp.fp
        while True:
            header = _read_exactly(fp, 8)
            if len(header) < 8:
                break
            size = int.from_bytes(header[4:8], "big")
            payload = _read_exactly(fp, size)
            (run.err if header[0] == 2 else run.out).add(payload)
            if len(payload) < size:
                break
    except (OSError, ValueError, AttributeError):
        pass  # cut by _cancel, or the container went away
    finally:
        run.done.set()


def _read_exactly(fp: Any, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = fp.read(n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


# --- archives ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    name: str
    data: bytes | None  # None: a directory
    mode: int


def _info(name: str, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.uid, info.gid = _UID, _GID
    info.uname, info.gname = "nobody", "nogroup"
    info.mtime = int(time.time())
    return info


def _add(out: tarfile.TarFile, entry: _Entry) -> None:
    info = _info(entry.name, entry.mode)
    if entry.data is None:
        info.type = tarfile.DIRTYPE
        out.addfile(info)
    else:
        info.size = len(entry.data)
        out.addfile(info, io.BytesIO(entry.data))


def _tar(entries: list[_Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
        for entry in entries:
            _add(out, entry)
    return buf.getvalue()


def _is_dir(stat: dict) -> bool:
    return bool(stat.get("isDir") or stat.get("mode", 0) & _MODE_DIR)


def _within(path: str) -> bool:
    return path == WORKDIR or path.startswith(WORKDIR + "/")


def _relative(path: str) -> str:
    """A workspace-relative path for a seeded file; SandboxError if it leaves the workspace."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path or path.startswith("/"):
        raise SandboxError(f"file path {path!r} must be a non-empty path relative to /work")
    norm = posixpath.normpath(path)
    if norm in (".", "..") or norm.startswith("../"):
        raise SandboxError(f"file path {path!r} leaves the workspace; that is not allowed")
    return norm


def _owned(member: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    member = member.replace(
        name=name, uid=_UID, gid=_GID, uname="nobody", gname="nogroup", deep=False
    )
    member.mode &= 0o777  # no setuid/setgid/sticky bits
    return member


def _add_repo(out: tarfile.TarFile, repo: str) -> None:
    if os.path.isdir(repo):
        try:
            out.add(repo, arcname=".", filter=lambda m: _owned(m, m.name))
        except OSError as exc:
            raise SandboxError(f"cannot copy repo {repo!r}: {exc}") from None
        return
    if not os.path.isfile(repo):
        raise SandboxError(f"repo {repo!r} is neither a directory nor a tarball")
    try:
        tf = tarfile.open(repo)
    except (tarfile.TarError, OSError) as exc:
        raise SandboxError(f"repo {repo!r} is not a readable tarball: {exc}") from None
    with tf:
        for member in tf:
            name = member.name
            norm = posixpath.normpath(posixpath.join(WORKDIR, name))
            if name.startswith("/") or not _within(norm):
                raise SandboxError(f"tarball member {name!r} escapes the workspace; refusing it")
            rel = norm[len(WORKDIR) + 1 :] or "."
            if member.issym():
                link = member.linkname
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(norm), link))
                if link.startswith("/") or not _within(resolved):
                    raise SandboxError(
                        f"tarball symlink {name!r} -> {link!r} points outside the workspace"
                    )
                out.addfile(_owned(member, rel))
            elif member.islnk():
                resolved = posixpath.normpath(posixpath.join(WORKDIR, member.linkname))
                if not _within(resolved):
                    raise SandboxError(
                        f"tarball hard link {name!r} -> {member.linkname!r} points outside"
                    )
                linked = _owned(member, rel)
                linked.linkname = resolved[len(WORKDIR) + 1 :]
                out.addfile(linked)
            elif member.isdir():
                out.addfile(_owned(member, rel))
            elif member.isfile():
                fh = tf.extractfile(member)
                out.addfile(_owned(member, rel), fh)
            else:
                raise SandboxError(
                    f"tarball member {name!r} is not a file, directory or link; refusing it"
                )
