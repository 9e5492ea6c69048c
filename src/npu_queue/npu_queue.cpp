// npu_queue.cpp: fastlaunch._npu_queue, the shim between fastlaunch's npu backend and torch_npu's
// task queue. C++ only because the door is C++: libtorch_npu.so exports
//   void RunAclCall(const std::string &op_name, const std::function<int()> &func)
//   uint32_t OpApiGetTaskQueueEnable()
// whose types are plain libstdc++, so no torch header is needed. They are found with dlsym in the
// libtorch_npu.so the process already has (never loaded here). The C core sees only the C table
// fl_npu_queue, in a capsule; no exception leaves this file.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <new>
#include <string>

#include "fastlaunch_npu_queue.h"

namespace {

using run_acl_call_fn = void (*)(const std::string &, const std::function<int()> &);
using queue_enable_fn = uint32_t (*)();

// Itanium C++ ABI names of the two exports, with libstdc++'s std::__cxx11::string.
constexpr const char *kRunAclCall =
    "_Z10RunAclCallRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEERKSt8functionIFivEE";
constexpr const char *kQueueEnable = "_Z23OpApiGetTaskQueueEnablev";

run_acl_call_fn run_acl_call = nullptr;
queue_enable_fn queue_enable = nullptr;
char why_unusable[160] = "";

int mode() noexcept {
  if (!run_acl_call || !queue_enable) return -1;
  try {
    uint32_t m = queue_enable();
    return m > 2 ? 1 : static_cast<int>(m);
  } catch (...) {
    return -1;
  }
}

void *name_new(const char *name) noexcept {
  try {
    return new std::string(name ? name : "fastlaunch");
  } catch (...) {
    return nullptr;
  }
}

void name_free(void *name) noexcept { delete static_cast<std::string *>(name); }

int enqueue(void *name, fl_npu_task *task, char *why, size_t why_size) noexcept {
  static const std::string unnamed("fastlaunch");  // short enough for the string's own buffer
  const std::string &op = name ? *static_cast<const std::string *>(name) : unnamed;
  // One pointer: std::function keeps it in its own small buffer, allocating nothing.
  std::function<int()> fn = [task]() { return task->run(task); };
  try {
    run_acl_call(op, fn);
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(why, why_size, "%s", e.what());
  } catch (...) {
    std::snprintf(why, why_size, "unknown exception");
  }
  return -2;  // RunAclCall was entered: the task may be queued
}

const fl_npu_queue table = {FL_NPU_QUEUE_VERSION, mode, why_unusable, name_new, name_free, enqueue};

// probe() -> "absent" | "ok" | "unusable:<why>": whether torch_npu's library is in the process,
// and whether both exports were found there.
PyObject *probe(PyObject *, PyObject *) {
  if (run_acl_call && queue_enable) return PyUnicode_FromString("ok");
  const char *env = std::getenv("FASTLAUNCH_LIBTORCH_NPU");
  const char *lib = env && *env ? env : "libtorch_npu.so";
  void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  if (!h) return PyUnicode_FromString("absent");
  run_acl_call = reinterpret_cast<run_acl_call_fn>(dlsym(h, kRunAclCall));
  queue_enable = reinterpret_cast<queue_enable_fn>(dlsym(h, kQueueEnable));
  if (run_acl_call && queue_enable) return PyUnicode_FromString("ok");
  std::snprintf(why_unusable, sizeof why_unusable, "%s lacks %s", lib, run_acl_call ? "OpApiGetTaskQueueEnable" : "RunAclCall");
  run_acl_call = nullptr;
  queue_enable = nullptr;
  return PyUnicode_FromFormat("unusable:%s", why_unusable);
}

PyMethodDef methods[] = {
    {"probe", probe, METH_NOARGS, "probe() -> 'absent' | 'ok' | 'unusable:<why>'"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "fastlaunch._npu_queue",
                          "torch_npu's task queue for fastlaunch's npu backend (a capsule: queue)", -1, methods,
                          nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__npu_queue(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return nullptr;
#ifdef Py_GIL_DISABLED
  PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED); /* reads torch's objects, keeps no state of its own */
#endif
  PyObject *capsule = PyCapsule_New(const_cast<fl_npu_queue *>(&table), "fastlaunch.npu_queue", nullptr);
  if (!capsule || PyModule_AddObject(m, "queue", capsule) < 0) {
    Py_XDECREF(capsule);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
