/* compiled_values.c: a kept compiled kernel's call read as Triton's launcher reads it, for the paths
 * that must read every argument before anything else runs: the launch hooks of Triton 3.5 and 3.6
 * and a `.run` call with hooks (compiled.c, compiled_run.c), and a kernel with global scratch, whose
 * buffer comes from Triton's allocator per launch. Depends on the core and call_args.h only. */
#include "compiled_base.h"

int fl_compiled_collect_checked(LaunchObject *L, PyObject *const *full, size_t nfull, fl_value *values,
                                fl_tensor_map_value *tmaps, fl_error *err) {
  return fl_ext_collect_checked(L->state, (fl_PlanObject *)L->plan, full, nfull, values, tmaps, err);
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
  PyObject *buf = NULL;
  uint64_t addr = 0;
  if (fl_ext_scratch_alloc(L->state, L->scratch_var, L->scratch_size, L->scratch_align, L->scratch_ctas, g, stream, stream_obj, &L->scratch_ints,
                           &buf, &addr) < 0) {
    rc = -1;
    goto done;
  }
  /* The allocator ran Python code, which may have changed the arguments: read again, as Triton's
   * launcher reads them after allocating (anything now refused is Triton's, which allocates again). */
  rc = fl_compiled_collect_checked(L, full, nfull, values, tmaps, &err);
  if (rc != 0) {
    if (rc == -2) PyErr_Clear();
    rc = 2;
    Py_DECREF(buf);
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
