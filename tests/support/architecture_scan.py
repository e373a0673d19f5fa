"""Architecture scan: cross-module private access and import cycles inside a package.

`python tests/support/architecture_scan.py .` prints both lists; tests/test_architecture.py
asserts they are empty. A private name (`_x`) may be read only by the module that defines it
(`self._x`, `cls._x`, or a name the module assigns or defines itself). An import cycle counts
every import, function-level ones included, except those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

PACKAGES = ("storage", "timeline", "provenance", "flowledger")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules(root: Path) -> dict[str, Path]:
    return {
        _module_name(root, p): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))
    }


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_private_names(tree: ast.AST) -> set[str]:
    """Private names this module defines or assigns: it may read them on any object."""
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            names.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return {n for n in names if _is_private(n)}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If):
            t = n.test
            name = (
                t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            )
            if name == "TYPE_CHECKING":
                skip.update(id(b) for b in ast.walk(n))
    return skip


def _import_targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [target] + [f"{target}.{a.name}" for a in node.names]


def scan(root: Path, *, type_hints: bool = False) -> tuple[list[str], list[list[str]]]:
    """(private reach-ins as "path:line: name", import cycles as sorted module lists);
    `type_hints`: count imports under `if TYPE_CHECKING:` too."""
    modules = _modules(root)
    reach_ins: list[str] = []
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        own = _own_private_names(tree)
        skip = set() if type_hints else _type_checking_nodes(tree)
        where = path.relative_to(root)
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and _is_private(n.attr) and n.attr not in own:
                if not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
                    reach_ins.append(f"{where}:{n.lineno}: .{n.attr}")
            elif isinstance(n, ast.ImportFrom):
                reach_ins.extend(
                    f"{where}:{n.lineno}: import {a.name}" for a in n.names if _is_private(a.name)
                )
            if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in skip:
                targets = _import_targets(n, module, path.name == "__init__.py")
                # `from pkg import mod` depends on pkg.mod; `from mod import name` on mod.
                hits = [t for t in targets[1:] if t in modules] or targets[:1]
                graph[module].update(t for t in hits if t in modules and t != module)
    return reach_ins, _cycles(graph, modules)


def _cycles(graph: dict[str, set[str]], modules: dict[str, Path]) -> list[list[str]]:
    """Strongly connected components (Tarjan) of more than one module in one top package."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w.split(".")[0] != v.split(".")[0]:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in modules:
        if v not in index:
            visit(v)
    return found


if __name__ == "__main__":
    private, cycles = scan(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
    print(len(private), "private reach-ins")
    for line in private:
        print("  ", line)
    print(len(cycles), "import cycles")
    for cycle in cycles:
        print("  ", cycle)
