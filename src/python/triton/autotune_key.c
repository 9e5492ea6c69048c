/* autotune_key.c: what Triton's Autotuner.run computes and leaves around a launch, in C: the key of
 * a call, from what Autotuner.run builds its cache key of (the values of the parameters named in
 * `key`, then the dtype of every named argument that has one), the dispatcher's table of bound keys,
 * and a config's pre_hook called as the run calls it. Below autotune.c. */
#include "autotune_base.h"

static int push(at_key *k, uint64_t w) {
  if (FL_EXT_UNLIKELY(k->n >= AT_MAX_KEY)) return -1;
  k->words[k->n++] = w;
  return 0;
}

uint64_t fl_at_key_hash(const at_key *k) {
  uint64_t h = k->n;
  for (size_t i = 0; i < k->n; i++) h = (((h << 7) | (h >> 57)) ^ k->words[i]) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

/* A key value (a parameter named in `key`): 0, or 1 when its kind is not one the key reads. */
static int key_value(at_key *k, PyObject *v) {
  if (v == Py_None) return push(k, A_NONE) ? 1 : 0;
  if (PyBool_Check(v)) return push(k, A_BOOL | (uint64_t)(v == Py_True) << 8) ? 1 : 0;
  if (PyLong_CheckExact(v)) {
    uint64_t mag;
    int neg;
    if (!fl_ext_int_digits(v, &mag, &neg)) return 1;
    return push(k, neg ? A_NEG : A_INT) || push(k, mag) ? 1 : 0;
  }
  if (PyFloat_CheckExact(v)) {
    double d = PyFloat_AS_DOUBLE(v);
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return push(k, A_FLOAT) || push(k, bits) ? 1 : 0;
  }
  if (PyUnicode_CheckExact(v)) return push(k, A_STR) || push(k, (uint64_t)(uintptr_t)v) ? 1 : 0;
  return 1;
}

/* A named argument: its dtype enters the key when it has one. 0, or 1 when its kind is unknown
 * (it might have a dtype the key cannot read). */
static int key_dtype(fl_ext_state *st, at_key *k, PyObject *v, uint64_t pos) {
  if (v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v))
    return 0;
  if (FL_EXT_UNLIKELY(FL_EXT_LOAD(st->door_state) == 0)) fl_ext_door_load(st);
  uint64_t p;
  int where, index, dtype;
  if (FL_EXT_DOOR(st) && FL_EXT_DOOR(st)->unpack_typed(v, &p, &where, &index, &dtype))
    return push(k, A_DTYPE | pos << 8 | (uint64_t)(uint32_t)dtype << 32) ? 1 : 0;
  /* No door (or not a tensor it reads): the dtype object by identity, which the policy keeps alive
   * with the entry (torch's dtypes are singletons: one object per str(dtype)). */
  PyObject *dt = PyObject_GetAttr(v, st->str_dtype);
  if (!dt) {
    PyErr_Clear(); /* no dtype attribute, or one that raises: Triton's path says what happens */
    return 1;
  }
  /* A dtype made afresh by the read (nothing else holds it) is not keyed by its address: a later
   * object could take it. One held elsewhere (torch's, a tensor's attribute) is held by the key
   * until the call is done with it. */
  if (Py_REFCNT(dt) == 1 || k->nheld >= AT_MAX_HELD) {
    Py_DECREF(dt);
    return 1;
  }
  k->held[k->nheld++] = dt;
  return push(k, A_DTYPE_OBJ | pos << 8) || push(k, (uint64_t)(uintptr_t)dt) ? 1 : 0;
}

/* Each keyword's index into arg_names, remembered for the last kwnames seen (by their names). */
static const Py_ssize_t *keyword_params(AutotuneObject *self, PyObject *kwnames, Py_ssize_t nkw) {
  if (self->kw_seen && fl_ext_same_names(self->kw_seen, kwnames)) return self->kw_param;
  for (Py_ssize_t kk = 0; kk < nkw; kk++) self->kw_param[kk] = fl_ext_name_index(self->t.arg_names, PyTuple_GET_ITEM(kwnames, kk));
  Py_XSETREF(self->kw_seen, Py_NewRef(kwnames));
  return self->kw_param;
}

int fl_at_make_key(AutotuneObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames, at_key *k,
                   const char **why) {
  Py_ssize_t nnames = PyTuple_GET_SIZE(self->t.arg_names);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  k->n = 0;
  k->nheld = 0;
  if ((Py_ssize_t)nargs > nnames) return *why = "positional_args", 1;
  if (nkw > AT_MAX_KW) return *why = "keywords", 1;
  /* Copied: a dtype's getattr below runs Python code, whose nested call may read other names. */
  Py_ssize_t kp[AT_MAX_KW];
  if (nkw) memcpy(kp, keyword_params(self, kwnames, nkw), (size_t)nkw * sizeof *kp);
  if (PyList_GET_SIZE(self->configs) > 1) { /* one config: no key */
    for (Py_ssize_t j = 0; j < self->nkeys; j++) {
      Py_ssize_t p = self->key_params[j];
      PyObject *v = NULL;
      if (p < (Py_ssize_t)nargs) v = args[p];
      for (Py_ssize_t kk = 0; kk < nkw && !v; kk++)
        if (kp[kk] == p) v = args[nargs + (size_t)kk];
      if (!v) {
        if (push(k, A_ABSENT)) return *why = "key_too_long", 1;
      } else if (key_value(k, v)) {
        return *why = "key_value_kind", 1;
      }
    }
    for (size_t i = 0; i < nargs; i++)
      if (key_dtype(self->t.state, k, args[i], i)) return *why = "arg_kind", 1;
    for (Py_ssize_t kk = 0; kk < nkw; kk++)
      if (kp[kk] >= 0 && key_dtype(self->t.state, k, args[nargs + (size_t)kk], 0x10000 | (uint64_t)kk))
        return *why = "arg_kind", 1;
  }
  return 0;
}

at_entry *fl_at_table_find(AutotuneObject *self, const at_key *k, uint64_t h) {
  for (size_t i = 0; i < self->count; i++) {
    at_entry *e = &self->entries[i];
    if (e->hash == h && e->nkey == k->n && memcmp(e->key, k->words, k->n * sizeof(uint64_t)) == 0) return e;
  }
  return NULL;
}

void fl_at_key_release(at_key *k) {
  while (k->nheld) Py_DECREF(k->held[--k->nheld]);
}

/* A config's pre_hook, called as Autotuner.run calls it once the config is known: `nargs` set to the
 * named positional arguments, then pre_hook({**nargs, **kwargs, **config.all_kwargs()}), the kwargs
 * with grid= and warmup=False first in the kernel[grid] form (as JITFunction's __getitem__ passes
 * them). 0, or -1 with the hook's exception (nargs left set, as Triton's run leaves it). */
FL_EXT_COLD int fl_at_config_pre_hook(AutotuneObject *self, PyObject *hook, PyObject *grid, PyObject *const *args,
                                   size_t nargs, PyObject *kwnames, PyObject *cnames, PyObject *cvalues) {
  PyObject *named = PyDict_New(), *full = NULL;
  int rc = -1;
  if (!named) return -1;
  for (size_t i = 0; i < nargs && (Py_ssize_t)i < PyTuple_GET_SIZE(self->t.arg_names); i++)
    if (PyDict_SetItem(named, PyTuple_GET_ITEM(self->t.arg_names, (Py_ssize_t)i), args[i]) < 0) goto done;
  self->nargs_dirty = 1;
  if (PyObject_SetAttrString(self->t.tuner, "nargs", named) < 0 || !(full = PyDict_Copy(named))) goto done;
  if (grid && (PyDict_SetItem(full, self->t.state->str_grid, grid) < 0 ||
               PyDict_SetItem(full, self->t.state->str_warmup, Py_False) < 0))
    goto done;
  for (Py_ssize_t k = 0, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0; k < nkw; k++)
    if (PyDict_SetItem(full, PyTuple_GET_ITEM(kwnames, k), args[nargs + (size_t)k]) < 0) goto done;
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(cnames); k++)
    if (PyDict_SetItem(full, PyTuple_GET_ITEM(cnames, k), PyTuple_GET_ITEM(cvalues, k)) < 0) goto done;
  PyObject *r = PyObject_CallOneArg(hook, full);
  if (!r) goto done;
  Py_DECREF(r);
  rc = 0;
done:
  Py_DECREF(named);
  Py_XDECREF(full);
  return rc;
}
