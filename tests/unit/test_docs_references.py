"""Every piece of code the docs name exists.

What counts as a reference: the text of an inline code span (a pair of
backticks, outside fenced blocks) in ``README.md``, ``tests/README.md``,
``bench/README.md`` and ``docs/*.md``, without spaces, in one of these
forms:

- a path: it ends in a file suffix (``.py``, ``.md``, ``.toml``, ...) or
  a ``/``, or its first directory is one at the repository root, at
  ``src/berth`` or in one of its packages, or beside the doc. It starts
  at one of those (``tests/unit/test_docs.py``, ``domain/claim.py``,
  ``handlers/allocation.py`` in ``api/``, ``serve/watch/``) or at
  ``src/`` (``berth/db/changes.py``), and must exist; a module may be
  named without its ``.py`` (``conf/opts``). A module's path may go on
  with the attributes it defines (``db/changes.flush``,
  ``db/engine.Database.run``), and a test file's with a pytest node id
  (``tests/functional/test_x.py::test_y``): those must resolve too. A
  path ``.gitignore`` names (made by runs, never committed) passes. A
  bare ``.py`` or ``.md`` file name (``planner.py``) must name a file
  somewhere in the repository;
- a dotted name whose first part names Berth code: ``berth.<module>``
  (``berth.domain.claim.lock_providers``, ``berth.wsgi:application``), a
  module of ``src/berth`` by its last part (``allocation.run_claim``,
  ``changes.flush``), or a name some module of ``src/berth`` defines at
  its top (``ProviderTree.add_aggregates``, ``State.candidate_cache``),
  unless it is a module of Python's own (``http.client``); or a script
  beside the doc (``world.plan`` in ``bench/README.md``). The rest must
  resolve as attributes (a class's instance attributes count: its
  dataclass fields, annotations and ``self.<name> =`` assignments).
  Where several modules share a last part (``domain/allocation.py`` and
  ``api/handlers/allocation.py``), one resolving is enough.

Everything else (commands, option names, HTTP paths, placeholders with
``<...>`` or ``*``, third-party names such as ``os.environ``) is not
checked, nor are the names the API publishes that look dotted: the
change feed's event kinds and the error codes. ``NOT_CODE`` lists the
few other spans that look like references and are not, each with its
reason. The dated notes under ``bench/journal/`` are history, kept as
they were written, and are not checked.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import berth
from berth.api import errors as api_errors
from berth.db import events

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "berth"
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "tests" / "README.md",
        ROOT / "bench" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)

#: Spans shaped like references that name no code, and why.
NOT_CODE = {
    # logger names, published for operators' filters
    "berth.server",
    "berth.request",
    "berth.log",
    # oslo.policy's directory of rule files beside the policy file
    "policy.d",
    # a JSON pointer into the OpenAPI document
    "components.schemas.Error",
}
#: Published names that look dotted: event kinds and error codes.
PUBLISHED = set(events.KINDS) | {
    value
    for name, value in vars(api_errors).items()
    if name.isupper() and isinstance(value, str) and "." in value
}

_FENCE = re.compile(r"^\s*(```|~~~)")
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_SUFFIXES = (
    ".py",
    ".md",
    ".toml",
    ".yaml",
    ".yml",
    ".json",
    ".sh",
    ".ini",
    ".cfg",
    ".conf",
    ".txt",
    ".png",
    ".service",
    ".mako",
)
_PATH = re.compile(r"^\.?[\w.-]*(/[\w.-]+)*/?(::[\w\[\]-]+)?$")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?(\(\))?$")


def _spans(markdown: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each inline code span outside fences."""
    fenced = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            for match in _SPAN.finditer(line):
                yield number, match.group(1).strip()


#: Modules that act when imported, read (their top-level names) instead.
_NOT_IMPORTED = {
    "berth.wsgi": "builds the app and connects to the database",
    "berth.cli.__main__": "runs the command line",
}


def _top_level(module: str) -> SimpleNamespace:
    """The names ``module`` assigns or defines at its top, unimported."""
    return _names_in(SRC.parent / (module.replace(".", "/") + ".py"))


def _names_in(path: Path) -> SimpleNamespace:
    """The names the Python file ``path`` assigns or defines at its top."""
    names: dict[str, Any] = {}
    for node in ast.parse(path.read_text()).body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        names.update({t.id: None for t in targets if isinstance(t, ast.Name)})
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = None
    return SimpleNamespace(**names)


def _modules() -> dict[str, Any]:
    """Every module of the ``berth`` package by dotted name: imported,
    or read for those of ``_NOT_IMPORTED``."""
    found: dict[str, Any] = {"berth": berth}
    for info in pkgutil.walk_packages(berth.__path__, "berth."):
        found[info.name] = (
            _top_level(info.name)
            if info.name in _NOT_IMPORTED
            else importlib.import_module(info.name)
        )
    return found


MODULES = _modules()
#: a module's last part -> the modules that end so
BY_LAST: dict[str, list[Any]] = {}
#: a name some module defines at its top -> the modules that define it
BY_NAME: dict[str, list[Any]] = {}
for _name, _module in MODULES.items():
    BY_LAST.setdefault(_name.rsplit(".", 1)[-1], []).append(_module)
    for _attr, _value in vars(_module).items():
        if getattr(_value, "__module__", None) == _name or (
            not callable(_value) and not inspect.ismodule(_value) and _attr.isupper()
        ):
            BY_NAME.setdefault(_attr, []).append(_module)


def _has(obj: Any, name: str) -> Any:
    """``obj.name``, counting a class's declared instance attributes;
    raises AttributeError when there is none."""
    if hasattr(obj, name):
        return getattr(obj, name)
    if inspect.isclass(obj):
        for klass in obj.__mro__:
            if name in getattr(klass, "__annotations__", {}):
                return None
            try:
                source = inspect.getsource(klass)
            except (OSError, TypeError):
                continue
            if re.search(r"\bself\.%s\s*[:=]" % re.escape(name), source):
                return None
    raise AttributeError(name)


def _chain(obj: Any, names: list[str]) -> bool:
    for name in names:
        if obj is None:  # an instance attribute: nothing further to see
            return True
        try:
            obj = _has(obj, name)
        except AttributeError:
            return False
    return True


def _dotted(where: Path, text: str) -> bool | None:
    """Whether a dotted name resolves; None when it names no Berth code."""
    parts = re.split(r"[.:]", text.removesuffix("()"))
    beside = where / (parts[0] + ".py")
    if beside.is_file():  # a script beside the doc: bench/world.py
        return _chain(_names_in(beside), parts[1:])
    if parts[0] == "berth":
        for cut in range(len(parts), 0, -1):
            module = MODULES.get(".".join(parts[:cut]))
            if module is not None:
                return _chain(module, parts[cut:])
        return False
    starts = [(m, parts[1:]) for m in BY_LAST.get(parts[0], [])]
    starts += [(m, parts) for m in BY_NAME.get(parts[0], [])]
    if not starts:
        return None
    return any(_chain(m, rest) for m, rest in starts)


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


#: Where a path may start, besides the doc's own directory.
_BASES = [
    ROOT,
    ROOT / "src",
    SRC,
    *sorted(p for p in SRC.iterdir() if (p / "__init__.py").exists()),
]
#: What git ignores: made by runs, so documented but never committed.
_IGNORED = {
    line.strip()
    for line in (ROOT / ".gitignore").read_text().splitlines()
    if line.strip() and not line.startswith("#")
}
#: Every file of the repository, by name (for bare file names).
_NAMES = {
    p.name
    for top in ("src", "tests", "bench", "support", "deploy", "docs", ".ci")
    for p in (ROOT / top).rglob("*")
} | {p.name for p in ROOT.iterdir()}


def _is_path(where: Path, text: str) -> bool:
    """Whether ``text`` is judged as a path (see the module's rule)."""
    if text.startswith(("/", "http")) or not _PATH.match(text):
        return False
    if "/" not in text:
        return text.endswith((".py", ".md"))
    if text.endswith(_SUFFIXES) or text.endswith("/"):
        return True
    first = text.split("/", 1)[0]
    return any((base / first).is_dir() for base in [*_BASES, where])


def _module_at(base: Path, text: str) -> Any:
    """The module a path without ``.py`` names from ``base``, or None."""
    try:
        parts = (base / text).relative_to(ROOT / "src").parts
    except ValueError:
        return None
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return MODULES.get(".".join(parts))


def _path(where: Path, text: str) -> bool:
    """Whether a path (with any attributes or node id after it)
    resolves."""
    if "/" not in text:
        return text in _NAMES
    if text in _IGNORED:
        return True
    text, _, node = text.partition("::")
    for base in [*_BASES, where]:
        if (base / text).exists():
            if not node:
                return True
            names = [re.sub(r"\[.*\]$", "", n) for n in node.split("::")]
            return set(names) <= _test_names(base / text)
    # ``conf/opts``, ``db/engine.Database.run``: a module, then attributes.
    head, _, rest = text.partition(".")
    if text.endswith(_SUFFIXES):
        return False
    for base in _BASES:
        module = _module_at(base, head)
        if module is not None:
            return _chain(module, rest.split(".") if rest else [])
    return False


def references(where: Path, markdown: str) -> Iterator[tuple[int, str, bool]]:
    """(line, text, resolves) of each reference ``markdown``, a doc in
    directory ``where``, makes."""
    for number, text in _spans(markdown):
        if text in NOT_CODE or text in PUBLISHED or any(c in text for c in "<>*{} $="):
            continue
        if _is_path(where, text):
            yield number, text, _path(where, text)
        elif text.endswith(_SUFFIXES):
            continue  # a file of no repository's (``policy.yaml``)
        elif _DOTTED.match(text) and text.split(".", 1)[0] not in (sys.stdlib_module_names):
            found = _dotted(where, text)
            if found is not None:
                yield number, text, found


def test_every_reference_in_the_docs_resolves() -> None:
    broken = []
    checked = 0
    for doc in DOCS:
        for number, text, ok in references(doc.parent, doc.read_text()):
            checked += 1
            if not ok:
                broken.append("%s:%d: %s" % (doc.relative_to(ROOT), number, text))
    assert not broken, "\n".join(broken)
    # The rule above must keep finding references, or this test passes
    # for saying nothing.
    assert checked >= 300, checked


@pytest.mark.parametrize(
    "text",
    [
        "domain/claim.py",
        "berth.domain.claim.lock_providers",
        "claim.lock_providers",
        "db/engine.Database.run",
        "State.candidate_cache",
        "berth.wsgi:application",
        "concurrency.md",
        "tests/unit/test_docs_references.py::test_the_rule_finds_what_is_missing",
    ],
)
def test_the_rule_resolves_what_exists(text: str) -> None:
    assert _judged(text) == [True]


@pytest.mark.parametrize(
    "text",
    [
        "domain/no_such_module.py",
        "berth.domain.claim.no_such_function",
        "claim.no_such_function",
        "db/engine.Database.no_such_method",
        "ProviderTree.no_such_method",
        "tests/unit/test_docs.py::test_nothing",
        "berth.no_such_module",
    ],
)
def test_the_rule_finds_what_is_missing(text: str) -> None:
    assert _judged(text) == [False]


@pytest.mark.parametrize(
    "text",
    [
        "os.environ",
        "placement.conf",
        "berth serve",
        "/allocations/{c}",
        "handlers/<resource>.py",
    ],
)
def test_the_rule_leaves_what_is_no_reference(text: str) -> None:
    assert _judged(text) == []


def _judged(text: str) -> list[bool]:
    """What :func:`references` makes of ``text`` as a span in docs/."""
    return [ok for _, _, ok in references(ROOT / "docs", "`%s`\n" % text)]
