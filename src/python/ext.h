/* ext.h: declarations shared by the files of the CPython extension fastlaunch._C. */
#ifndef FL_EXT_H
#define FL_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "fastlaunch.h"

/* Module state: everything the extension would otherwise keep in globals. */
typedef struct {
  PyObject *error_type;       /* FastLaunchError */
  PyObject *unavailable_type; /* FastLaunchPlanUnavailable */
  PyTypeObject *plan_type;
  PyTypeObject *entry_type;
  PyTypeObject *host_kernel_type;
  PyObject *str_data_ptr;
  PyObject *str_stream;
  PyObject *str_grid;
  PyObject *str_fallback;     /* the bound launch's method called when the entry cannot launch */
} fl_ext_state;

extern PyModuleDef fl_ext_module;

static inline fl_ext_state *fl_ext_state_of(PyObject *module) { return (fl_ext_state *)PyModule_GetState(module); }
fl_ext_state *fl_ext_state_from_type(PyTypeObject *type);

/* Raises FastLaunchError from an fl_error (reason, backend_submitted, stable). Returns NULL. */
PyObject *fl_ext_raise(fl_ext_state *st, const fl_error *err);
/* Raises FastLaunchError with a reason made here (not submitted). */
PyObject *fl_ext_raise_reason(fl_ext_state *st, bool stable, const char *fmt, ...);
/* Raises FastLaunchPlanUnavailable from an fl_error (its reason and stability). */
PyObject *fl_ext_raise_unavailable(fl_ext_state *st, const fl_error *err);

int fl_ext_add_errors(PyObject *module, fl_ext_state *st);
int fl_ext_add_plan_type(PyObject *module, fl_ext_state *st);
int fl_ext_add_entry_type(PyObject *module, fl_ext_state *st);
int fl_ext_add_host_kernel_type(PyObject *module, fl_ext_state *st);

/* ---- plans ---- */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  const fl_plan *plan;
  fl_ext_state *state;    /* borrowed: the module outlives its types' instances through the type */
  PyObject *owner;        /* keeps the kernel's owner (a CompiledKernel, a HostKernel) alive */
  PyObject *name;
  size_t nruntime;   /* runtime ABI arguments */
  size_t ncall;      /* positional arguments per call: nruntime plus the ignored ones */
  int32_t *argmap;   /* per positional argument: its ABI index, or -1 (ignored); NULL: identity */
  int backend;
  const fl_kind *kinds;   /* fl_plan's own array (nargs) */
} fl_PlanObject;

/* Converts the positional arguments to values (before the submit boundary) and launches.
 * Returns 0, or -1 with FastLaunchError set. */
int fl_ext_plan_launch(fl_PlanObject *plan, PyObject *const *args, size_t nargs, uint64_t stream,
                       const int64_t *grid, fl_error *err);
/* Reads a stream handle (an int) and an optional grid tuple from Python objects. */
int fl_ext_parse_stream(fl_ext_state *st, PyObject *obj, uint64_t *stream);
int fl_ext_parse_grid(fl_ext_state *st, PyObject *obj, int64_t grid[3]);

#endif
