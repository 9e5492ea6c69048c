// tensor_door.cpp: fastlaunch._tensor, C++ (one of two C++ files, with src/npu_queue), compiled at
// first use against the imported torch by fastlaunch/_door.py: reads a torch tensor's data pointer and
// device through torch's own C++ object (THPVariable_Unpack), for the C extension, behind a C
// function table in a capsule. Optional: without it the extension calls data_ptr().
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <torch/csrc/autograd/python_variable.h>

#include "tensor_door.h"

namespace {

int where_of(c10::DeviceType type) {
  switch (type) {
    case c10::DeviceType::CPU:
      return FL_TENSOR_HOST;
    case c10::DeviceType::CUDA:
      return FL_TENSOR_CUDA;
    case c10::DeviceType::PrivateUse1:  // torch_npu registers the NPU as PrivateUse1
      return FL_TENSOR_NPU;
    default:
      return FL_TENSOR_OTHER;
  }
}

// Tensors whose data_ptr() means something else (a Python dispatch subclass, a functional wrapper)
// carry one of these keys; meta tensors have no memory. All go the slow way.
const c10::DispatchKeySet refused_keys = c10::DispatchKeySet(c10::DispatchKey::Python) |
                                         c10::DispatchKeySet(c10::DispatchKey::PythonTLSSnapshot) |
                                         c10::DispatchKeySet(c10::DispatchKey::Functionalize);

int unpack_typed(PyObject *obj, uint64_t *ptr, int *where, int *index, int *dtype) noexcept {
  // Plain tensors and Parameters only: a subclass may override what data_ptr() means (FakeTensor,
  // functional and wrapper subclasses) and goes the slow way.
  if (!THPVariable_CheckExact(obj)) return 0;
  try {
    const at::Tensor &t = THPVariable_Unpack(obj);
    if (!t.defined()) return 0;
    const c10::TensorImpl *impl = t.unsafeGetTensorImpl();
    if (!(impl->key_set() & refused_keys).empty()) return 0;
    c10::Device device = impl->device();
    if (device.type() == c10::DeviceType::Meta) return 0;
    // data() checks for storage itself: a storage-less tensor (sparse, say) throws, caught below.
    *ptr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(impl->data()));
    *where = where_of(device.type());
    *index = device.has_index() ? device.index() : -1;
    *dtype = static_cast<int>(impl->dtype().toScalarType());
    return 1;
  } catch (...) {
    return 0;  // whatever torch refused, data_ptr() will say it in its own words
  }
}

size_t unpack_ptrs(PyObject *const *objs, const uint32_t *pos, size_t n, int memory, int device, uint64_t *ptr,
                   int *dtype) noexcept {
  size_t j = 0;
  try {
    for (; j < n; j++) {
      PyObject *obj = objs[pos[j]];
      if (!THPVariable_CheckExact(obj)) break;
      const at::Tensor &t = THPVariable_Unpack(obj);
      if (!t.defined()) break;
      const c10::TensorImpl *impl = t.unsafeGetTensorImpl();
      if (!(impl->key_set() & refused_keys).empty()) break;
      c10::Device dev = impl->device();
      if (dev.type() == c10::DeviceType::Meta) break;
      if (memory != 0 && (where_of(dev.type()) != memory || (device >= 0 && (!dev.has_index() || dev.index() != device))))
        break;
      ptr[j] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(impl->data()));
      if (dtype) dtype[j] = static_cast<int>(impl->dtype().toScalarType());
    }
  } catch (...) {
    // whatever torch refused: the caller reads this one (and the rest) one at a time
  }
  return j;
}

int unpack(PyObject *obj, uint64_t *ptr, int *where, int *index) noexcept {
  int dtype;
  return unpack_typed(obj, ptr, where, index, &dtype);
}

const fl_tensor_door door = {FL_TENSOR_DOOR_VERSION, FL_TORCH_VERSION, unpack, unpack_typed, unpack_ptrs};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "fastlaunch._tensor",
                          "torch's tensor object for fastlaunch's C extension (a capsule: door)", -1,
                          nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__tensor(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return nullptr;
  PyObject *capsule = PyCapsule_New(const_cast<fl_tensor_door *>(&door), FL_TENSOR_DOOR_CAPSULE, nullptr);
  if (!capsule || PyModule_AddObject(m, "door", capsule) < 0) {
    Py_XDECREF(capsule);
    Py_DECREF(m);
    return nullptr;
  }
  if (PyModule_AddStringConstant(m, "torch_version", FL_TORCH_VERSION) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
