"""Finding input files safely: arguments, directories and globs -> regular files only, no symlink escapes.

An input directory or the nightly inbox may hold files that anyone with write access dropped there.
Whatever they contain, discovery never lets the service read outside the given paths:

* symbolic links are refused (reason recorded) unless ``follow_symlinks`` is set, and then only
  links that resolve to a regular file under one of the given roots are taken (by their real path);
* directories are walked without following directory links (a link loop cannot hang a walk), and
  globs (``**`` included) are matched on the same walk, not by :func:`glob.glob`, which follows them;
* only regular files are taken: FIFOs, sockets and devices are refused (a FIFO would block a
  reader forever), and so is anything under ``/proc``, ``/sys`` or ``/dev``.

The store itself is never input: directories passed as ``exclude`` (the local store root, see
:func:`store_exclusions`) are not walked — entries under them are refused with the reason
``inside the store`` — so ``nodewatch ingest syslog .`` run where the store lives under ``.`` does not
read its own ``runs/*.json`` or ``raw/`` copies.

A refused entry found inside a directory or glob is skipped and reported (:class:`Refused`); a
refused *argument* (a path named explicitly) is an :class:`~nodewatch.tasks.ingest.inputs.InputError`.
Readers then open files with :func:`nodewatch.tasks.core.files.open_regular` (``O_NOFOLLOW``, checked
with ``fstat``), so a file swapped for a link after discovery is still refused.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nodewatch.tasks.core.files import FOLLOW_HINT, SPECIAL_ROOTS, kind_of, under
from nodewatch.tasks.ingest.inputs import InputError

_MAGIC = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Refused:
    """An entry that was not taken as input, and why."""

    path: str
    reason: str


@dataclass
class Discovery:
    """Result of :func:`discover_inputs`: the files to read (sorted, unique) and what was refused."""

    files: list[Path] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


def refusal(path: str | os.PathLike[str], roots: Iterable[str] = (), follow_symlinks: bool = False) -> tuple[str | None, str]:
    """``(reason, real_path)``: ``reason`` is ``None`` when ``path`` may be read as input.

    ``roots`` are real (resolved) directory paths a followed link must stay under.
    """
    p = os.fspath(path)
    try:
        st = os.lstat(p)
    except OSError as e:
        return f"cannot stat: {e.strerror}", p
    real = os.path.realpath(p)
    link = stat.S_ISLNK(st.st_mode)
    if link:
        if not follow_symlinks:
            return f"symbolic link ({FOLLOW_HINT})", p
        if not any(under(real, r) for r in roots):
            return f"symbolic link to {real}, outside the input paths", p
        try:
            st = os.stat(real)
        except OSError as e:
            return f"symbolic link to {real}: {e.strerror}", p
    if any(under(real, s) for s in SPECIAL_ROOTS):
        return f"on a special file system ({real})", p
    if not stat.S_ISREG(st.st_mode):
        return kind_of(st.st_mode), p
    return None, real if link else p


def _component_regex(comp: str) -> str:
    """Regex of one glob path component (``*``/``?`` never cross ``/`` nor match a leading dot)."""
    out = "" if comp.startswith(".") else r"(?!\.)"
    i = 0
    while i < len(comp):
        c = comp[i]
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            j = comp.find("]", i + 2 if comp[i + 1:i + 2] in ("!", "]") else i + 1)
            if j < 0:
                out += re.escape(c)
            else:
                body = comp[i + 1:j]
                body = "^" + body[1:] if body.startswith("!") else body
                out += "[" + body.replace("\\", "\\\\") + "]"
                i = j
        else:
            out += re.escape(c)
        i += 1
    return out


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob pattern (with ``**`` for any number of directories) to a full-path regex."""
    parts = pattern.split("/")
    out = ""
    for i, comp in enumerate(parts):
        last = i == len(parts) - 1
        if comp == "**":
            out += r"(?:(?!\.)[^/]+/)*" + (r"(?!\.)[^/]+" if last else "")
        else:
            out += _component_regex(comp) + ("" if last else "/")
    return re.compile(out + r"\Z")


STORE_REASON = "inside the store (the store is never read as input)"


def store_exclusions(url: str) -> list[str]:
    """``[real path of the store root]`` for a local store URL (what :func:`discover_inputs` must not read), else ``[]``."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ValueError, ImportError):
        return []
    proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return [os.path.realpath(root)] if proto in ("file", "local") else []


def _walk(base: str, refused: list[Refused], max_depth: int | None = None, exclude: tuple[str, ...] = ()) -> Iterator[str]:
    """Every entry below ``base`` that is not a directory, without following directory links or entering ``exclude``."""
    base_depth = base.rstrip("/").count("/")

    def onerror(e: OSError) -> None:
        refused.append(Refused(str(e.filename), f"cannot list: {e.strerror}"))

    for dirpath, dirnames, filenames in os.walk(base, onerror=onerror, followlinks=False):
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                refused.append(Refused(full, "symbolic link to a directory (not walked)"))
            elif exclude and any(under(os.path.realpath(full), x) for x in exclude):
                refused.append(Refused(full, STORE_REASON))
            else:
                keep.append(d)
        depth = dirpath.rstrip("/").count("/") - base_depth
        dirnames[:] = [] if max_depth is not None and depth + 1 >= max_depth else keep
        for f in sorted(filenames):
            yield os.path.join(dirpath, f)


def _glob_base(pattern: str) -> tuple[list[str], int, str]:
    """``(components, index of the first wildcard component, directory the walk starts from)``."""
    parts = pattern.split("/")
    k = next(i for i, c in enumerate(parts) if _MAGIC.search(c))
    return parts, k, "/".join(parts[:k]) or ("/" if pattern.startswith("/") else ".")


def _glob(pattern: str, refused: list[Refused], exclude: tuple[str, ...] = ()) -> list[str]:
    """The entries matching a glob pattern, found by a walk that follows no link."""
    parts, k, base = _glob_base(pattern)
    if not os.path.isdir(base):  # the argument's own prefix may be a link: the user named it
        return []
    rx = glob_regex(pattern)
    rest = parts[k:]
    depth = None if "**" in rest else len(rest)
    strip = "./" if not parts[:k] else ""
    matches = []
    for entry in _walk(base, refused, depth, exclude):
        name = entry[len(strip):] if strip and entry.startswith(strip) else entry
        if rx.match(name):
            matches.append(entry)
    return matches


def discover_inputs(
    paths: Iterable[str | os.PathLike[str]], follow_symlinks: bool = False, exclude: Iterable[str] = ()
) -> Discovery:
    """Expand files, directories (recursively) and globs into regular files to read, refusing the rest.

    Hidden files (``.name``) found in directories and globs are skipped. ``exclude``: directories never
    read (the store root, :func:`store_exclusions`); their entries are refused with :data:`STORE_REASON`.
    Raises :class:`InputError` naming an argument that matches nothing, holds no readable file, or is
    itself refused (an argument inside the store included).
    """
    args = [os.fspath(p) for p in paths]
    skip = tuple(os.path.realpath(x) for x in exclude)
    roots = []
    for a in args:
        if _MAGIC.search(a):
            roots.append(os.path.realpath(_glob_base(a)[2]))
        elif os.path.isdir(a):
            roots.append(os.path.realpath(a))
        else:
            roots.append(os.path.realpath(os.path.dirname(os.path.abspath(a))))
    out = Discovery()
    files: list[str] = []
    for a in args:
        if _MAGIC.search(a) or os.path.isdir(a):
            found: list[Refused] = []
            if _MAGIC.search(a):
                entries = _glob(a, found, skip)
                what = "glob matches no file"
            else:
                if skip and any(under(os.path.realpath(a), x) for x in skip):
                    raise InputError(f"{a}: {STORE_REASON}")
                entries = [e for e in _walk(a, found, exclude=skip) if not os.path.basename(e).startswith(".")]
                what = "directory holds no file"
            taken = []
            for e in entries:
                reason, real = refusal(e, roots, follow_symlinks)
                if reason is None and skip and any(under(real, x) for x in skip):
                    reason = STORE_REASON
                if reason is None:
                    taken.append(real)
                else:
                    found.append(Refused(e, reason))
            out.refused += found
            if not taken:
                extra = f" it can read ({len(found)} refused, e.g. {found[0].path}: {found[0].reason})" if found else ""
                raise InputError(f"{a}: {what}{extra}")
            files += taken
        elif os.path.lexists(a):
            reason, real = refusal(a, roots, follow_symlinks)
            if reason is None and skip and any(under(os.path.realpath(real), x) for x in skip):
                reason = STORE_REASON
            if reason is not None:
                raise InputError(f"{a}: {reason}")
            files.append(real)
        else:
            raise InputError(f"{a}: no such file")
    seen: set[str] = set()
    for f in sorted(files):
        r = os.path.realpath(f)
        if r not in seen:
            seen.add(r)
            out.files.append(Path(f))
    return out


def expand_paths(paths: Iterable[str | os.PathLike[str]], follow_symlinks: bool = False) -> list[Path]:
    """The files of :func:`discover_inputs` (refused entries inside directories/globs are skipped)."""
    return discover_inputs(paths, follow_symlinks).files
