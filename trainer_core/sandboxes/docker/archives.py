"""Tar archives, the docker backend's way of moving files in and out of the container
(``put_archive`` / ``get_archive``): entries owned by nobody (65534), the seed of the workspace
(``files`` and a ``repo`` directory or tarball, checked member by member so nothing lands or
links outside ``/work``), and the paths and archive stat headers of the workspace."""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import time
from dataclasses import dataclass

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.docker.command import WORKDIR

_UID = _GID = 65534
_MODE_DIR = 1 << 31  # Go's os.FileMode bits, as the archive stat header reports them
MODE_SYMLINK = 1 << 27


@dataclass(frozen=True)
class Entry:
    """One archive entry: a file with its bytes, or a directory (``data`` None)."""

    name: str
    data: bytes | None  # None: a directory
    mode: int


def tar(entries: list[Entry]) -> bytes:
    """An archive of ``entries``, in order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
        for entry in entries:
            _add(out, entry)
    return buf.getvalue()


def seed_archive(files: dict[str, str | bytes], repo: str | None) -> bytes:
    """/work itself (owned by 65534), the repo, then the files, as one tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
        _add(out, Entry(".", None, 0o755))
        if repo is not None:
            _add_repo(out, repo)
        made: set[str] = set()
        for path, content in files.items():
            rel = _relative(path)
            parts = rel.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                if parent not in made:
                    made.add(parent)
                    _add(out, Entry(parent, None, 0o755))
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            _add(out, Entry(rel, data, 0o644))
    return buf.getvalue()


def first_file(data: bytes) -> bytes | None:
    """The content of the first regular file in archive ``data`` (TarError if it is bad)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for member in tf:
            if member.isfile():
                fh = tf.extractfile(member)
                assert fh is not None
                return fh.read()
    return None


def is_dir(stat: dict) -> bool:
    """Whether an archive stat header describes a directory."""
    return bool(stat.get("isDir") or stat.get("mode", 0) & _MODE_DIR)


def within(path: str) -> bool:
    """Whether a normalized absolute path is ``/work`` or under it."""
    return path == WORKDIR or path.startswith(WORKDIR + "/")


def _info(name: str, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.uid, info.gid = _UID, _GID
    info.uname, info.gname = "nobody", "nogroup"
    info.mtime = int(time.time())
    return info


def _add(out: tarfile.TarFile, entry: Entry) -> None:
    info = _info(entry.name, entry.mode)
    if entry.data is None:
        info.type = tarfile.DIRTYPE
        out.addfile(info)
    else:
        info.size = len(entry.data)
        out.addfile(info, io.BytesIO(entry.data))


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
            _add_repo_member(out, tf, member)


def _add_repo_member(out: tarfile.TarFile, tf: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    """Copy one member of a repo tarball under /work, refusing anything that escapes it."""
    name = member.name
    norm = posixpath.normpath(posixpath.join(WORKDIR, name))
    if name.startswith("/") or not within(norm):
        raise SandboxError(f"tarball member {name!r} escapes the workspace; refusing it")
    rel = norm[len(WORKDIR) + 1 :] or "."
    if member.issym():
        link = member.linkname
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(norm), link))
        if link.startswith("/") or not within(resolved):
            raise SandboxError(f"tarball symlink {name!r} -> {link!r} points outside the workspace")
        out.addfile(_owned(member, rel))
    elif member.islnk():
        resolved = posixpath.normpath(posixpath.join(WORKDIR, member.linkname))
        if not within(resolved):
            raise SandboxError(f"tarball hard link {name!r} -> {member.linkname!r} points outside")
        linked = _owned(member, rel)
        linked.linkname = resolved[len(WORKDIR) + 1 :]
        out.addfile(linked)
    elif member.isdir():
        out.addfile(_owned(member, rel))
    elif member.isfile():
        out.addfile(_owned(member, rel), tf.extractfile(member))
    else:
        raise SandboxError(f"tarball member {name!r} is not a file, directory or link; refusing it")
