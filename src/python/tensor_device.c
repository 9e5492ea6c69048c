/* tensor_device.c: where a tensor lives when the tensor door declines it (a subclass with
 * __torch_function__, a FakeTensor, a meta tensor, no door built): torch's own answer, obj.device,
 * for the launch paths' memory checks (convert.c for Plan and the Inductor entry, jit_key.c for the
 * JIT). Depends on the C API only. */
#include "ext.h"

#include <limits.h>
#include <string.h>

/* Where a tensor the door declines lives, as torch says (`obj.device`): 0 read; 2 a meta tensor; 1
 * not read (no device, or one that raises: no exception is left set). Each attribute is read only
 * after the one before it was: no getattr runs with an exception pending. */
int fl_ext_tensor_device(PyObject *obj, int *where, int *index) {
  PyObject *dev = PyObject_GetAttrString(obj, "device"), *type = NULL, *ix = NULL;
  int r = 1;
  if (!dev || !(type = PyObject_GetAttrString(dev, "type")) || !(ix = PyObject_GetAttrString(dev, "index"))) goto done;
  const char *t = PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : NULL;
  if (t && strcmp(t, "meta") == 0) {
    r = 2;
  } else if (t && (ix == Py_None || PyLong_Check(ix))) {
    long i = ix == Py_None ? -1 : PyLong_AsLong(ix);
    if (i == -1 && PyErr_Occurred()) goto done;
    *where = strcmp(t, "cpu") == 0 ? FL_TENSOR_HOST : strcmp(t, "cuda") == 0 ? FL_TENSOR_CUDA
             : strcmp(t, "npu") == 0 ? FL_TENSOR_NPU : FL_TENSOR_OTHER;
    *index = i < -1 || i > INT_MAX ? -1 : (int)i;
    r = 0;
  }
done:
  Py_XDECREF(dev);
  Py_XDECREF(type);
  Py_XDECREF(ix);
  if (PyErr_Occurred()) PyErr_Clear();
  return r;
}
