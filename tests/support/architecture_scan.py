"""Architecture scan: cross-module private access and intra-package import cycles.

Run: python tests/support/architecture_scan.py . (prints both lists). Used by tests/test_architecture.py
once the refactor of issue 14 lands.
"""
import ast, sys, pathlib, itertools
from collections import defaultdict
ROOT = pathlib.Path(sys.argv[1])
PKGS = ["storage", "timeline", "provenance", "flowledger"]

def modname(p):
    rel = p.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__": parts = parts[:-1]
    return ".".join(parts)

files = [p for pkg in PKGS for p in (ROOT / pkg).rglob("*.py")]
mods = {modname(p): p for p in files}

def defined_private(tree):
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name.startswith("_"):
            names.add(n.name)
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and isinstance(n.ctx, ast.Store):
            names.add(n.attr)
        if isinstance(n, ast.Name) and n.id.startswith("_") and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    # dataclass/class-level fields
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef):
            for b in n.body:
                if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name) and b.target.id.startswith("_"):
                    names.add(b.target.id)
    return names

def tc_nodes(tree):
    skip = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If):
            t = n.test
            if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
                for b in ast.walk(n):
                    skip.add(id(b))
    return skip

priv = []
graph = defaultdict(set)
for m, p in mods.items():
    tree = ast.parse(p.read_text())
    own = defined_private(tree)
    skip = tc_nodes(tree)
    pkg_of = m.split(".")[0]
    is_pkg = p.name == "__init__.py"
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__"):
            base = n.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if n.attr in own:
                continue
            priv.append(f"{p.relative_to(ROOT)}:{n.lineno}: .{n.attr}")
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            if id(n) in skip: continue
            if isinstance(n, ast.ImportFrom):
                if n.level:
                    base = m.split(".") if is_pkg else m.split(".")[:-1]
                    base = base[: len(base) - (n.level - 1)]
                    target = ".".join(base + ([n.module] if n.module else []))
                else:
                    target = n.module or ""
                for a in n.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        priv.append(f"{p.relative_to(ROOT)}:{n.lineno}: import {a.name}")
                    full = f"{target}.{a.name}"
                    t = full if full in mods else target
                    if t in mods and t != m: graph[m].add(t)
            else:
                for a in n.names:
                    if a.name in mods and a.name != m: graph[m].add(a.name)
print(len(priv), "private reach-ins")
for x in priv: print("  ", x)
# cycles: SCCs among modules of same top package, ignoring edges into package __init__ of own pkg? keep all
import sys
sys.setrecursionlimit(10000)
index = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
def strong(v):
    index[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in graph[v]:
        if w.split(".")[0] != v.split(".")[0]: continue
        if w not in index: strong(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(comp)
for v in list(mods):
    if v not in index: strong(v)
print(len(sccs), "import cycles")
for s in sccs: print("  ", sorted(s))
