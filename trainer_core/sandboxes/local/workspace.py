"""The local workspace on the host: resolving an agent's path inside it (never out of it, by
``..`` or through a symlink), seeding it from a repo (a directory, or a tarball checked member
by member), and removing a tree even where a command made parts of it read-only."""

from __future__ import annotations

import os
import shutil
import stat
import tarfile

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.shared import check_relative_path


def resolve_path(workspace: str, path: str) -> str:
    """The host path of workspace-relative ``path``; SandboxError if it leads outside."""
    check_relative_path(path)
    root = os.path.realpath(workspace)
    target = os.path.realpath(os.path.join(root, path))
    if target != root and not target.startswith(root + os.sep):
        raise SandboxError(f"{path!r} resolves outside the workspace; that is not allowed")
    return target


def copy_repo(repo: str, workspace: str) -> None:
    """Copy a directory, or extract a tarball, into the workspace."""
    if os.path.isdir(repo):
        try:
            shutil.copytree(repo, workspace, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            raise SandboxError(f"cannot copy repo {repo!r}: {exc}") from None
    elif os.path.isfile(repo):
        _extract_tar(repo, workspace)
    else:
        raise SandboxError(f"repo {repo!r} is neither a directory nor a tarball")


def rmtree(path: str) -> None:
    """Remove a tree even where a command made parts of it read-only."""

    def make_writable(func, p, _exc):
        try:
            parent = os.path.dirname(p)
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IXUSR)
            func(p)
        except OSError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=make_writable)


def _within(base: str, path: str) -> bool:
    return path == base or path.startswith(base + os.sep)


def _check_member(base: str, member: tarfile.TarInfo) -> None:
    """SandboxError if a tarball member would land (or link) outside ``base``, or is a device."""
    name = member.name
    target = os.path.normpath(os.path.join(base, name))
    if os.path.isabs(name) or not _within(base, target):
        raise SandboxError(f"tarball member {name!r} escapes the workspace; refusing it")
    if member.issym():
        link = member.linkname
        resolved = os.path.normpath(os.path.join(os.path.dirname(target), link))
        if os.path.isabs(link) or not _within(base, resolved):
            raise SandboxError(f"tarball symlink {name!r} -> {link!r} points outside the workspace")
    elif member.islnk():
        resolved = os.path.normpath(os.path.join(base, member.linkname))
        if not _within(base, resolved):
            raise SandboxError(f"tarball hard link {name!r} -> {member.linkname!r} points outside")
    elif member.ischr() or member.isblk():
        raise SandboxError(f"tarball member {name!r} is a device file; refusing it")


def _extract_tar(archive: str, dest: str) -> None:
    """Extract a tarball, rejecting members that would land (or link) outside ``dest``."""
    base = os.path.realpath(dest)
    try:
        tf = tarfile.open(archive)  # closed by the with below
    except (tarfile.TarError, OSError) as exc:
        raise SandboxError(f"repo {archive!r} is not a readable tarball: {exc}") from None
    with tf:
        for member in tf.getmembers():
            _check_member(base, member)
        try:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(base, filter="data")
            else:  # pragma: no cover - Python < 3.11.4; members were checked above
                tf.extractall(base)  # noqa: S202
        except (tarfile.TarError, OSError) as exc:
            raise SandboxError(f"cannot extract {archive!r}: {exc}") from None
