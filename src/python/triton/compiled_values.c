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
  size_t nfull = nargs + L->nhidden;
  if (nfull > JIT_MAX_PARAMS + 2) return 1;
  PyObject *full[JIT_MAX_PARAMS + 2];
  for (size_t i = 0; i < nargs; i++) full[i] = args[i];
  for (size_t h = 0; h < L->nhidden; h++) full[nargs + h] = Py_None; /* the buffer's address comes after */
  fl_ext_scratch_ref sc = {L->scratch_var, L->scratch_size, L->scratch_align, L->scratch_ctas, L->nhidden,
                           &L->scratch_ints};
  fl_error err;
  int rc = fl_ext_scratch_launch((fl_PlanObject *)L->plan, &sc, full, nfull, stream, stream_obj, g, &err);
  if (rc == 0) L->fast++;
  if (rc == -2 || rc == -3) PyErr_Clear(); /* Triton's launcher reads the argument itself and raises */
  return rc == -2 ? 1 : rc == -3 ? 2 : rc;
}
