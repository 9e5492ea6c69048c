/* jit_key.c: the key of a JIT call (jit.h says what it holds), computed two ways from the same
 * per-value words (const_words, value_words, jit.h): the full path's (fl_jit_make_key: every
 * parameter bound, every kind of value, the key then looked up in the table) and the memo's
 * (jit_memo, jit.h). A call with the memo's form finds each parameter's value at the place the
 * last fast call had it, and its key is computed word by word and compared with the memo entry's
 * key, whole: the memo takes exactly the entry the table would find. Anything else (another form,
 * another key, a tuple, a tensor the door does not take, a tensor from memory the plan does not
 * read) goes the full way; nothing in the memo's path runs Python code. */
#include "jit.h"

/* ---- the full path ---- */


static int key_const(jit_key *k, PyObject *v) {
  uint64_t w[2];
  int n = const_words(v, w);
  for (int i = 0; i < n; i++)
    if (key_push(k, w[i]) < 0) return -1;
  return 0;
}

static inline int value_push(jit_values *vals, fl_value v, int where, int index) {
  if (FL_EXT_UNLIKELY(vals->n >= JIT_MAX_PARAMS)) return -1;
  vals->v[vals->n] = v;
  vals->where[vals->n] = (int8_t)where;
  vals->index[vals->n++] = (int16_t)index;
  return 0;
}

/* A runtime value: its key words and its launch value. 0, -1 (the key is full), or 1 (not a kind
 * the key knows: Triton decides). */
static int key_value(fl_ext_state *st, jit_key *k, jit_values *vals, PyObject *v, int depth) {
  if (PyTuple_Check(v)) {
    Py_ssize_t n = PyTuple_GET_SIZE(v);
    if (depth > 0) return 1; /* nested tuples: Triton's */
    if (key_push(k, K_TUPLE | (uint64_t)n << 8) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
      int r = key_value(st, k, vals, PyTuple_GET_ITEM(v, i), depth + 1);
      if (r) return r;
    }
    return 0;
  }
  uint64_t w[1];
  fl_value x;
  int where, index;
  if (!value_words(st, v, w, &x, &where, &index)) return 1;
  return key_push(k, w[0]) | value_push(vals, x, where, index);
}

/* The slow path for tensors the door does not take (no door built, a subclass): dtype and
 * data_ptr() as Triton reads them. 0, 1 (not a tensor), -1 with an exception. */
static int key_tensor_slow(jit_key *k, jit_values *vals, PyObject *v) {
  PyObject *dtype = PyObject_GetAttrString(v, "dtype");
  if (!dtype) {
    PyErr_Clear();
    return 1;
  }
  PyObject *ptr = PyObject_CallMethod(v, "data_ptr", NULL);
  uint64_t p = 0;
  int ok = ptr && PyLong_Check(ptr);
  if (ok) p = PyLong_AsUnsignedLongLongMask(ptr);
  Py_XDECREF(ptr);
  if (!ok) {
    Py_DECREF(dtype);
    PyErr_Clear();
    return 1;
  }
  uint64_t addr = (uint64_t)(uintptr_t)dtype;
  Py_DECREF(dtype); /* torch's dtypes are module-level objects; the policy keeps them with the entry */
  fl_value x;
  x.type = FL_VALUE_PTR;
  x.v.p = p;
  /* Where it lives is not known here: as for a plan's data_ptr() path, no memory check. */
  if (key_push(k, K_TENSOR_OBJ | (uint64_t)((p & 15) == 0) << 7) < 0 || key_push(k, addr) < 0 ||
      value_push(vals, x, 0, -1) < 0)
    return -1;
  return 0;
}


/* 0 with the key and the launch values made; 1 with b->why; -1 with an exception. */
int fl_jit_make_key(JitObject *self, jit_bound *b, int32_t device, jit_key *k, jit_values *vals) {
  k->n = 0;
  vals->n = 0;
  key_push(k, K_DEVICE | (uint64_t)(uint32_t)device << 8);
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  for (Py_ssize_t i = 0; i < np; i++) {
    if (self->param_const[i]) {
      vals->start[i] = -1;
      if (key_const(k, b->vals[i]) < 0) return b->why = "key_too_long", 1;
      continue;
    }
    vals->start[i] = (int32_t)vals->n;
    int r = key_value(self->state, k, vals, b->vals[i], 0);
    if (r == 1) {
      /* Not a value the door or the exact types take: a tensor another way, or Triton's. */
      if (PyTuple_Check(b->vals[i])) return b->why = "arg_type", 1;
      r = key_tensor_slow(k, vals, b->vals[i]);
      if (r == 1) return b->why = "arg_type", 1;
      if (r < 0) return PyErr_Occurred() ? -1 : (b->why = "key_too_long", 1);
    }
    if (r < 0) return b->why = "key_too_long", 1;
  }
  for (Py_ssize_t o = 0; o < b->nopts; o++)
    if (key_push(k, K_OPTION | (uint64_t)b->opt_index[o] << 8) < 0 || key_const(k, b->opt_vals[o]) < 0)
      return b->why = "key_too_long", 1;
  return 0;
}


/* ---- the memo ---- */

void fl_jit_memo_clear(JitObject *self) {
  self->memo.entry = NULL;
  Py_CLEAR(self->memo.kwnames);
}

/* An entry's runtime argument per parameter, when each runtime argument is one whole runtime
 * parameter (no tuple member, no parameter twice): otherwise e->param_abi stays NULL and the
 * memo never holds the entry. 0, or -1 with MemoryError. */
int fl_jit_memo_entry(jit_entry *e, Py_ssize_t nparams, const uint8_t *param_const) {
  int32_t *at = PyMem_Malloc((size_t)(nparams ? nparams : 1) * sizeof *at);
  if (!at) return PyErr_NoMemory(), -1;
  for (Py_ssize_t i = 0; i < nparams; i++) at[i] = -1;
  for (size_t i = 0; i < e->nabi; i++) {
    int32_t p = e->abi_param[i];
    if (e->abi_member[i] >= 0 || param_const[p] || at[p] >= 0) {
      PyMem_Free(at);
      return 0;
    }
    at[p] = (int32_t)i;
  }
  e->param_abi = at;
  return 0;
}

/* The same keyword names: the same tuple (a call site's), or one with the same str objects in
 * the same order (a call with **kwargs builds a new tuple each time from the dict's keys). The
 * memo's tuple is alive, so a str at one of its items' addresses is that str. */
static inline int same_names(PyObject *a, PyObject *b) {
  if (a == b) return 1;
  if (!a || !b || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) return 0;
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(a); i < n; i++)
    if (PyTuple_GET_ITEM(a, i) != PyTuple_GET_ITEM(b, i)) return 0;
  return 1;
}

/* After a fast call through the full path: its form and entry become the memo. `b` was bound
 * from args (positional, then the keywords' values at args + nargs). */
void fl_jit_memo_set(JitObject *self, jit_entry *e, const jit_bound *b, size_t nargs, PyObject *kwnames) {
  jit_memo *m = &self->memo;
  if (m->entry == e && m->nargs == nargs && same_names(kwnames, m->kwnames)) return;
  if (!e->param_abi) return;
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  m->ntensor = 0;
  for (Py_ssize_t i = 0; i < np; i++) {
    PyObject *v = b->vals[i];
    m->param[i].src = b->src[i];
    m->param[i].abi = (int16_t)e->param_abi[i];
    m->param[i].kind = self->param_const[i]                       ? MEMO_CONST
                       : PyLong_CheckExact(v)                     ? MEMO_INT
                       : v == Py_None || PyBool_Check(v) || PyFloat_CheckExact(v) ? MEMO_OTHER
                                                                  : MEMO_TENSOR;
    if (m->param[i].kind == MEMO_TENSOR && b->src[i] >= 0) m->tensor_src[m->ntensor++] = (uint32_t)b->src[i];
  }
  for (Py_ssize_t o = 0; o < b->nopts; o++) {
    m->opt_src[o] = b->opt_src[o];
    m->opt_index[o] = (int16_t)b->opt_index[o];
  }
  m->nopts = b->nopts;
  Py_XSETREF(m->kwnames, Py_XNewRef(kwnames)); /* a tuple of str: freeing one runs no code */
  m->nargs = nargs;
  m->entry = e;
}

static inline int same_words(const uint64_t **key, const uint64_t *end, const uint64_t *w, int n) {
  const uint64_t *k = *key;
  if (end - k < n || k[0] != w[0] || (n == 2 && k[1] != w[1])) return 0;
  *key = k + n;
  return 1;
}

/* 0: the call is the memo entry's (its values in the entry's argument order in `values`, or in
 * `words` when not NULL (the entry's plan takes words), each parameter's object in pv, borrowed);
 * 1: the full path decides. */
int fl_jit_memo_match(JitObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames, int32_t device,
                      PyObject **pv, fl_value *values, uint64_t *words) {
  jit_memo *m = &self->memo;
  const jit_entry *e = m->entry;
  if (!e || nargs != m->nargs || !same_names(kwnames, m->kwnames)) return 1;
  if (FL_EXT_UNLIKELY(kwnames != m->kwnames)) /* the newer tuple: a call site's is then the same next time */
    Py_SETREF(m->kwnames, Py_NewRef(kwnames));
  const uint64_t *key = e->key, *end = key + e->nkey;
  uint64_t w[2] = {K_DEVICE | (uint64_t)(uint32_t)device << 8, 0};
  if (!same_words(&key, end, w, 1)) return 1;
  const fl_ext_args *spec = &e->plan->args;
  fl_ext_state *st = self->state;
  /* The tensors the last call had, at once (those the door does not take, one at a time below). */
  uint64_t tp[JIT_MAX_PARAMS];
  int tdt[JIT_MAX_PARAMS];
  uint32_t tgot = 0, tj = 0;
  if (m->ntensor && st->door) /* (a door not loaded yet: tensor_words loads it below) */
    tgot = (uint32_t)st->door->unpack_ptrs(args, m->tensor_src, m->ntensor, (int)spec->memory, spec->device, tp, NULL, tdt);
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  for (Py_ssize_t i = 0; i < np; i++) {
    const jit_memo_param *mp = &m->param[i];
    PyObject *v = mp->src >= 0 ? args[mp->src] : PyTuple_GET_ITEM(PyTuple_GET_ITEM(self->defaults, i), 0);
    pv[i] = v;
    /* The reading the last call's value took is tried first: a value of another kind gives no
     * word there, and value_words (what the full path reads) decides. */
    fl_value x;
    int where = 0, index = -1, ok;
    switch (mp->kind) {
      case MEMO_CONST:
        if (!same_words(&key, end, w, const_words(v, w))) return 1;
        continue;
      case MEMO_TENSOR:
        if (mp->src >= 0 && tj < tgot) { /* read above, where the plan reads memory */
          x = (fl_value){.type = FL_VALUE_PTR, .v.p = tp[tj]};
          w[0] = tensor_word(tp[tj], tdt[tj]);
          tj++;
          ok = 1;
          break;
        }
        tj += mp->src >= 0;
        ok = tensor_words(st, v, w, &x, &where, &index);
        break;
      case MEMO_INT: ok = PyLong_CheckExact(v) && int_words(v, w, &x); break;
      default: ok = 0;
    }
    if (!ok && !value_words(st, v, w, &x, &where, &index)) return 1;
    if (key == end || *key++ != w[0]) return 1;
    if (mp->abi < 0) continue;
    if (where && !fl_ext_memory_takes(spec, where, index)) return 1; /* the full path says why */
    if (!words) {
      values[mp->abi] = x;
    } else if (x.type == FL_VALUE_PTR || x.type == FL_VALUE_INT) {
      words[mp->abi] = x.v.u; /* the address, or the int's two's complement */
    } else {
      return 1; /* a value no word says (an int past int64): the full path, with fl_launch */
    }
  }
  for (Py_ssize_t o = 0; o < m->nopts; o++) {
    w[0] = K_OPTION | (uint64_t)m->opt_index[o] << 8;
    if (!same_words(&key, end, w, 1) || !same_words(&key, end, w, const_words(args[m->opt_src[o]], w))) return 1;
  }
  return key == end ? 0 : 1;
}
