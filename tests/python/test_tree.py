"""The tree has no circles: no Python module of the package or of tools/fldev imports (at any depth
in its body) a module that imports it back, no C header or source includes its way back to itself,
and no C file calls its way back to itself (a file depends on the file defining each function it
calls or takes the address of: a .c file's external functions, a header's inline ones)."""

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


def _blank_code(text):
    """Comments, strings, character literals and preprocessor lines blanked, lines kept."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))

    text = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", blank, text, flags=re.M)


def call_graph(texts):
    """{file: {files it calls into}} over {file: C source text}. A function defined in the caller's
    own file is its own; otherwise a name resolves to the file defining it with external linkage
    (a .c file) or inline (a header); a static function of another .c file is not visible."""
    defs, bodies = {}, {}
    for rel, text in texts.items():
        lines = _blank_code(text).split("\n")
        for name, line, count in c_functions(text):
            head = " ".join(lines[max(0, line - 2):line])
            static = re.search(r"\bstatic\b[^;{}]*\b" + name + r"\s*\(", head) is not None
            if rel.endswith(".h") or not static:
                defs.setdefault(name, set()).add(rel)
            bodies.setdefault(rel, []).append((name, "\n".join(lines[line - 1:line - 1 + count])))
    graph = {rel: set() for rel in texts}
    for rel, fns in bodies.items():
        own = {n for n, _ in fns}
        for _, body in fns:
            for ident in set(re.findall(r"\b[A-Za-z_]\w*\b", body)) - own:
                graph[rel] |= defs.get(ident, set()) - {rel}
    return graph


def c_texts():
    texts = {}
    for top in ("include", "src"):
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith((".c", ".h")):
                    with open(os.path.join(d, n)) as f:
                        texts[os.path.relpath(os.path.join(d, n), ROOT)] = f.read()
    return texts


def test_no_call_circle_among_c_files():
    graph = call_graph(c_texts())
    assert sum(len(v) for v in graph.values()) > 100
    # The JIT's layers, bottom up, each calling only into layers below it.
    jit = ["jit_grid.c", "jit_key.c", "jit_table.c", "jit_stock.c", "jit_launch.c", "jit.c", "jit_types.c", "autotune_key.c", "autotune.c",
           "heuristics.c", "tuner_slot.c", "jit_subscript.c"]
    for i, name in enumerate(jit):
        above = {f"src/python/triton/{n}" for n in jit[i + 1:]}
        assert graph[f"src/python/triton/{name}"] & above == set(), name
    assert cycles(graph) == []


def rooms(*graphs):
    """The C files' graphs read with a header and the .c file of the same name (in one directory)
    as one room: an edge for each call or #include between two rooms."""
    def room(rel):
        d, n = os.path.split(rel)
        return os.path.join(d, os.path.splitext(n)[0])
    out = {}
    for g in graphs:
        for a, bs in g.items():
            out.setdefault(room(a), set()).update(room(b) for b in bs if room(b) != room(a))
    return out


def test_no_circle_among_rooms():
    """A header and its same-named .c read as one: no file takes its types from a room it is called
    by (a layer's shared types live in a header named after none of its files)."""
    graph = rooms(call_graph(c_texts()), c_graph())
    assert len(graph) > 40
    assert cycles(graph) == []
    # It can fail: a header named after the top file of the files that include it is a circle.
    assert cycles(rooms({"x_key.c": {"x.h"}, "x.c": {"x_key.c", "x.h"}})) != []


def test_the_call_graph_finds_a_circle_through_a_header():
    texts = {"a.h": "static inline int a_get(void) { return b_impl(); }\n",
             "b.c": "#include \"a.h\"\nint b_impl(void) { return 1; }\nint b_twice(void) { return a_get() * 2; }\n",
             "c.c": "static int helper(void) { return 0; }\nint c_use(void) { return b_twice() + helper(); }\n",
             "d.c": "static int helper(void) { return 1; }\n"}
    graph = call_graph(texts)
    assert graph == {"a.h": {"b.c"}, "b.c": {"a.h"}, "c.c": {"b.c"}, "d.c": set()}
    assert cycles(graph) == [["a.h", "b.c", "a.h"]]


def test_no_circle_among_python_modules():
    assert cycles(python_graph(os.path.join(ROOT, "python", "fastlaunch"), "fastlaunch")) == []
    assert cycles(python_graph(os.path.join(ROOT, "tools", "fldev"), "fldev")) == []


def test_no_circle_among_c_files():
    graph = c_graph()
    assert len(graph) > 20
    assert cycles(graph) == []


def test_the_checker_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


# ---- sizes: no source file over 600 lines, no C function in src/ over 80 ----

SKIP_DIRS = {".git", "build", ".venv", "__pycache__", ".pytest_cache"}


def source_files():
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(".mesonpy")]
        for n in names:
            path = os.path.join(d, n)
            if n.endswith((".c", ".h", ".cpp", ".py")) or n in ("meson.build", "Makefile"):
                yield path
            elif os.path.basename(d) in ("tools", ".ci") and "." not in n:
                with open(path, "rb") as f:
                    if f.read(2) == b"#!":
                        yield path


def test_no_source_file_over_600_lines():
    sizes = {}
    for path in source_files():
        with open(path, "rb") as f:
            sizes[os.path.relpath(path, ROOT)] = f.read().count(b"\n")
    assert len(sizes) > 50
    assert {p: n for p, n in sizes.items() if n > 600} == {}


def c_functions(text):
    """(name, first line, line count) of each function defined at file scope in C source text."""
    # Comments, strings and character literals become blanks of the same shape, so that braces
    # inside them do not count and line numbers stay.
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))

    text = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", blank, text, flags=re.M)  # preprocessor lines
    out, depth, head = [], 0, 0
    for i, ch in enumerate(text):
        if depth == 0 and ch in ";}":
            head = i + 1
        if ch == "{":
            if depth == 0:
                sig = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", text[head:i])
                m = re.search(r"(\w+)\s*\([^;{}]*\)\s*$", sig)
                start = head + len(text[head:i]) - len(text[head:i].lstrip())
                fn = (m.group(1), text.count("\n", 0, start) + 1, i) if m and "=" not in sig.split("(")[0] else None
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if fn:
                    out.append((fn[0], fn[1], text.count("\n", 0, i) + 2 - fn[1]))
                head = i + 1
    return out


def test_no_c_function_in_src_over_80_lines():
    lengths = {}
    for d, _, names in os.walk(os.path.join(ROOT, "src")):
        for n in names:
            if n.endswith((".c", ".h", ".cpp")):
                with open(os.path.join(d, n)) as f:
                    for name, line, count in c_functions(f.read()):
                        lengths[f"{os.path.relpath(os.path.join(d, n), ROOT)}:{line} {name}"] = count
    assert len(lengths) > 200
    assert {k: v for k, v in lengths.items() if v > 80} == {}


def test_the_function_counter_counts():
    src = 'static int a(int x) {\n  if (x) { return "}"[0]; }\n  /* } */\n  return 0;\n}\n\nstruct s { int y; };\n' \
          "int\nb(void)\n{\n  return '{';\n}\n" \
          "static void c(int x) __attribute__((noinline)) {\n}\n"
    assert c_functions(src) == [("a", 1, 5), ("b", 8, 5), ("c", 13, 2)]
