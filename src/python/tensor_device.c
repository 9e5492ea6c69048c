/* tensor_device.c: where a tensor lives when the tensor door declines it (a subclass with
 * __torch_function__, a FakeTensor, a meta tensor, no door built): torch's own answer, obj.device,
 * for the launch paths' memory checks (convert.c for Plan and the Inductor entry, jit_key.c for the
 * JIT). Depends on the C API only. */
#include "ext.h"

#include <string.h>

/* Where a tensor the door declines lives, as torch says (`obj.device`). */
int fl_ext_tensor_device(PyObject *obj, int *where, int *index) {
  PyObject *dev = PyObject_GetAttrString(obj, "device");
  PyObject *type = dev ? PyObject_GetAttrString(dev, "type") : NULL;
  PyObject *ix = dev ? PyObject_GetAttrString(dev, "index") : NULL;
  const char *t = type && PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : NULL;
  int r = 1;
  if (t && strcmp(t, "meta") == 0) {
    r = 2;
  } else if (t && ix && (ix == Py_None || PyLong_Check(ix))) {
    *where = strcmp(t, "cpu") == 0 ? FL_TENSOR_HOST : strcmp(t, "cuda") == 0 ? FL_TENSOR_CUDA
             : strcmp(t, "npu") == 0 ? FL_TENSOR_NPU : FL_TENSOR_OTHER;
    *index = ix == Py_None ? -1 : (int)PyLong_AsLong(ix);
    r = 0;
  }
  Py_XDECREF(dev);
  Py_XDECREF(type);
  Py_XDECREF(ix);
  if (PyErr_Occurred()) PyErr_Clear();
  return r;
}
