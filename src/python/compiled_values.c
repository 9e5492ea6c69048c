/* compiled_values.c: a kept compiled kernel's call read as Triton's launcher reads it, for the paths
 * that must read every argument before anything else runs: the launch hooks of Triton 3.5 and 3.6
 * and a `.run` call with hooks (compiled.c, compiled_run.c), and a kernel with global scratch, whose
 * buffer comes from Triton's allocator per launch. Depends on the core and call_args.h only. */
#include "compiled_base.h"

int fl_compiled_collect_checked(LaunchObject *L, PyObject *const *full, size_t nfull, fl_value *values,
                                fl_tensor_map_value *tmaps, fl_error *err) {
  fl_PlanObject *plan = (fl_PlanObject *)L->plan;
  int rc = fl_ext_collect(L->state, &plan->args, full, nfull, values, tmaps, err);
  /* The scalars checked against their kinds now, as a launcher's format checks them before its
   * hook (it reads the pointers after; a pointer refused is already a refusal here). */
  fl_abi abi = fl_plan_abi(plan->plan);
  for (size_t k = 0; rc == 0 && k < plan->args.nruntime; k++) {
    uint64_t slot[4];
    if (plan->args.kinds[k] != FL_KIND_PTR && plan->args.kinds[k] != FL_KIND_TMAP &&
        fl_pack_value(abi, plan->args.kinds[k], &values[k], slot, k, err) != FL_OK)
      rc = -1;
  }
  return rc;
}

/* The buffer's address as Triton's launcher reads its scratch pointers (extractPointer): None is 0,
 * an int is itself, anything else its data_ptr(), which must give an int; with Triton's errors.
 * (Its device check, cuPointerGetAttribute, is the driver's own: a buffer an allocator made in host
 * memory is the allocator's bug, launched here as given.) 0, or -1 with an exception. */
static int buffer_address(PyObject *obj, uint64_t *addr) {
  *addr = 0;
  if (obj == Py_None) return 0;
  PyObject *ptr = PyLong_Check(obj) ? Py_NewRef(obj) : NULL;
  if (!ptr) {
    ptr = PyObject_CallMethod(obj, "data_ptr", NULL);
    if (!ptr) {
      PyErr_SetString(PyExc_TypeError, "Pointer argument must be either uint64 or have data_ptr method");
      return -1;
    }
    if (!PyLong_Check(ptr)) {
      Py_DECREF(ptr);
      PyErr_SetString(PyExc_TypeError, "data_ptr method of Pointer object must return 64-bit int");
      return -1;
    }
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(ptr);
  Py_DECREF(ptr);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *addr = v;
  return 0;
}

int fl_compiled_scratch_launch(LaunchObject *L, const int64_t g[3], uint64_t stream, PyObject *stream_obj,
                               PyObject *const *args, size_t nargs) {
  fl_PlanObject *plan = (fl_PlanObject *)L->plan;
  size_t nfull = nargs + L->nhidden;
  if (nfull > JIT_MAX_PARAMS + 2) return 1;
  PyObject *full[JIT_MAX_PARAMS + 2];
  for (size_t i = 0; i < nargs; i++) full[i] = args[i];
  for (size_t h = 0; h < L->nhidden; h++) full[nargs + h] = Py_None; /* the buffer's address comes after */
  fl_value stack_values[FL_EXT_STACK_VALUES], *values = stack_values;
  if (plan->args.nruntime > FL_EXT_STACK_VALUES && !(values = PyMem_Malloc(plan->args.nruntime * sizeof *values)))
    return PyErr_NoMemory(), -1;
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  fl_error err;
  int rc = fl_compiled_collect_checked(L, full, nfull, values, tmaps, &err);
  if (rc != 0) {
    if (rc == -2) PyErr_Clear();
    rc = 1;
    goto done;
  }
  /* Triton: allocator.get()(grid_x * grid_y * grid_z * num_ctas * size, align, stream). */
  unsigned __int128 size = (unsigned __int128)(uint64_t)g[0] * (uint64_t)g[1] * (uint64_t)g[2] * L->scratch_ctas *
                           L->scratch_size;
  PyObject *alloc = NULL, *buf = NULL;
  if (PyContextVar_Get(L->scratch_var, NULL, &alloc) < 0 || !alloc) {
    rc = -1;
    goto done;
  }
  PyObject *sz = size > UINT64_MAX ? NULL : PyLong_FromUnsignedLongLong((uint64_t)size);
  PyObject *al = sz ? PyLong_FromUnsignedLongLong(L->scratch_align) : NULL;
  PyObject *so = al ? (stream_obj ? Py_NewRef(stream_obj) : PyLong_FromUnsignedLongLong(stream)) : NULL;
  if (so) {
    PyObject *argv[3] = {sz, al, so};
    buf = PyObject_Vectorcall(alloc, argv, 3, NULL);
  } else if (!sz && !PyErr_Occurred()) {
    PyErr_SetString(PyExc_OverflowError, "global scratch size exceeds 64 bits");
  }
  Py_XDECREF(sz);
  Py_XDECREF(al);
  Py_XDECREF(so);
  Py_DECREF(alloc);
  uint64_t addr = 0;
  if (!buf || buffer_address(buf, &addr) < 0) {
    Py_XDECREF(buf);
    rc = -1;
    goto done;
  }
  values[plan->args.nruntime - L->nhidden] = fl_ptr((const void *)(uintptr_t)addr);
  if (fl_launch(plan->plan, stream, values, plan->args.nruntime, g, &err) == FL_OK) {
    L->fast++;
    rc = 0;
  } else if (err.backend_submitted) {
    fl_ext_raise_named(L->state, &err, plan->arg_names);
    rc = -1;
  } else {
    rc = 2;
  }
  Py_DECREF(buf); /* Triton drops its buffer once the launch returns */
done:
  if (values != stack_values) PyMem_Free(values);
  return rc;
}
