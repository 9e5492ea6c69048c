/* tensor_device.c: where a tensor lives when the tensor door declines it (a subclass with
 * __torch_function__, a FakeTensor, a meta tensor, no door built): torch's own answer, obj.device,
 * for the launch paths' memory checks (convert.c for Plan and the Inductor entry, jit_key.c for the
 * JIT). Depends on the C API (and the door, when built). */
#include "ext.h"

#include <limits.h>
#include <string.h>

/* Where a tensor the door declines lives, as torch says (`obj.device`): 0 read; 2 a meta tensor; 1
 * not read (no device, or one that raises: no exception is left set). Each attribute is read only
 * after the one before it was: no getattr runs with an exception pending. */
#define optional_attr fl_ext_optional_attr /* a wrapper with data_ptr() and no device: read every launch */

/* The last torch.device read and what it said (held: its identity is the key, and a torch.device
 * never changes; torch hands out the same object for a device). */
static FL_EXT_TLS PyObject *seen_device;
static FL_EXT_TLS int seen_r, seen_where, seen_index;

static int device_of(PyObject *dev, int *where, int *index) {
  static FL_EXT_TLS PyObject *str_type, *str_index;
  if (!str_type && !(str_type = PyUnicode_InternFromString("type"))) return 1;
  if (!str_index && !(str_index = PyUnicode_InternFromString("index"))) return 1;
  PyObject *type = NULL, *ix = NULL;
  int r = 1;
  if (optional_attr(dev, str_type, &type) <= 0 || optional_attr(dev, str_index, &ix) <= 0) goto done;
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
  Py_XDECREF(type);
  Py_XDECREF(ix);
  return r;
}

int fl_ext_tensor_device(const fl_tensor_door *door, PyObject *obj, int *where, int *index) {
  static FL_EXT_TLS PyObject *str_device;
  if (!str_device && !(str_device = PyUnicode_InternFromString("device"))) {
    PyErr_Clear();
    return 1;
  }
  PyObject *dev = NULL;
  int r = 1;
  if (optional_attr(obj, str_device, &dev) > 0) {
    int d = door ? door->device(dev, where, index) : 0; /* torch's C++ object: no Python call */
    if (d) {
      r = d == 2 ? 2 : 0;
    } else if (dev == seen_device) {
      *where = seen_where, *index = seen_index;
      r = seen_r;
    } else if ((r = device_of(dev, where, index)) != 1 && !PyErr_Occurred() &&
               strcmp(Py_TYPE(dev)->tp_name, "torch.device") == 0) { /* immutable: its answer kept */
      PyObject *old = seen_device;
      seen_device = Py_NewRef(dev), seen_r = r, seen_where = r == 0 ? *where : 0, seen_index = r == 0 ? *index : -1;
      Py_XDECREF(old);
    }
  }
  Py_XDECREF(dev);
  if (PyErr_Occurred()) PyErr_Clear();
  return r;
}
