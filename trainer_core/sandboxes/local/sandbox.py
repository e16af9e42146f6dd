"""The :class:`LocalSandbox`: a throwaway workspace directory on this machine, each command run
under bubblewrap with rlimits, in the sandbox's cgroup (made once when it starts, removed when
it closes). It composes the command line (:mod:`.command`), the limits (:mod:`.limits`,
:mod:`.cgroup_v1`, :mod:`.cgroup_v2`), process control (:mod:`.process`) and the host-side
workspace (:mod:`.workspace`); snapshots are copies of the workspace next to it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
import weakref

from trainer_core.errors import SandboxError
from trainer_core.sandboxes import registry
from trainer_core.sandboxes.base import ExecResult, SandboxInfo, SandboxLimits
from trainer_core.sandboxes.local import process
from trainer_core.sandboxes.local.command import command_line, shell
from trainer_core.sandboxes.local.host import HostSupport, host_support, warn_unisolated
from trainer_core.sandboxes.local.limits import NoCgroups, SandboxCgroups, rlimits_for
from trainer_core.sandboxes.local.workspace import copy_repo, resolve_path, rmtree
from trainer_core.sandboxes.shared import (
    SANDBOX_WORKDIR,
    OutputCapture,
    WorkspaceSandbox,
    command_env,
    exec_argv,
    exec_result,
    wall_seconds,
)


class LocalSandbox(WorkspaceSandbox):
    """A throwaway workspace on this machine; commands under bubblewrap when it works.

    ``files`` (path -> text) and ``repo`` (a directory, or a .tar/.tar.gz/.tgz tarball) seed the
    workspace (the repo first, then the files over it), then each ``setup`` shell command runs;
    the result is the baseline that ``reset()`` returns to.
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen dataclass
        *,
        files: dict[str, str] | None = None,
        repo: str | None = None,
        setup: list[str] | None = None,
        workdir_parent: str | None = None,
    ) -> None:
        super().__init__(limits, setup)
        self._files = dict(files or {})
        self._repo = repo
        self._workdir_parent = workdir_parent
        self._root: str | None = None
        self._workspace: str | None = None
        self._finalizer: weakref.finalize | None = None
        self._support: HostSupport | None = None
        self._cgroups: SandboxCgroups = NoCgroups()

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._root is not None:
            raise SandboxError("this sandbox was already started; make a new one")
        self._support = support = host_support()
        if support.bwrap is None:
            warn_unisolated(support.bwrap_detail)
        self._cgroups = cgroups = support.sandbox_cgroups(self.limits)  # SandboxError: none
        try:
            self._root = tempfile.mkdtemp(prefix="steplab-sandbox-", dir=self._workdir_parent)
        except BaseException:
            cgroups.remove()
            raise
        # recorded, so that the reaper removes both should this process be killed
        record = registry.register(workspace=self._root, cgroups=cgroups.groups)
        self._finalizer = weakref.finalize(self, _remove, self._root, cgroups, record)
        self._workspace = os.path.join(self._root, "work")
        os.mkdir(self._workspace)
        os.mkdir(os.path.join(self._root, "snapshots"))
        try:
            if self._repo is not None:
                copy_repo(self._repo, self._workspace)
            for path, content in self._files.items():
                self.write_file(path, content)
            self._setup_baseline()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.interrupt()
        if self._finalizer is not None:
            self._finalizer()  # removes the workspace, every snapshot and the cgroups
        self._snapshots.clear()

    def _is_started(self) -> bool:
        return self._root is not None

    @property
    def workspace(self) -> str:
        """The workspace directory on the host (``/work`` inside the sandbox)."""
        self._require_started()
        assert self._workspace is not None
        return self._workspace

    @property
    def info(self) -> SandboxInfo:
        support = self._support or host_support()
        isolated = support.bwrap is not None
        return SandboxInfo(
            backend="local",
            isolated=isolated,
            details={
                "bwrap": support.bwrap_detail,
                "network": self.limits.network if isolated else "host network (not isolated)",
                "cgroups": support.cgroup_detail,
                "cgroup_version": self._cgroups.version or None,
                "cgroup_groups": list(self._cgroups.groups),
                "cgroup_memory": support.cgroup_memory and bool(self._cgroups.groups),
                "cgroup_pids": support.cgroup_pids and bool(self._cgroups.groups),
                "rlimits": ["cpu", "as", "fsize", "nproc"],
                "fork_bomb_containment": _fork_bomb_containment(self._cgroups),
                "workspace": self._workspace,
                "workdir_inside": SANDBOX_WORKDIR if isolated else self._workspace,
            },
        )

    # --- commands ---------------------------------------------------------------------------

    def exec(
        self, cmd: str | list[str], *, timeout: float | None = None, stdin: str | None = None
    ) -> ExecResult:
        self._require_started()
        assert self._workspace is not None and self._support is not None
        argv = exec_argv(cmd, shell)
        wall = wall_seconds(self.limits, timeout)
        isolated = self._support.bwrap is not None
        full = command_line(self._support.bwrap, self._workspace, argv, network=self.limits.network)
        cgroups = self._cgroups.command()
        started = time.monotonic()
        try:
            proc = process.spawn(
                full,
                cwd=self._workspace,
                env=command_env(isolated, self._workspace),
                stdin_piped=stdin is not None,
                rlimits=rlimits_for(self.limits, isolated=isolated),
                cgroups=cgroups,
                held=isolated,
                deadline=started + wall,
            )
        except BaseException as exc:
            cgroups.release()  # whatever failed: the sandbox's groups are not held by it
            if isinstance(exc, FileNotFoundError) and not isolated:
                return ExecResult("", f"{argv[0]}: command not found\n", 127, 0.0)
            if isinstance(exc, FileNotFoundError):
                raise SandboxError(f"cannot start bubblewrap: {exc}") from exc
            if isinstance(exc, OSError | subprocess.SubprocessError | ValueError):
                raise SandboxError(f"cannot start {argv[0]!r}: {exc}") from exc
            raise
        run = process.Run(proc, cgroups)
        out, err, timed_out = self._watch(run, started + wall, stdin)
        return exec_result(
            out,
            err,
            exit_code=process.exit_code(run, timed_out),
            duration=time.monotonic() - started,
            timed_out=timed_out,
        )

    def _watch(
        self, run: process.Run, deadline: float, stdin: str | None
    ) -> tuple[OutputCapture, OutputCapture, bool]:
        """Collect the output of a spawned command (tracked for ``interrupt()`` meanwhile),
        then reap it with whatever it left behind."""
        with self._lock:
            self._running.add(run)
            closed = self._closed
        if closed:
            self._kill(run)
        try:
            return process.collect(run, deadline, stdin, self.limits.output_bytes)
        finally:
            with self._lock:
                self._running.discard(run)
            process.reap(run)

    def _kill(self, run: process.Run) -> None:
        process.kill(run)

    # --- files ------------------------------------------------------------------------------

    def _resolve(self, path: str) -> str:
        self._require_started()
        assert self._workspace is not None
        return resolve_path(self._workspace, path)

    def read_file(self, path: str) -> bytes:
        target = self._resolve(path)
        try:
            with open(target, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            raise SandboxError(f"{path!r}: no such file in the workspace") from None
        except IsADirectoryError:
            raise SandboxError(f"{path!r} is a directory, not a file") from None
        except OSError as exc:
            raise SandboxError(f"cannot read {path!r}: {exc.strerror or exc}") from None

    def write_file(self, path: str, content: str | bytes) -> None:
        target = self._resolve(path)
        if target == os.path.realpath(self.workspace) or os.path.isdir(target):
            raise SandboxError(f"{path!r} is a directory; give a file path")
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise SandboxError(f"cannot write {path!r}: {exc.strerror or exc}") from None

    # --- snapshots --------------------------------------------------------------------------

    def snapshot(self) -> str:
        self._require_started()
        assert self._root is not None and self._workspace is not None
        snapshot_id = uuid.uuid4().hex[:16]
        dest = os.path.join(self._root, "snapshots", snapshot_id)
        try:
            shutil.copytree(self._workspace, dest, symlinks=True)
        except (OSError, shutil.Error) as exc:
            rmtree(dest)
            raise SandboxError(f"cannot snapshot the workspace: {exc}") from None
        self._snapshots[snapshot_id] = dest
        return snapshot_id

    def restore(self, snapshot_id: str) -> None:
        self._require_started()
        assert self._workspace is not None
        source = self._stored_snapshot(snapshot_id)
        with os.scandir(self._workspace) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        try:
            shutil.copytree(source, self._workspace, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            raise SandboxError(f"cannot restore snapshot {snapshot_id!r}: {exc}") from None


def _remove(root: str, cgroups: SandboxCgroups, record: str | None) -> None:
    cgroups.remove()
    rmtree(root)
    registry.unregister(record)


def _fork_bomb_containment(cgroups: SandboxCgroups) -> str:
    """What stops a fork bomb here (the kernel never applies RLIMIT_NPROC to root)."""
    if cgroups.groups:
        return f"pids cgroup {cgroups.version} (pids.max)"
    if os.geteuid() != 0:
        return "RLIMIT_NPROC only"
    return (
        "none: no pids cgroup and RLIMIT_NPROC does not apply to root; "
        "a fork bomb is bounded only by the wall-time limit"
    )
