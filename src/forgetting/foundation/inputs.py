"""Reading a file the user names: the one place an unreadable file becomes one error line.

Every text input a user hands the pipeline — a study config and its overlays, ``--set``
values, a label-rules table, a price sheet, a task list, a demo task, a dataset file — is
read here first. A file that is missing, a directory, unreadable (permissions), not UTF-8,
not valid YAML or nested too deeply is one :class:`~forgetting.foundation.errors.UserError` line naming
the file and, where there is one, the line; the caller's parser then checks the fields.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from forgetting.foundation.errors import RunOutputError, UserError

#: deepest nesting of a YAML or JSON document a reader accepts (configs nest 4 levels deep)
MAX_DEPTH = 64
#: most values a YAML document may expand to (its aliases followed): a config has hundreds
MAX_NODES = 1_000_000


def read_bytes(path: str | os.PathLike[str], *, what: str = "file", error: type[UserError] = UserError) -> bytes:
    """The bytes of ``path``; a missing, unreadable or directory path is one ``error`` line."""
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise error(f"{p}: {what} not found") from None
    except IsADirectoryError:
        raise error(f"{p}: is a directory, not a {what}") from None
    except OSError as exc:
        raise error(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None


#: a run directory's depth below its ``runs/`` directory (``runs/AGENT/CONFIGURATION/TASK/REPEAT``,
#: forgetting.foundation.layout.Layout.run_dir)
RUN_DEPTH = 4


def linked_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the directories above ``path``, a file of a run directory
    (``…/runs/AGENT/CONFIGURATION/TASK/REPEAT/NAME``), may not be read through: one of them —
    the run directory itself, a folder above it, ``runs/`` — is a symbolic link, which would
    take every file of the run from wherever it points (the results directory itself may be a
    link: it is the tree). None for a path of another shape, or with no such link."""
    p = Path(path)
    chain = list(p.parents)[: RUN_DEPTH + 1]  # REPEAT, TASK, CONFIGURATION, AGENT, runs
    if len(chain) < RUN_DEPTH + 1 or chain[-1].name != "runs":
        return None
    for folder in reversed(chain):
        if os.path.islink(folder):
            try:
                target = os.readlink(folder)
            except OSError:
                target = "?"
            return (f"in a linked run directory: {folder} is a symbolic link (to {target}); a run directory "
                    "is never followed out of the results tree: replace the link by the directory, or rerun the run")
    return None


def stored_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path``, a file a run directory should hold as the pipeline wrote it, may not be
    read: a symbolic link (wherever it points: a link is never followed out of the results
    tree), in a run directory that is one or lies below one (:func:`linked_problem`), or
    something other than a regular file (a FIFO would block the reader); None when it is a
    regular file or absent."""
    p = Path(path)
    linked = linked_problem(p)
    if linked is not None:
        return linked
    try:
        st = os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(p)
        except OSError:
            target = "?"
        return (f"a symbolic link (to {target}), not a file the run wrote; a run directory's files are "
                "never followed out of it: replace the link by the file, or rerun the run")
    if not stat.S_ISREG(st.st_mode):
        from forgetting.foundation.atomic import kind_of

        return f"{kind_of(st.st_mode)}, not a file the run wrote; remove it, or rerun the run"
    return None


def check_stored(path: str | os.PathLike[str], *, error: type[UserError] = RunOutputError) -> None:
    """Raise ``error`` (one line naming ``path``) when :func:`stored_problem` finds one."""
    problem = stored_problem(path)
    if problem is not None:
        raise error(f"{path}: {problem}")


def read_stored(path: str | os.PathLike[str], *, what: str = "file", error: type[UserError] = RunOutputError) -> bytes:
    """The bytes of a file in a run directory (``run.json``, ``patch.diff``, …), read only when
    it is a regular file and no link (:func:`stored_problem`; opened without following a link,
    then checked again on the open file: no swap between the check and the read)."""
    p = Path(path)
    check_stored(p, error=error)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{p}: {what} not found") from None
    except OSError as exc:
        raise error(f"{p}: {stored_problem(p) or f'cannot read the {what} ({exc.strerror or exc})'}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise error(f"{p}: not a regular file; a run directory holds the files the run wrote")
        return fh.read()


def decode_utf8(data: bytes, source: str, *, error: type[UserError] = UserError) -> str:
    """``data`` as UTF-8 text; bytes that are not UTF-8 are one ``error`` line naming the line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"{source}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def read_text(path: str | os.PathLike[str], *, what: str = "file", error: type[UserError] = UserError) -> str:
    """The UTF-8 text of ``path``, each problem one ``error`` line naming the file."""
    return decode_utf8(read_bytes(path, what=what, error=error), str(path), error=error)


def _depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests (iteratively: a hostile document cannot exhaust the stack);
    stops counting past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _expanded_size(value: Any, limit: int) -> int:
    """How many values ``value`` holds with every shared part counted each time it is
    referred to (a YAML alias expands so), computed once per distinct part; stops past ``limit``."""
    sizes: dict[int, int] = {}
    order: list[Any] = []
    stack = [value]
    while stack:  # every distinct container, parents before children
        node = stack.pop()
        if isinstance(node, dict | list) and id(node) not in sizes:
            sizes[id(node)] = 0
            order.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    for node in reversed(order):  # children before parents
        children = node.values() if isinstance(node, dict) else node
        sizes[id(node)] = min(limit + 1, 1 + sum(sizes.get(id(c), 1) for c in children))
    return sizes.get(id(value), 1)


def check_depth(value: Any, source: str, *, limit: int = MAX_DEPTH, error: type[UserError] = UserError) -> Any:
    """``value`` unchanged, or one ``error`` line when it nests deeper than ``limit`` or
    expands (aliases followed) to more than :data:`MAX_NODES` values."""
    if _expanded_size(value, MAX_NODES) > MAX_NODES:
        raise error(f"{source}: expands to more than {MAX_NODES:,} values (YAML aliases of aliases)")
    if _depth(value, limit) > limit:
        raise error(f"{source}: nested more than {limit} levels deep")
    return value


class _Loader(yaml.SafeLoader):
    """The safe loader, refusing a mapping that names one key twice (YAML says keys are
    unique; PyYAML keeps the last silently). A merge key (``<<: *base``) may still override."""


def _unique_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} given twice, first on line {seen[key] + 1}", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def parse_yaml(text: str, source: str, *, error: type[UserError] = UserError) -> Any:
    """YAML text → Python (safe loader); a syntax error or a key given twice in one mapping is
    one line naming ``source`` and the line."""
    try:
        data = yaml.load(text, Loader=_Loader)  # a subclass of the safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(f"{source}{where}: not valid YAML ({' '.join(str(problem).split())})") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply to read") from None
    return check_depth(data, source, error=error)


def parse_json(text: str, source: str, *, error: type[UserError] = UserError) -> Any:
    """JSON text → Python; a syntax error or a nesting too deep for the parser is one ``error``
    line: ``SOURCE is not valid JSON (why, line L column C)``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{source} is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise error(f"{source} is nested too deeply to read") from None


def read_yaml(path: str | os.PathLike[str], *, what: str = "file", error: type[UserError] = UserError) -> Any:
    """A YAML file, parsed; every problem one ``error`` line naming the file (and the line)."""
    return parse_yaml(read_text(path, what=what, error=error), str(path), error=error)


def check_output_file(path: str | os.PathLike[str], key: str, *, append: bool = False) -> Path:
    """``path`` as a file a command may write — checked before any work: a regular file or
    none (not a directory, a device node, a FIFO or a socket: an atomic write never replaces
    one, :func:`forgetting.foundation.atomic.refuse_special`), and the nearest folder above it that
    exists is a writable directory (a missing one is made when it is written); otherwise one
    line naming ``key`` (the option) and the path. ``append``: a log appended to, where a
    character device (``/dev/null``, a terminal) is fine too — a FIFO still is not (the
    write would wait for a reader forever)."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{key} {p}: is a directory, not a file")
    try:
        mode = os.stat(p).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not (append and stat.S_ISCHR(mode)):
        from forgetting.foundation.atomic import kind_of

        raise UserError(f"{key} {p}: exists and is {kind_of(mode)}, not a regular file; "
                        "give the path of a regular file (or of none)")
    check_output_dir(p.absolute().parent, key, shown=p)
    return p


def check_output_dir(path: str | os.PathLike[str], key: str, *, shown: Path | None = None) -> Path:
    """``path`` as a directory a command may write into — checked before any work: the
    nearest part of it that exists is a writable directory (what is missing is made when
    written); otherwise one line naming ``key`` and the path (``shown``: the path to name)."""
    p = Path(path)
    for part in [p.absolute(), *p.absolute().parents]:
        if part.exists():
            if not part.is_dir():
                raise UserError(f"{key} {shown or p}: {part} is not a directory")
            if not os.access(part, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
                raise UserError(f"{key} {shown or p}: {part} is not writable")
            break
    return p
