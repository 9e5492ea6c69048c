/* compiled.h: a kept Triton CompiledKernel's launch (compiled.c: CompiledLaunch, and the
 * `compiled[grid]` call), shared with compiled_run.c (its `compiled.run(...)` called directly).
 * Private to src/python. */
#ifndef FL_COMPILED_H
#define FL_COMPILED_H

#include "call_args.h"
#include "jit_base.h"

typedef struct {
  PyObject_HEAD
  fl_ext_state *state;
  PyObject *kernel;        /* the CompiledKernel */
  PyObject *dispatcher;    /* its JITFunction's JitDispatcher, or NULL */
  PyObject *plan;          /* a Plan taking every parameter, or NULL: Triton's */
  PyObject *reason;        /* why Triton's (str), or NULL */
  PyObject *stock_getitem; /* Triton's CompiledKernel.__getitem__ */
  PyObject *spare;         /* the CompiledCall handed out while nobody else holds it */
  PyObject *stock_counts;  /* dict: reason -> calls given to Triton */
  size_t min_args;         /* the last kernel argument's position + 1: trailing constexprs may be left
                            * out, as Triton's launcher skips them (FlagGems passes none); every
                            * parameter where the launcher parses its arguments first */
  int parse_first;         /* Triton's launcher parses every argument by a format before the enter
                            * hook (Triton 3.5, 3.6): exactly one per parameter, scalars checked first */
  unsigned long long fast, stock, hooked;
} LaunchObject;

/* The type, set once at the module's init (compiled.c). */
extern PyTypeObject *fl_compiled_launch_type;

/* The call's runtime values, read as Triton's launcher reads them first (every argument, the scalars
 * checked against their kinds; a pointer the plan refuses is a refusal too): 0; -1 refused, nothing
 * set; -2 with a Python exception an argument's own code raised. `full` holds ncall arguments. */
int fl_compiled_collect_checked(LaunchObject *L, PyObject *const *full, size_t nfull, fl_value *values,
                                fl_tensor_map_value *tmaps, fl_error *err);

#endif
