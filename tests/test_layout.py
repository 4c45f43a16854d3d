"""The package layout (docs/dev.md): one namespace, import directions, no cycles, files under 600 lines.

These tests read the source with ``ast`` (nothing is imported except where a test says so), so a rule
broken anywhere in the tree fails here with the file and line.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("flows", "tasks", "schemas", "models", "nodewatch")
MAX_LINES = 600
# which top-level parts of nodewatch each part may import (docs/dev.md, "Import rules")
ALLOWED = {
    "schemas": {"schemas"},
    "models": {"models", "schemas"},
    "tasks": {"tasks", "models", "schemas"},
    "flows": {"flows", "tasks", "models", "schemas"},
    "api": {"tasks", "models", "schemas", "api"},
}
CAPABILITY_ROOTS = ("tasks", "models")


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[0] == "nodewatch":
        return ".".join(parts)
    return ".".join(["nodewatch", *parts])


def _sources() -> list[Path]:
    out: list[Path] = []
    for root in ROOTS:
        out += sorted(p for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, module_level_only: bool) -> list[tuple[str, int]]:
    """``(imported nodewatch module, line)`` for every import of ours in ``path`` (relative ones resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend((a.name, node.lineno) for a in node.names if a.name.split(".")[0] in ("nodewatch", *ROOTS))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if mod.split(".")[0] in ("nodewatch", *ROOTS):
                    found.append((mod, node.lineno))
                    # "from pkg import submodule" imports the submodule too
                    found.extend((f"{mod}.{a.name}", node.lineno) for a in node.names)
            elif isinstance(node, ast.If) and _is_type_checking(node):
                continue
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not module_level_only:
                    visit(node.body)
            elif isinstance(node, ast.ClassDef):  # a class body runs at import
                visit(node.body)
            elif hasattr(node, "body"):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, []) or [])

    visit(tree.body)
    return found


def _known_modules() -> set[str]:
    return {_module_name(p) for p in _sources()}


def _resolve(name: str, known: set[str]) -> str | None:
    """The longest known module that ``name`` is (an attribute import resolves to its module)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _part(module: str) -> str:
    parts = module.split(".")
    return "api" if len(parts) < 2 or parts[1] not in ALLOWED else parts[1]


def test_every_import_uses_the_nodewatch_namespace() -> None:
    bad = []
    for path in [*_sources(), *sorted((REPO / "tests").rglob("*.py")), *sorted((REPO / "benchmarks").rglob("*.py"))]:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            bad += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in ROOTS[:4]]
    assert not bad, "bare top-level imports (use nodewatch.<part>):\n" + "\n".join(bad)


def test_import_directions() -> None:
    """flows -> tasks -> models/schemas; models import nothing of ours but models and schemas."""
    known = _known_modules()
    bad = []
    for path in _sources():
        me = _part(_module_name(path))
        for name, line in _imports(path, module_level_only=False):
            target = _resolve(name, known)
            if target is None:
                continue
            if _part(target) not in ALLOWED[me]:
                bad.append(f"{path.relative_to(REPO)}:{line}: {me} may not import {target}")
    assert not bad, "\n".join(dict.fromkeys(bad))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _graph(module_level_only: bool) -> dict[str, set[str]]:
    known = _known_modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for path in _sources():
        me = _module_name(path)
        for name, _ in _imports(path, module_level_only):
            target = _resolve(name, known)
            # importing a package's submodule runs the package's __init__ first; a module importing its
            # own package (or an ancestor) is not an edge of interest
            if target and target != me and not me.startswith(target + "."):
                graph[me].add(target)
    return graph


def test_no_import_cycles_between_modules() -> None:
    cycles = _cycles(_graph(module_level_only=True))
    assert not cycles, "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_import_cycles_even_through_deferred_imports() -> None:
    """Imports inside functions are for start-up cost, not to hide a cycle."""
    cycles = _cycles(_graph(module_level_only=False))
    assert not cycles, "import cycles (including imports inside functions):\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_source_file_over_600_lines() -> None:
    files = [*_sources(), *sorted((REPO / "tests").rglob("*.py")), *sorted((REPO / "benchmarks").rglob("*.py"))]
    long = [f"{p.relative_to(REPO)}: {n}" for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, f"files over {MAX_LINES} lines (split along their seams):\n" + "\n".join(long)


def test_test_module_basenames_are_unique() -> None:
    """tests/ has no __init__.py files: pytest imports test modules by basename, so two folders holding
    test_cli.py stop the whole collection ("import file mismatch")."""
    seen: dict[str, list[str]] = {}
    for p in sorted((REPO / "tests").rglob("*.py")):
        if "__pycache__" not in p.parts and p.name != "conftest.py":
            seen.setdefault(p.name, []).append(str(p.relative_to(REPO)))
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    assert not dups, f"test modules with the same basename (prefix them with the capability): {dups}"


def test_capability_folders_mirror_each_other() -> None:
    """tasks/, models/ and tests/ use one folder per capability, with the same names; no loose modules in tasks/."""
    loose = [p.name for p in (REPO / "tasks").glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"loose modules in tasks/ (put them in a capability folder): {loose}"
    task_caps = {p.name for p in (REPO / "tasks").iterdir() if (p / "__init__.py").exists()}
    model_caps = {p.name for p in (REPO / "models").iterdir() if (p / "__init__.py").exists()}
    test_caps = {p.name for p in (REPO / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert model_caps <= task_caps, f"models/ folders without a tasks/ folder: {model_caps - task_caps}"
    assert task_caps <= test_caps, f"capabilities without a tests/ folder: {task_caps - test_caps}"
    loose_models = [p.name for p in (REPO / "models").glob("*.py") if p.name != "__init__.py"]
    assert not loose_models, f"loose modules in models/: {loose_models}"


def test_installed_package_has_no_top_level_flows_tasks_models_schemas(tmp_path: Path) -> None:
    """From outside the repository, only ``nodewatch`` is importable, and it points at this tree."""
    code = (
        "import importlib.util as u, nodewatch, nodewatch.tasks.core.store as s;"
        "print([m for m in ('flows','tasks','models','schemas') if u.find_spec(m)]);"
        "print(nodewatch.open_cube.__module__, s.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "[]", f"top-level modules importable from site-packages: {lines[0]}"
    assert lines[1].startswith("nodewatch.api ") and str(REPO / "tasks" / "core" / "store.py") in lines[1]


def test_built_wheel_holds_only_the_nodewatch_namespace(tmp_path: Path) -> None:
    """The wheel maps flows/, tasks/, schemas/, models/ under nodewatch/ and ships every sub-package."""
    src = tmp_path / "src"  # build from a copy: an in-tree build would leave build/ and *.egg-info behind
    src.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for root in ROOTS:
        shutil.copytree(REPO / root, src / root, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(src)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    if out.returncode != 0 and "No module named" in out.stderr and "wheel" in out.stderr:
        pytest.skip("the venv has no 'wheel' package to build with")
    assert out.returncode == 0, out.stderr[-2000:]
    (whl,) = tmp_path.glob("nodewatch-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"nodewatch"}, tops
    expected = {_module_name(p).replace(".", "/") for p in _sources()}
    shipped = {n.removesuffix(".py").removesuffix("/__init__") for n in names if n.endswith(".py")}
    missing = sorted(expected - shipped)
    assert not missing, f"modules missing from the wheel: {missing[:10]}"
