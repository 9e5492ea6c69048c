// tensor_door.cpp: fastlaunch._tensor, C++ (one of two C++ files, with src/npu_queue), compiled at
// first use against the imported torch by fastlaunch/_door.py: reads a torch tensor's data pointer and
// device through torch's own C++ object (THPVariable_Unpack), for the C extension, behind a C
// function table in a capsule. Optional: without it the extension calls data_ptr().
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <torch/csrc/Device.h>
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

// unpack_ptrs' loop, one copy per form of its outputs (no test of out or dtype per tensor). `want`
// is the device a tensor must be on: its type (kCPU, kCUDA, PrivateUse1), its index (-1: any);
// `any`: no device asked for (anything but meta).
struct Want {
  bool any;
  c10::DeviceType type;
  c10::DeviceIndex index;
};

// flatten: each copy inlines torch's inline accessors (data() included) as the one loop did
template <bool kOut, bool kDtype>
__attribute__((flatten)) size_t read_ptrs(PyObject *const *objs, const uint32_t *pos, size_t n, Want want, uint64_t *ptr, const uint32_t *out,
                 int *dtype) noexcept {
  size_t j = 0;
  PyTypeObject *taken = nullptr;  // the last type THPVariable_CheckExact took: one compare per repeat
  try {
    for (; j < n; j++) {
      PyObject *obj = objs[pos[j]];
      if (Py_TYPE(obj) != taken) {
        if (!THPVariable_CheckExact(obj)) break;
        taken = Py_TYPE(obj);
      }
      const at::Tensor &t = THPVariable_Unpack(obj);
      if (!t.defined()) break;
      const c10::TensorImpl *impl = t.unsafeGetTensorImpl();
      if (!(impl->key_set() & refused_keys).empty()) break;
      c10::Device dev = impl->device();
      if (want.any ? dev.type() == c10::DeviceType::Meta
                   : dev.type() != want.type || (want.index >= 0 && dev.index() != want.index))
        break;
      // data() checks for storage itself: a storage-less tensor (sparse, say) throws, caught below.
      ptr[kOut ? out[j] : j] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(impl->data()));
      if (kDtype) dtype[j] = static_cast<int>(impl->dtype().toScalarType());
    }
  } catch (...) {
    // whatever torch refused: the caller reads this one (and the rest) one at a time
  }
  return j;
}

size_t unpack_ptrs(PyObject *const *objs, const uint32_t *pos, size_t n, int memory, int device, uint64_t *ptr,
                   const uint32_t *out, int *dtype) noexcept {
  Want want{memory == 0, c10::DeviceType::CPU, static_cast<c10::DeviceIndex>(device >= 0 && device < 128 ? device : -1)};
  switch (memory) {
    case 0:
      break;
    case FL_TENSOR_HOST:
      want.type = c10::DeviceType::CPU;
      break;
    case FL_TENSOR_CUDA:
      want.type = c10::DeviceType::CUDA;
      break;
    case FL_TENSOR_NPU:
      want.type = c10::DeviceType::PrivateUse1;
      break;
    default:
      return 0;  // memory no tensor here lives in (FL_TENSOR_OTHER): each the slow way, refused there
  }
  if (device >= 128) return 0;  // no such device index: the slow way says so
  if (out) return dtype ? read_ptrs<true, true>(objs, pos, n, want, ptr, out, dtype)
                        : read_ptrs<true, false>(objs, pos, n, want, ptr, out, dtype);
  return dtype ? read_ptrs<false, true>(objs, pos, n, want, ptr, out, dtype)
               : read_ptrs<false, false>(objs, pos, n, want, ptr, out, dtype);
}

int unpack(PyObject *obj, uint64_t *ptr, int *where, int *index) noexcept {
  int dtype;
  return unpack_typed(obj, ptr, where, index, &dtype);
}

int device_of(PyObject *obj, int *where, int *index) noexcept {
  if (!THPDevice_Check(obj)) return 0;
  const c10::Device &device = reinterpret_cast<THPDevice *>(obj)->device;
  if (device.type() == c10::DeviceType::Meta) return 2;
  *where = where_of(device.type());
  *index = device.has_index() ? device.index() : -1;
  return 1;
}

const fl_tensor_door door = {FL_TENSOR_DOOR_VERSION, FL_TORCH_VERSION, unpack, unpack_typed, unpack_ptrs, device_of};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "fastlaunch._tensor",
                          "torch's tensor object for fastlaunch's C extension (a capsule: door)", -1,
                          nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__tensor(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return nullptr;
#ifdef Py_GIL_DISABLED
  PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED); /* reads torch's objects, keeps no state of its own */
#endif
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
