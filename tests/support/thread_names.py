"""Every thread the project starts is named `flowledger-...`: the check after each test
(tests/support/thread_leaks.py) tells the project's threads from libraries' by that name.

`thread_sites(root)` lists the places in the project's packages that start a thread without
such a name: a `Thread(...)` without `name=`, a `ThreadPoolExecutor(...)` without a
`thread_name_prefix` (keyword or second argument), a `Timer(...)` not assigned to a name
whose `.name` the same function then sets, a `Thread` subclass whose `super().__init__`
passes no `name=`. A name is a string or an f-string that starts with the prefix.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.architecture_scan import PACKAGES
from tests.support.thread_leaks import PREFIX


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _named(value: ast.expr | None) -> bool:
    if isinstance(value, ast.JoinedStr) and value.values:
        value = value.values[0]
    return (
        isinstance(value, ast.Constant)
        and isinstance(value.value, str)
        and value.value.startswith(PREFIX)
    )


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _timer_named(scope: ast.AST, call: ast.Call) -> bool:
    """The Timer `call` is assigned (`t = Timer(...)`) and the scope sets that one's name
    (`t.name = "flowledger-..."`: a Timer takes no name argument); another Timer's name set
    in the same scope does not name this one."""
    assigns = [n for n in ast.walk(scope) if isinstance(n, ast.Assign)]
    held = {ast.unparse(t) for n in assigns if n.value is call for t in n.targets}
    return any(
        isinstance(t, ast.Attribute) and t.attr == "name" and ast.unparse(t.value) in held
        for n in assigns
        if _named(n.value)
        for t in n.targets
    )


def _unnamed(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    for scope in [tree, *scopes]:  # a call is seen from each scope around it
        for call in ast.walk(scope):
            if not isinstance(call, ast.Call):
                continue
            what = _called(call)
            if what == "Thread":
                ok = _named(_keyword(call, "name"))
            elif what == "ThreadPoolExecutor":
                second = call.args[1] if len(call.args) > 1 else None
                ok = _named(_keyword(call, "thread_name_prefix") or second)
            elif what == "Timer":
                ok = _timer_named(scope, call)
            elif what == "__init__" and isinstance(scope, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else "" for b in scope.bases]
                bases += [b.id for b in scope.bases if isinstance(b, ast.Name)]
                ok = "Thread" not in bases or _named(_keyword(call, "name"))
            else:
                continue
            if not ok:
                found.append((call.lineno, f"{what}(...)"))
    return sorted(set(found))


def thread_sites(root: Path) -> list[str]:
    """`path:line: Thread(...)` for each thread started without a `flowledger-` name."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            rel = path.relative_to(root).as_posix()
            out += [f"{rel}:{line}: {what}" for line, what in _unnamed(tree)]
    return out


__all__ = ["thread_sites"]
