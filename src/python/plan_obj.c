/* plan_obj.c: the Plan type: a plan built once from a typed spec, launched through vectorcall. */
#include "call_args.h"

/* plan(*args, stream=0, grid=None) */
static PyObject *plan_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  fl_PlanObject *plan = (fl_PlanObject *)callable;
  fl_ext_state *st = plan->state;
  size_t nargs = PyVectorcall_NARGS(nargsf);
  uint64_t stream = 0;
  int64_t grid_storage[3];
  const int64_t *grid = NULL;
  fl_error err;
  if (kwnames) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; k++) {
      PyObject *key = PyTuple_GET_ITEM(kwnames, k), *value = args[nargs + (size_t)k];
      if (fl_ext_name_is(key, st->str_stream)) {
        if (fl_ext_parse_stream(value, &stream, &err) < 0) return fl_ext_raise(st, &err);
      } else if (fl_ext_name_is(key, st->str_grid)) {
        if (value != Py_None) {
          if (fl_ext_parse_grid(value, grid_storage, &err) < 0) return fl_ext_raise(st, &err);
          grid = grid_storage;
        }
      } else {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "Plan() got an unexpected keyword argument %R", key);
        return NULL;
      }
    }
  }
  int rc = fl_ext_plan_launch(plan, args, nargs, stream, grid, &err);
  if (rc == -2) return NULL;
  if (rc < 0) return fl_ext_raise_named(st, &err, plan->arg_names);
  Py_RETURN_NONE;
}

/* ---- construction ---- */

/* The kernel handle as the backend takes it (fl_backend_info.kernel). A HostKernel brings its own
 * library reference, which the plan then owns. */
static int take_kernel(fl_ext_state *st, PyObject *kernel, const fl_backend_info *info, void **out, fl_host_lib **lib) {
  if (fl_ext_host_kernel_take(kernel, st->host_kernel_type, out, lib)) return 0;
  if (kernel == Py_None) {
    *out = NULL; /* the core refuses it where the backend needs a kernel ("kernel_null") */
    return 0;
  }
  switch (info->kernel) {
    case FL_KERNEL_HOST_FN:
      /* Called on a worker thread: only a loaded HostKernel is trusted there. */
      PyErr_Format(PyExc_TypeError, "kernel: the %s backend needs a HostKernel, got %.80s", info->name,
                   Py_TYPE(kernel)->tp_name);
      return -1;
    default:
      if (!PyLong_Check(kernel) || PyBool_Check(kernel)) {
        PyErr_Format(PyExc_TypeError, "kernel: expected a HostKernel or an int handle, got %.80s",
                     Py_TYPE(kernel)->tp_name);
        return -1;
      }
      /* A backend that runs nothing still takes only what a kernel could be, and ignores it. */
      *out = info->kernel == FL_KERNEL_NONE ? NULL : PyLong_AsVoidPtr(kernel);
      return *out || !PyErr_Occurred() ? 0 : -1;
  }
}

/* Positions of the call's arguments that are not kernel arguments (values Triton folded into the
 * binary): the call still passes them; the plan skips them. Read from a tuple of our own, so an
 * item's __index__ cannot change what is being read. */
static int parse_ignore(PyObject *obj, fl_ext_args *a) {
  PyObject *items = PySequence_Tuple(obj);
  if (!items) return -1;
  Py_ssize_t ni = PyTuple_GET_SIZE(items);
  /* A tensor map's argument gives its map and its shape and strides (fl_ext_extract_tmap): one
   * call position for 1 + 2 x rank runtime values. */
  size_t spans = 0;
  for (size_t k = 0; a->tmap_index && k < a->nruntime; k++)
    if (a->kinds[k] == FL_KIND_TMAP) spans += 2 * (size_t)a->tmap_rank[a->tmap_index[k]];
  a->ncall = a->nruntime - spans + (size_t)ni;
  a->argmap = PyMem_Calloc(a->ncall ? a->ncall : 1, sizeof(int32_t));
  if (!a->argmap) {
    Py_DECREF(items);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t j = 0; j < ni; j++) {
    Py_ssize_t pos = PyNumber_AsSsize_t(PyTuple_GET_ITEM(items, j), PyExc_OverflowError);
    if (pos < 0 || (size_t)pos >= a->ncall || a->argmap[pos] < 0) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "ignore[%zd]: position out of range or repeated (0..%zu)", j, a->ncall - 1);
      Py_DECREF(items);
      return -1;
    }
    a->argmap[pos] = -1;
  }
  Py_DECREF(items);
  int32_t k = 0;
  for (size_t i = 0; i < a->ncall; i++) {
    if (a->argmap[i] != 0) continue;
    a->argmap[i] = k;
    k += a->kinds[k] == FL_KIND_TMAP && a->tmap_index ? 1 + 2 * (int32_t)a->tmap_rank[a->tmap_index[k]] : 1;
  }
  return 0;
}

int fl_ext_args_index(fl_ext_args *a, bool words) {
  uint32_t n = 0, nptr = 0;
  for (size_t i = 0; i < a->ncall; i++)
    if (!a->argmap || a->argmap[i] >= 0) {
      n++;
      nptr += a->kinds[a->argmap ? (size_t)a->argmap[i] : i] == FL_KIND_PTR;
    }
  PyMem_Free(a->ptr_pos);
  a->ptr_pos = a->ptr_k = a->int_pos = a->int_k = NULL;
  a->nptr = a->nint = 0;
  a->words = false;
  if (n == 0) return 0;
  uint32_t *block = PyMem_Malloc(2 * (size_t)n * sizeof *block);
  if (!block) return PyErr_NoMemory(), -1;
  a->ptr_pos = block;
  a->ptr_k = block + nptr;
  a->int_pos = block + 2 * nptr;
  a->int_k = block + n + nptr;
  for (size_t i = 0; i < a->ncall; i++) {
    if (a->argmap && a->argmap[i] < 0) continue;
    uint32_t k = a->argmap ? (uint32_t)a->argmap[i] : (uint32_t)i;
    if (a->kinds[k] == FL_KIND_PTR) {
      a->ptr_pos[a->nptr] = (uint32_t)i;
      a->ptr_k[a->nptr++] = k;
    } else {
      a->int_pos[a->nint] = (uint32_t)i;
      a->int_k[a->nint++] = k;
    }
  }
  a->words = words && !a->data_ptr_only && a->nruntime <= FL_EXT_STACK_VALUES && n == a->nruntime;
  return 0;
}

/* runtime_arg_count=, when given, must be the kinds the fixed args leave. */
static int check_runtime_count(PyObject *runtime_obj, size_t nfixed, size_t nkinds) {
  if (runtime_obj == Py_None) return 0;
  Py_ssize_t r = PyNumber_AsSsize_t(runtime_obj, PyExc_OverflowError);
  if (r == -1 && PyErr_Occurred()) return -1;
  if (r < 0 || (size_t)r + nfixed != nkinds) {
    PyErr_Format(PyExc_ValueError, "runtime_arg_count: %zd runtime + %zu fixed args must equal %zu kinds", r, nfixed,
                 nkinds);
    return -1;
  }
  return 0;
}

/* name=: a str without NUL, or None (the library names the plan). */
static int parse_name(PyObject *name_obj, const char **out) {
  if (name_obj == Py_None) return 0;
  Py_ssize_t size = 0;
  if (!PyUnicode_Check(name_obj) || !(*out = PyUnicode_AsUTF8AndSize(name_obj, &size))) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "name: expected a str, got %.80s", Py_TYPE(name_obj)->tp_name);
    return -1;
  }
  if ((size_t)size != strlen(*out)) {
    PyErr_SetString(PyExc_ValueError, "name: embedded NUL character");
    return -1;
  }
  return 0;
}

/* grid= (one to three ints), grid_exprs= (one to three expressions; missing dimensions are 1) or
 * neither (the caller passes grid= at each launch). The expressions' str live in *keep. */
static int parse_grid_spec(PyObject *grid_obj, PyObject *exprs_obj, fl_plan_desc *d, const char ***exprs,
                           PyObject **keep) {
  fl_error err;
  if (grid_obj != Py_None && exprs_obj != Py_None) {
    PyErr_SetString(PyExc_ValueError, "grid and grid_exprs: give one, not both");
    return -1;
  }
  if (grid_obj != Py_None) {
    if (fl_ext_parse_grid(grid_obj, d->static_grid, &err) < 0) {
      PyErr_Format(PyExc_ValueError, "grid: expected 1 to 3 ints, got %R", grid_obj);
      return -1;
    }
    d->grid_mode = FL_GRID_STATIC;
    return 0;
  }
  if (exprs_obj == Py_None) {
    d->grid_mode = FL_GRID_CALLER;
    return 0;
  }
  if (fl_ext_parse_strings(exprs_obj, "grid_exprs", 0, exprs, keep) < 0) return -1;
  Py_ssize_t nexprs = PyTuple_GET_SIZE(*keep);
  if (nexprs < 1 || nexprs > 3) {
    PyErr_Format(PyExc_ValueError, "grid_exprs: expected 1 to 3 expressions (x, y, z), got %zd", nexprs);
    return -1;
  }
  d->grid_mode = FL_GRID_PROGRAM;
  for (Py_ssize_t i = 0; i < 3; i++) d->grid_exprs[i] = i < nexprs ? (*exprs)[i] : "1";
  return 0;
}

/* The Plan object around a built plan; it takes the plan's reference and `kinds` (freed on failure). */
static fl_PlanObject *wrap_plan(PyTypeObject *type, fl_ext_state *st, fl_plan *plan, PyObject *owner,
                                PyObject *names, fl_kind *kinds, const fl_backend_info *info) {
  fl_PlanObject *self = (fl_PlanObject *)type->tp_alloc(type, 0);
  if (!self) {
    fl_plan_release(plan);
    PyMem_Free(kinds);
    return NULL;
  }
  self->vectorcall = plan_vectorcall;
  self->plan = plan;
  self->state = st;
  self->owner = Py_NewRef(owner);
  self->name = PyUnicode_FromString(fl_plan_name(plan));
  self->arg_names = Py_XNewRef(names);
  self->args.nruntime = self->args.ncall = fl_plan_runtime_arg_count(plan);
  self->args.kinds = kinds;
  self->args.memory = info->memory; /* where a tensor must live, as the backend's table says */
  self->args.device = fl_plan_device(plan);
  if (!self->name) Py_CLEAR(self);
  return self;
}

static int parse_tmaps(PyObject *obj, fl_tensor_map_meta *metas, fl_plan_desc *d) {
  if (fl_ext_parse_tensor_maps(obj, metas, &d->ntensor_maps) < 0) return -1;
  d->tensor_maps = metas;
  return 0;
}

/* The call's positions onto the plan's runtime values: the ignored ones skipped, a tensor map's one
 * position giving its map, shape and strides. 0, or -1 with an exception. */
static int map_positions(fl_PlanObject *self, PyObject *ignore_obj, const fl_tensor_map_meta *metas, size_t nmaps) {
  if (nmaps && fl_ext_args_tmaps(&self->args, metas, nmaps) < 0) return -1;
  if (ignore_obj == Py_None && !nmaps) return 0;
  PyObject *ignore = ignore_obj != Py_None ? Py_NewRef(ignore_obj) : PyTuple_New(0);
  int rc = ignore ? parse_ignore(ignore, &self->args) : -1;
  Py_XDECREF(ignore);
  return rc;
}

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"kernel", "kinds", "backend", "abi", "options", "owner", "runtime_arg_count", "fixed_args",
                           "grid", "grid_exprs", "arg_names", "name", "ignore", "tensor_maps", "tensor_map_geometry",
                           NULL};
  PyObject *kernel, *kinds_obj, *backend_obj = NULL, *abi_obj = Py_None, *options = Py_None, *owner = Py_None;
  PyObject *runtime_obj = Py_None, *fixed_obj = Py_None, *grid_obj = Py_None, *exprs_obj = Py_None;
  PyObject *names_obj = Py_None, *name_obj = Py_None, *ignore_obj = Py_None, *tmaps_obj = Py_None;
  PyObject *geometry_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|$UOOOOOOOOOOOO:Plan", kwlist, &kernel, &kinds_obj, &backend_obj,
                                   &abi_obj, &options, &owner, &runtime_obj, &fixed_obj, &grid_obj, &exprs_obj,
                                   &names_obj, &name_obj, &ignore_obj, &tmaps_obj, &geometry_obj))
    return NULL;
  fl_ext_state *st = fl_ext_state_from_type(type);
  if (!st) return NULL;
  fl_plan_desc d;
  memset(&d, 0, sizeof d);
  fl_kind *kinds = NULL;
  fl_value *fixed = NULL;
  fl_tensor_map_meta metas[FL_EXT_MAX_TMAPS];
  const char **names = NULL, **exprs = NULL;
  PyObject *names_keep = NULL, *exprs_keep = NULL;
  fl_host_lib *lib = NULL;
  fl_PlanObject *self = NULL;
  size_t nkinds = 0, nfixed = 0;
  fl_backend_info info;
  fl_error err;

  if (fl_ext_parse_backend(backend_obj, &d.backend) < 0) goto error;
  if (fl_backend_info_get(d.backend, &info, &err) != FL_OK) {
    fl_ext_raise_unavailable(st, &err);
    goto error;
  }
  if (fl_ext_parse_target(abi_obj, options, info.default_abi, &d.target) < 0) goto error;
  if (fl_ext_parse_kinds(st, kinds_obj, true, &kinds, &nkinds) < 0) goto error;
  if (fixed_obj != Py_None && fl_ext_parse_values(fixed_obj, &fixed, &nfixed) < 0) goto error;
  if (nfixed > nkinds) {
    PyErr_Format(PyExc_ValueError, "fixed_args: %zu values for %zu kinds", nfixed, nkinds);
    goto error;
  }
  if (check_runtime_count(runtime_obj, nfixed, nkinds) < 0 || parse_name(name_obj, &d.name) < 0) goto error;
  d.kinds = kinds;
  d.nkinds = nkinds;
  d.runtime_arg_count = nkinds - nfixed;
  d.fixed_args = fixed;
  if (take_kernel(st, kernel, &info, &d.kernel, &lib) < 0) goto error;
  if (lib) {
    d.owner = lib;
    d.owner_release = fl_host_lib_release_owner;
  }
  if (parse_grid_spec(grid_obj, exprs_obj, &d, &exprs, &exprs_keep) < 0) goto error;
  if (tmaps_obj != Py_None && parse_tmaps(tmaps_obj, metas, &d) < 0) goto error;
  if (names_obj != Py_None) {
    if (fl_ext_parse_strings(names_obj, "arg_names", nkinds, &names, &names_keep) < 0) goto error;
    d.arg_names = names;
  }
  /* An npu plan launches through torch_npu's task queue once torch_npu is in the process. */
  if (d.target.abi == FL_ABI_NPU) fl_ext_npu_queue_probe(st);
  fl_plan *plan;
  if (fl_plan_create(&d, &plan, &err) != FL_OK) {
    fl_ext_raise_unavailable(st, &err);
    goto error;
  }
  lib = NULL; /* the plan owns that reference now */
  self = wrap_plan(type, st, plan, owner, names_keep, kinds, &info);
  kinds = NULL; /* the object keeps the parsed array (or freed it) */
  if (self && map_positions(self, ignore_obj, metas, d.ntensor_maps) < 0) Py_CLEAR(self);
  if (self && geometry_obj != Py_None && fl_ext_args_tmap_geometry(&self->args, geometry_obj, metas, d.ntensor_maps) < 0)
    Py_CLEAR(self);
  if (self && fl_ext_args_index(&self->args, fl_plan_takes_words(plan)) < 0) Py_CLEAR(self);
error:
  if (lib) fl_host_lib_release(lib);
  PyMem_Free(kinds);
  PyMem_Free(fixed);
  PyMem_Free(names);
  PyMem_Free(exprs);
  Py_XDECREF(names_keep);
  Py_XDECREF(exprs_keep);
  return (PyObject *)self;
}

static void plan_dealloc(PyObject *op) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(self->owner);
  Py_CLEAR(self->name);
  Py_CLEAR(self->arg_names);
  PyMem_Free((void *)self->args.kinds);
  PyMem_Free(self->args.argmap);
  PyMem_Free(self->args.ptr_pos);
  PyMem_Free(self->args.tmap_index);
  PyMem_Free(self->args.tmap_fixed);
  if (self->plan) fl_plan_release(self->plan);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static int plan_traverse(PyObject *op, visitproc visit, void *arg) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(self->owner);
  return 0;
}

static int plan_clear(PyObject *op) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  Py_CLEAR(self->owner);
  return 0;
}

static PyObject *plan_get_layout(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  size_t n = fl_plan_nargs(self->plan);
  size_t *offsets = PyMem_Calloc(n ? n : 1, sizeof *offsets);
  if (!offsets) return PyErr_NoMemory();
  for (size_t i = 0; i < n; i++) offsets[i] = fl_plan_arg_offset(self->plan, i);
  PyObject *d = fl_ext_layout_dict(fl_plan_layout(self->plan), offsets, n);
  PyMem_Free(offsets);
  return d;
}

static PyObject *plan_get_kinds(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  size_t n = fl_plan_nargs(self->plan);
  PyObject *list = PyList_New((Py_ssize_t)n);
  if (!list) return NULL;
  for (size_t i = 0; i < n; i++) {
    PyObject *o = PyUnicode_FromString(fl_kind_name(fl_plan_arg_kind(self->plan, i)));
    if (!o) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, o);
  }
  return list;
}

static PyObject *plan_get_grid_mode(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  static const char *const modes[] = {"caller", "static", "program"};
  return PyUnicode_FromString(modes[fl_plan_grid_mode(self->plan)]);
}

static PyObject *plan_get_backend(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  return PyUnicode_FromString(fl_backend_name(fl_plan_backend(self->plan)));
}

static PyObject *plan_get_abi(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  return PyUnicode_FromString(fl_abi_name(fl_plan_abi(self->plan)));
}

static PyObject *plan_get_runtime(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  return PyLong_FromSize_t(self->args.nruntime);
}

static PyObject *plan_get_call_args(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  return PyLong_FromSize_t(self->args.ncall);
}

static PyObject *plan_get_ignored(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && self->args.argmap && i < self->args.ncall; i++) {
    if (self->args.argmap[i] >= 0) continue;
    PyObject *pos = PyLong_FromSize_t(i);
    if (!pos || PyList_Append(list, pos) < 0) {
      Py_XDECREF(pos);
      Py_CLEAR(list);
      break;
    }
    Py_DECREF(pos);
  }
  if (!list) return NULL;
  PyObject *tuple = PyList_AsTuple(list);
  Py_DECREF(list);
  return tuple;
}

static PyObject *plan_get_template(PyObject *op, void *closure) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  (void)closure;
  size_t size = fl_plan_layout(self->plan)->size;
  PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
  if (!bytes) return NULL;
  fl_error err;
  fl_plan_template(self->plan, PyBytes_AS_STRING(bytes), size, &err);
  return bytes;
}

static PyObject *plan_resolve_grid(PyObject *op, PyObject *argtuple) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  PyObject *const *args = &PyTuple_GET_ITEM(argtuple, 0);
  Py_ssize_t nargs = PyTuple_GET_SIZE(argtuple);
  /* resolve_grid(*args): the grid a launch with these arguments would use. Every path takes what a
   * launch takes (call_args.h's fl_ext_values: the stack, or the heap past it). */
  fl_ext_values home;
  fl_value *values = fl_ext_values_get(&home, self->args.nruntime);
  if (!values) return NULL;
  fl_error err;
  PyObject *result = NULL;
  uint32_t g[3];
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  int r = fl_ext_collect(self->state, &self->args, args, (size_t)nargs, values, tmaps, &err);
  if (r == 0 && fl_plan_resolve_grid(self->plan, values, self->args.nruntime, NULL, g, &err) != FL_OK) r = -1;
  if (r == 0) result = Py_BuildValue("(III)", g[0], g[1], g[2]);
  else if (r == -1) fl_ext_raise_named(self->state, &err, self->arg_names);
  fl_ext_values_put(&home);
  return result;
}

static PyObject *plan_repr(PyObject *op) {
  fl_PlanObject *self = (fl_PlanObject *)op;
  return PyUnicode_FromFormat("<fastlaunch Plan %U backend=%s abi=%s args=%zu runtime=%zu grid=%s>", self->name,
                              fl_backend_name(fl_plan_backend(self->plan)), fl_abi_name(fl_plan_abi(self->plan)), fl_plan_nargs(self->plan), self->args.nruntime,
                              (const char *[]){"caller", "static", "program"}[fl_plan_grid_mode(self->plan)]);
}

static PyMemberDef plan_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(fl_PlanObject, vectorcall), Py_READONLY, NULL},
    {"owner", Py_T_OBJECT_EX, offsetof(fl_PlanObject, owner), Py_READONLY, "what owns the kernel handle, kept alive"},
    {"name", Py_T_OBJECT_EX, offsetof(fl_PlanObject, name), Py_READONLY, "the kernel's name"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef plan_getset[] = {
    {"layout", plan_get_layout, NULL, "the packed buffer's layout (size, args, grid, ffts, hidden)", NULL},
    {"kinds", plan_get_kinds, NULL, "argument kinds", NULL},
    {"grid_mode", plan_get_grid_mode, NULL, "'static', 'program' or 'caller'", NULL},
    {"backend", plan_get_backend, NULL, "the backend's name", NULL},
    {"abi", plan_get_abi, NULL, "the ABI of its packed buffer", NULL},
    {"runtime_arg_count", plan_get_runtime, NULL, "runtime kernel arguments per launch", NULL},
    {"call_arg_count", plan_get_call_args, NULL, "positional arguments per call (ignored ones included)", NULL},
    {"ignored", plan_get_ignored, NULL, "positions of the call's arguments the plan skips", NULL},
    {"template", plan_get_template, NULL, "the template buffer as bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef plan_methods[] = {
    {"resolve_grid", plan_resolve_grid, METH_VARARGS,
     "resolve_grid(*args) -> (x, y, z): the grid a launch with these runtime args would use"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot plan_slots[] = {
    {Py_tp_new, plan_new},
    {Py_tp_dealloc, plan_dealloc},
    {Py_tp_traverse, plan_traverse},
    {Py_tp_clear, plan_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_repr, plan_repr},
    {Py_tp_members, plan_members},
    {Py_tp_getset, plan_getset},
    {Py_tp_methods, plan_methods},
    {Py_tp_doc, "Plan(kernel, kinds, *, backend='host', abi=None, options=None, owner=None, runtime_arg_count=None, "
                "fixed_args=(), grid=None, grid_exprs=None, arg_names=None, name=None, ignore=None, tensor_maps=None, "
                "tensor_map_geometry=None)\n--\n\nA launch plan, built once.\n\ntensor_maps: each tensor map's "
                "(swizzle, elem_size, elem_type, block_shape, fp4_padded); tensor_map_geometry: per map None (the call "
                "passes a TensorDescriptor) or (shape, strides) (the call passes the tensor).\n\nabi is the ABI (default: the backend's own); options are that ABI's "
                "options by name (cuda: hidden_ptrs, num_warps, num_ctas, shared_mem, cooperative, pdl; npu: ffts, "
                "simt_only, dtdata, scratch, ffts_addr, simt, dyn_ubuf, clamp_blocks).\n\n"
                "plan(*args, stream=0, grid=None) launches it."},
    {0, NULL},
};

static PyType_Spec plan_spec = {
    .name = "fastlaunch._C.Plan",
    .basicsize = sizeof(fl_PlanObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = plan_slots,
};

int fl_ext_add_plan_type(PyObject *module, fl_ext_state *st) {
  st->plan_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &plan_spec, NULL);
  if (!st->plan_type) return -1;
  return PyModule_AddType(module, st->plan_type);
}
