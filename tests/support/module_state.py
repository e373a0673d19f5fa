"""Module-level mutable state: what a module builds at import and every caller in the process
then shares — a container filled as the program runs, an executor, a lock, a cache, a name
rebound by `global`. Such state outlives the object that needed it, leaks between two uses in
one process (tests, an embedding program, two CLI invocations) and is closed by nobody. State
belongs to an object its creator closes.

`python tests/support/module_state.py .` prints what it finds; tests/test_architecture.py
asserts the list is empty. Only module level is scanned (statements inside `if`/`try`/`with`
at module level included); class and function bodies are the objects' own business.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("storage", "timeline", "provenance", "flowledger")

#: Calls that build something mutable or something to close: containers, executors and
#: threads, synchronisation (a lock guards shared state, so it is found where state is),
#: thread-locals, counters, caches.
MUTABLE_BUILDERS = frozenset(
    {
        "dict", "list", "set", "bytearray",
        "OrderedDict", "defaultdict", "deque", "Counter", "ChainMap",
        "WeakSet", "WeakValueDictionary", "WeakKeyDictionary",
        "ThreadPoolExecutor", "ProcessPoolExecutor", "Pool", "Thread", "Timer",
        "Lock", "RLock", "Condition", "Event", "Semaphore", "BoundedSemaphore", "Barrier",
        "local", "Queue", "SimpleQueue", "LifoQueue", "PriorityQueue", "count",
        "Cache", "LRUCache", "LFUCache", "TTLCache", "TLRUCache", "FIFOCache", "RRCache",
    }
)  # fmt: skip

#: Decorators that give a module-level function a process-wide memo.
CACHE_DECORATORS = frozenset({"lru_cache", "cache", "cached"})

#: The only names allowed to hold a mutable literal at module level:
#: `__all__` is the language's export list, read by `import *` and by tools, never changed.
ALLOWED_NAMES = frozenset({"__all__"})

#: Base classes whose instances cannot change: a module-level instance of a class from the
#: scanned packages is state unless the class is one of these or a frozen dataclass / model.
IMMUTABLE_BASES = frozenset({"NamedTuple", "Enum", "StrEnum", "IntEnum", "Flag", "IntFlag"})

_LITERALS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _callee(node: ast.expr) -> str:
    """The last name of what a call calls: `concurrent.futures.ThreadPoolExecutor` -> its tail."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_frozen(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        keywords = d.keywords if isinstance(d, ast.Call) and _callee(d.func) == "dataclass" else []
        if any(k.arg == "frozen" and ast.literal_eval(k.value) is True for k in keywords):
            return True
    if any(_callee(b) in IMMUTABLE_BASES for b in cls.bases):
        return True
    for stmt in cls.body:  # pydantic: model_config = ConfigDict(frozen=True)
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Call) and any(k.arg == "frozen" for k in value.keywords):
            return True
    return False


def _mutable_classes(trees: dict[Path, ast.Module]) -> set[str]:
    """Names of the scanned packages' classes whose instances can change (by simple name)."""
    mutable: set[str] = set()
    frozen: set[str] = set()
    for tree in trees.values():
        for n in ast.walk(tree):
            if isinstance(n, ast.ClassDef):
                (frozen if _is_frozen(n) else mutable).add(n.name)
    return mutable - frozen


def _module_level(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    for s in stmts:
        if isinstance(s, ast.If | ast.Try | ast.With):
            yield from _module_level(s.body)
            yield from _module_level(getattr(s, "orelse", []))
            yield from _module_level(getattr(s, "finalbody", []))
            for h in getattr(s, "handlers", []):
                yield from _module_level(h.body)
        else:
            yield s


def _is_final(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return _callee(target) == "Final"


def _targets(s: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[str]:
    targets = s.targets if isinstance(s, ast.Assign) else [s.target]
    return [ast.unparse(t) for t in targets]


def _state(s: ast.stmt, mutable_classes: set[str]) -> str | None:
    """What `s` builds as module state, or None."""
    if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
        for d in s.decorator_list:
            called = _callee(d.func if isinstance(d, ast.Call) else d)
            if called in CACHE_DECORATORS:
                return f"a process-wide cache on {s.name}()"
        return None
    if not isinstance(s, ast.Assign | ast.AnnAssign | ast.AugAssign) or s.value is None:
        return None
    names = _targets(s)
    if set(names) <= ALLOWED_NAMES:
        return None
    value = s.value
    if isinstance(value, _LITERALS):
        if isinstance(s, ast.AnnAssign) and _is_final(s.annotation):
            return None  # a constant a library needs as a dict or list, typed so it stays one
        return f"{', '.join(names)} = a mutable {type(value).__name__.lower()}"
    if isinstance(value, ast.Call):
        called = _callee(value.func)
        if called in MUTABLE_BUILDERS or called in mutable_classes:
            return f"{', '.join(names)} = {called}(...)"
    return None


def scan_module_state(root: Path) -> list[str]:
    """Module-level mutable state and `global` statements, as "path:line: what"."""
    paths = [p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))]
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in paths}
    mutable_classes = _mutable_classes(trees)
    found: list[str] = []
    for path, tree in trees.items():
        where = path.relative_to(root)
        for n in ast.walk(tree):
            if isinstance(n, ast.Global):
                found.append(f"{where}:{n.lineno}: global {', '.join(n.names)}")
        for s in _module_level(tree.body):
            what = _state(s, mutable_classes)
            if what is not None:
                found.append(f"{where}:{s.lineno}: {what}")
    return found


if __name__ == "__main__":
    state = scan_module_state(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
    print(len(state), "module-level mutable state")
    for line in state:
        print("  ", line)
