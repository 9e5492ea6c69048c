"""The release sources stand on their own: none names the testing layer (the testing build adds it
from outside: src/testing.c, src/python/testing.c and include/fastlaunch_testing.h), and the two GPU
backends do not repeat each other (what they share lives in src/backends/gpu_runtime.c)."""

import os
import re

from test_tree import ROOT, _blank_code, c_functions, c_texts

TESTING_FILES = {"src/testing.c", "src/python/testing.c", "include/fastlaunch_testing.h"}
# What only the testing layer defines or switches on.
TESTING_NAMES = re.compile(r"\bFL_TESTING\b|fastlaunch_testing\.h|\bfl_fault_\w+|\bfl_bench_launch_loop\b|"
                           r"\bfl_accept_any_memory\b|\bfl_(?:cuda|hip)_module_(?:load|unload)\b")


def naming_the_testing_layer(texts):
    return sorted(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
                  for rel, text in texts.items() if rel not in TESTING_FILES
                  for m in TESTING_NAMES.finditer(text))


def test_no_release_source_names_the_testing_layer():
    texts = c_texts()
    for d, _, names in os.walk(os.path.join(ROOT, "src")):
        for n in names:
            if n.endswith(".cpp"):
                with open(os.path.join(d, n)) as f:
                    texts[os.path.relpath(os.path.join(d, n), ROOT)] = f.read()
    assert TESTING_FILES <= set(texts) and len(texts) >= 60
    assert naming_the_testing_layer(texts) == []


def test_the_testing_check_finds_a_name():
    found = naming_the_testing_layer({"src/a.c": "int x;\n#ifdef FL_TESTING\n#endif\n",
                                      "src/b.c": "/* fl_bench_launch_loop */\n",
                                      "src/testing.c": "#ifdef FL_TESTING\n"})
    assert found == ["src/a.c:2: FL_TESTING", "src/b.c:1: fl_bench_launch_loop"]


def _as_hip(text):
    """CUDA's names as HIP's: cuda/CUDA, the driver's cuXxx functions and CU_ constants."""
    text = re.sub(r"cuda", "hip", text)
    text = re.sub(r"CUDA", "HIP", text)
    text = re.sub(r"\bfl_CU", "fl_hip", text)
    text = re.sub(r"\bFL_CU_", "FL_HIP_", text)
    return re.sub(r"\bcu(?=[A-Z])", "hip", text)


def function_bodies(text):
    """{name: body} of each function, the body's lines stripped, blank, comment and brace-only
    lines left out."""
    lines = _blank_code(text).split("\n")
    out = {}
    for name, first, count in c_functions(text):
        body = [ln.strip() for ln in lines[first - 1:first - 1 + count]]
        opening = next(i for i, ln in enumerate(body) if "{" in ln)
        kept = [ln for ln in body[opening + 1:] if ln and not re.fullmatch(r"[{}();,\s]*", ln)]
        out[name] = "\n".join(kept)
    return out


def shared_bodies(cuda_text, hip_text):
    cuda = function_bodies(_as_hip(cuda_text))
    hip = function_bodies(hip_text)
    return sorted((c, h) for c, cb in cuda.items() for h, hb in hip.items() if cb and cb == hb)


def test_no_gpu_backend_function_repeats_the_others():
    with open(os.path.join(ROOT, "src/backends/cuda.c")) as f:
        cuda = f.read()
    with open(os.path.join(ROOT, "src/backends/hip.c")) as f:
        hip = f.read()
    assert len(function_bodies(cuda)) >= 5 and len(function_bodies(hip)) >= 5
    assert shared_bodies(cuda, hip) == []


def test_the_backend_check_finds_a_copy():
    cuda = ("static int cuda_dev(const cuda_plan *p) {\n  /* the device */\n  return p->cuda_device;\n}\n"
            "static int other(void) {\n  return cuInit(0);\n}\n")
    hip = ("static int hip_dev(const hip_plan *p)\n{\n  return p->hip_device;   // same\n}\n"
           "static int different(void) {\n  return hipInit(1);\n}\n")
    assert shared_bodies(cuda, hip) == [("hip_dev", "hip_dev")]
