"""The tree has no circles: no Python module of the package or of tools/fldev imports (at any depth
in its body) a module that imports it back, and no C header or source includes its way back to
itself."""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cycles(graph):
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def python_graph(directory, package):
    graph = {}
    for name in os.listdir(directory):
        if not name.endswith(".py"):
            continue
        deps = set()
        with open(os.path.join(directory, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == package:
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith(package + ".")}
        me = name[:-3]
        graph[me] = {d for d in deps if d != me and os.path.exists(os.path.join(directory, d + ".py"))}
    return graph


def c_graph():
    files = {}
    for top in ("include", "src"):
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith((".c", ".h", ".cpp")):
                    files[os.path.relpath(os.path.join(d, n), ROOT)] = os.path.join(d, n)
    by_base = {}
    for rel in files:
        by_base.setdefault(os.path.basename(rel), []).append(rel)
    graph = {}
    for rel, path in files.items():
        with open(path) as f:
            included = re.findall(r'^#include "([^"]+)"', f.read(), re.M)
        graph[rel] = {t for inc in included for t in by_base.get(os.path.basename(inc), []) if t != rel}
    return graph


def test_no_circle_among_python_modules():
    assert cycles(python_graph(os.path.join(ROOT, "python", "fastlaunch"), "fastlaunch")) == []
    assert cycles(python_graph(os.path.join(ROOT, "tools", "fldev"), "fldev")) == []


def test_no_circle_among_c_files():
    graph = c_graph()
    assert len(graph) > 20
    assert cycles(graph) == []


def test_the_checker_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
