/* jit_key.c: the key of a JIT call (jit_base.h says what it holds), computed two ways from the same
 * per-value words (const_words, value_words, jit_base.h): the full path's (fl_jit_make_key: every
 * parameter bound, every kind of value, the key then looked up in the table) and the memo's
 * (jit_memo, jit_base.h). A call with the memo's form finds each parameter's value at the place the
 * last fast call had it, and its key is computed word by word and compared with the memo entry's
 * key, whole: the memo takes exactly the entry the table would find. Anything else (another form,
 * another key, a tuple, a tensor the door does not take, a tensor from memory the plan does not
 * read) goes the full way; nothing in the memo's path runs Python code. */
#include "jit_base.h"

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

/* A host-side tensor descriptor: keyed as Triton specializes it (tensordesc<dtype[block]>: its
 * base's dtype, by the address of the dtype object, held for the call, and the block shape), its
 * values (JIT_DESC_VALUES) the map's (read as Triton's make_tensordesc_arg reads it), its shape and
 * strides, then what the decomposed form adds (its base's address, where that lives, the padding
 * and TF32 flags): an entry's positions take the members its plan's form passes. 0, -1 (the key is
 * full), 1 (Triton decides: another form, an exception its own code raised). */
static int key_descriptor(fl_ext_state *st, jit_key *k, jit_values *vals, PyObject *v) {
  if (vals->ntmaps >= FL_EXT_MAX_TMAPS || vals->nheld >= JIT_MAX_PARAMS) return 1;
  /* A class whose attribute reads could run code (a property, a __getattr__ of its own) is Triton's:
   * its launcher reads each attribute once, after the grid, where this pass reads some before. */
  unsigned version = Py_TYPE(v)->tp_version_tag;
  if (!version || version != FL_EXT_LOAD(st->tensor_desc_plain)) {
    unsigned plain = fl_ext_tmap_plain_class(st, Py_TYPE(v));
    FL_EXT_STORE(st->tensor_desc_plain, plain);
    if (!plain || plain != Py_TYPE(v)->tp_version_tag) return 1;
  }
  PyObject *block = PyObject_GetAttr(v, st->str_block_shape), *base = NULL, *dtype = NULL;
  PyObject *items = block ? PySequence_Fast(block, "") : NULL;
  Py_ssize_t rank = items ? PySequence_Fast_GET_SIZE(items) : -1;
  int rc = 1;
  if (rank < 1 || rank > FL_TENSOR_MAP_MAX_RANK || !(base = PyObject_GetAttr(v, st->str_base)) ||
      !(dtype = PyObject_GetAttr(base, st->str_dtype)) || Py_REFCNT(dtype) == 1 ||
      vals->n + JIT_DESC_VALUES(rank) > JIT_MAX_PARAMS)
    goto done;
  rc = key_push(k, K_DESC | (uint64_t)rank << 8) < 0 || key_push(k, (uint64_t)(uintptr_t)dtype) < 0 ? -1 : 0;
  for (Py_ssize_t d = 0; rc == 0 && d < rank; d++) {
    PyObject *b = PySequence_Fast_ITEMS(items)[d];
    long long x = PyLong_CheckExact(b) ? PyLong_AsLongLong(b) : -1;
    rc = x < 0 ? 1 : key_push(k, (uint64_t)x) < 0 ? -1 : 0;
  }
  if (rc) goto done;
  fl_error err;
  fl_tensor_map_value *t = &vals->tmaps[vals->ntmaps];
  if (fl_ext_extract_tmap(st, v, vals->n, &vals->v[vals->n], t, &vals->v[vals->n + 1 + 2 * (size_t)rank], &err) != 0 ||
      t->rank != (uint32_t)rank) {
    rc = 1;
    goto done;
  }
  for (size_t i = 0; i < JIT_DESC_VALUES(rank); i++) {
    vals->where[vals->n + i] = 0;
    vals->index[vals->n + i] = -1;
  }
  /* A TensorDescriptor (the exact class: a dataclass, plain attributes) over a tensor the door reads:
   * no code of its own ran, and none runs when the launch reads it again. Where the base lives goes
   * with the decomposed form's pointer (checked as any pointer's); the map's encode never asks. */
  uint64_t p;
  int where, index;
  if (FL_EXT_DOOR(st) && FL_EXT_DOOR(st)->unpack(base, &p, &where, &index)) {
    vals->nquiet++;
    vals->where[vals->n + 1 + 2 * (size_t)rank] = (int8_t)where;
    vals->index[vals->n + 1 + 2 * (size_t)rank] = (int16_t)index;
  }
  vals->n += JIT_DESC_VALUES(rank);
  vals->ntmaps++;
  vals->held[vals->nheld++] = dtype; /* its address is in the key */
  dtype = NULL;
done:
  if (rc == 1) PyErr_Clear();
  Py_XDECREF(dtype);
  Py_XDECREF(base);
  Py_XDECREF(items);
  Py_XDECREF(block);
  return rc;
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
  if (FL_EXT_UNLIKELY(FL_EXT_STATE_OBJ(st->tensor_desc_type)) && Py_TYPE(v) == (PyTypeObject *)FL_EXT_STATE_OBJ(st->tensor_desc_type))
    return key_descriptor(st, k, vals, v);
  uint64_t w[1];
  fl_value x;
  int where, index;
  if (!value_words(st, v, w, &x, &where, &index)) return 1;
  return key_push(k, w[0]) | value_push(vals, x, where, index);
}

/* The slow path for tensors the door does not take (no door built, a subclass, a meta tensor):
 * dtype, data_ptr() and device as Triton and torch read them. The device goes with the value, so
 * the launch checks it against the plan's memory as it does a tensor the door read (a tensor on
 * memory the plan does not read goes to Triton's path). The dtype's address goes in the key: the
 * dtype is held until the call is done with the key (vals->held), and one made afresh by each read
 * (a property returning a new object, which nothing else holds) is not keyed at all, since a later
 * object could take its address. 0, 1 (not a tensor fastlaunch launches: Triton's path), -1 with
 * an exception. */
static int key_tensor_slow(const fl_ext_state *st, jit_key *k, jit_values *vals, PyObject *v) {
  /* An int subclass (an IntEnum's member) is Triton's int; no dtype is looked for on it. Otherwise the
   * lookup makes no AttributeError when there is none (a declined call costs little over Triton). */
  PyObject *dtype = NULL;
  if (PyLong_Check(v) || fl_ext_optional_attr(v, st->str_dtype, &dtype) <= 0) {
    PyErr_Clear();
    return 1;
  }
  if (Py_REFCNT(dtype) == 1 || vals->nheld >= JIT_MAX_PARAMS) {
    Py_DECREF(dtype);
    return 1;
  }
  vals->held[vals->nheld++] = dtype;
  int where = 0, index = -1;
  if (fl_ext_tensor_device(FL_EXT_DOOR(st), v, &where, &index) == 2) return 1; /* meta: no memory behind it */
  fl_value x;
  x.type = FL_VALUE_PTR;
  x.v.p = 0;
  if (vals->nlazy < JIT_MAX_LAZY) { /* read once the table has a variant for it (fl_jit_read_lazy) */
    size_t i = vals->nlazy++;
    vals->lazy_word[i] = (uint16_t)k->n;
    vals->lazy_value[i] = (uint16_t)vals->n;
    vals->lazy_obj[i] = v;
    return key_push(k, K_TENSOR_OBJ) < 0 || key_push(k, (uint64_t)(uintptr_t)dtype) < 0 ||
           value_push(vals, x, where, index) < 0 ? -1 : 0;
  }
  PyObject *ptr = PyObject_CallMethod(v, "data_ptr", NULL);
  uint64_t p = 0;
  int ok = ptr && PyLong_Check(ptr);
  if (ok) p = PyLong_AsUnsignedLongLongMask(ptr);
  Py_XDECREF(ptr);
  if (!ok) {
    PyErr_Clear();
    return 1;
  }
  x.v.p = p;
  if (key_push(k, K_TENSOR_OBJ | (uint64_t)((p & 15) == 0) << 7) < 0 || key_push(k, (uint64_t)(uintptr_t)dtype) < 0 ||
      value_push(vals, x, where, index) < 0)
    return -1;
  return 0;
}

jit_entry *fl_jit_find_lazy(JitObject *self, jit_key *k, const jit_values *vals) {
  jit_entry *e = NULL;
  for (unsigned m = 0; m < 1u << vals->nlazy && !e; m++) {
    for (size_t i = 0; i < vals->nlazy; i++)
      k->words[vals->lazy_word[i]] = K_TENSOR_OBJ | (uint64_t)((m >> i) & 1) << 7;
    e = table_find(self, k, key_hash(k));
  }
  return e;
}

int fl_jit_read_lazy(jit_key *k, jit_values *vals) {
  for (size_t i = 0; i < vals->nlazy; i++) {
    PyObject *ptr = PyObject_CallMethod(vals->lazy_obj[i], "data_ptr", NULL);
    if (!ptr) return -1;
    if (!PyLong_Check(ptr)) {
      Py_DECREF(ptr);
      return PyErr_SetString(PyExc_TypeError, "data_ptr method of Pointer object must return 64-bit int"), -1;
    }
    uint64_t p = PyLong_AsUnsignedLongLongMask(ptr);
    Py_DECREF(ptr);
    if (p == (uint64_t)-1 && PyErr_Occurred()) return -1;
    vals->v[vals->lazy_value[i]].v.p = p;
    k->words[vals->lazy_word[i]] = K_TENSOR_OBJ | (uint64_t)((p & 15) == 0) << 7;
  }
  vals->nlazy = 0;
  return 0;
}

void fl_jit_values_release(jit_values *vals) {
  while (vals->nheld) Py_DECREF(vals->held[--vals->nheld]);
}

/* One runtime value read again for the launch (see fl_jit_launch_values): 0, 1, or -1. */
static int launch_value(fl_ext_state *st, const jit_values *first, jit_values *out, PyObject *v, int depth) {
  if (PyTuple_Check(v)) {
    if (depth > 0) return 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++) {
      int r = launch_value(st, first, out, PyTuple_GET_ITEM(v, i), depth + 1);
      if (r) return r;
    }
    return 0;
  }
  size_t at = out->n;
  if (at >= first->n) return 1;
  if (first->v[at].type == FL_VALUE_TENSOR_MAP) { /* a descriptor: its map's values read again */
    uint32_t rank = ((const fl_tensor_map_value *)(uintptr_t)first->v[at].v.p)->rank;
    fl_tensor_map_value *t = &out->tmaps[out->ntmaps];
    fl_error err;
    if (out->ntmaps >= FL_EXT_MAX_TMAPS || at + JIT_DESC_VALUES(rank) > first->n ||
        fl_ext_extract_tmap(st, v, at, &out->v[at], t, &out->v[at + 1 + 2 * (size_t)rank], &err) != 0 ||
        t->rank != rank) {
      PyErr_Clear();
      return 1;
    }
    for (size_t i = at; i < at + JIT_DESC_VALUES(rank); i++) out->where[i] = first->where[i], out->index[i] = first->index[i];
    out->n += JIT_DESC_VALUES(rank);
    out->ntmaps++;
    return 0;
  }
  uint64_t w[1];
  fl_value x;
  int where, index;
  if (!value_words(st, v, w, &x, &where, &index)) {
    /* A tensor the key read through data_ptr(): read as Triton's launcher reads a pointer. */
    if (first->v[at].type != FL_VALUE_PTR) return 1;
    PyObject *ptr = PyObject_CallMethod(v, "data_ptr", NULL);
    if (!ptr || !PyLong_Check(ptr)) {
      int answered = ptr != NULL;
      Py_XDECREF(ptr);
      PyErr_Clear();
      PyErr_SetString(PyExc_TypeError, answered ? "data_ptr method of Pointer object must return 64-bit int"
                                           : "Pointer argument must be either uint64 or have data_ptr method");
      return -1;
    }
    x.type = FL_VALUE_PTR;
    x.v.p = PyLong_AsUnsignedLongLongMask(ptr);
    Py_DECREF(ptr);
    if (PyErr_Occurred()) return -1;
    where = first->where[at];
    index = first->index[at];
  }
  return value_push(out, x, where, index) < 0 ? 1 : 0;
}

/* The launch values again, after the grid (jit_base.h). */
int fl_jit_launch_values(JitObject *self, jit_bound *b, const jit_values *first, jit_values *out) {
  out->n = 0;
  out->nheld = 0;
  out->ntmaps = 0;
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  for (Py_ssize_t i = 0; i < np; i++) {
    out->start[i] = first->start[i];
    if (first->start[i] < 0) continue;
    int r = launch_value(self->state, first, out, b->vals[i], 0);
    if (r) return r;
  }
  return out->n == first->n ? 0 : 1;
}

/* 0 with the key and the launch values made; 1 with b->why; -1 with an exception. */
int fl_jit_make_key(JitObject *self, jit_bound *b, int32_t device, jit_key *k, jit_values *vals) {
  k->n = 0;
  vals->n = 0;
  vals->nheld = 0;
  vals->nquiet = 0;
  vals->nlazy = 0;
  vals->ntmaps = 0;
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
      r = key_tensor_slow(self->state, k, vals, b->vals[i]);
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

/* The lists, sized for the kernel's parameters and options. 0, or -1 with MemoryError. */
int fl_jit_memo_init(jit_memo *m, Py_ssize_t nparams) {
  size_t np = (size_t)nparams + 1, nc = np + JIT_MAX_OPTIONS;
  size_t size = nc * sizeof *m->consts + np * (sizeof *m->ints + sizeof *m->vals + 2 * sizeof(uint32_t) + sizeof(uint16_t));
  char *p = PyMem_Calloc(1, size);
  if (!p) return PyErr_NoMemory(), -1;
  m->block = p;
  m->consts = (jit_memo_const *)p; /* the largest alignment first */
  m->vals = (jit_memo_value *)(p += nc * sizeof *m->consts);
  m->t_src = (uint32_t *)(p += np * sizeof *m->vals);
  m->t_abi = (uint32_t *)(p += np * sizeof(uint32_t));
  m->ints = (jit_memo_int *)(p += np * sizeof(uint32_t));
  m->t_koff = (uint16_t *)(p + np * sizeof *m->ints);
  return 0;
}

void fl_jit_memo_free(jit_memo *m) {
  PyMem_Free(m->block);
  m->block = NULL;
}

void fl_jit_memo_clear(JitObject *self) {
  jit_memo *m = &self->memo;
  m->entry = NULL;
  for (uint32_t j = 0; j < m->nc; j++) Py_CLEAR(m->consts[j].ref); /* ints and floats: no code runs */
  m->nt = m->ni = m->nc = m->nv = m->ng = m->nd = 0;
  Py_CLEAR(m->kwnames);
}

/* An entry's runtime argument per parameter, when each runtime argument is one whole runtime
 * parameter (no tuple member, no parameter twice) or a descriptor's values (its map, then its shape
 * and strides as members 1..), a launcher's trailing scratch pointer aside: otherwise e->param_abi
 * stays NULL and the memo never holds the entry. 0, or -1 with MemoryError. */
int fl_jit_memo_entry(jit_entry *e, Py_ssize_t nparams, const uint8_t *param_const) {
  int32_t *at = PyMem_Malloc((size_t)(nparams ? nparams : 1) * sizeof *at);
  if (!at) return PyErr_NoMemory(), -1;
  for (Py_ssize_t i = 0; i < nparams; i++) at[i] = -1;
  const fl_kind *kinds = e->plan->args.kinds;
  for (size_t i = 0; i < e->nabi; i++) {
    int32_t p = e->abi_param[i], member = e->abi_member[i];
    if (p < 0) continue; /* a trailing scratch pointer */
    if (member > 0 && at[p] >= 0 && kinds[at[p]] == FL_KIND_TMAP && i == (size_t)at[p] + (size_t)member) continue;
    if (member >= 0 || param_const[p] || at[p] >= 0) {
      PyMem_Free(at);
      return 0;
    }
    at[p] = (int32_t)i;
  }
  e->param_abi = at;
  return 0;
}

/* A constexpr's (or a launch option's) value at key word `off`: 0, or -1 when its words are not
 * there. */
static int memo_const(jit_memo *m, const jit_entry *e, size_t off, PyObject *v, int16_t src, PyObject *dflt) {
  uint64_t w[2];
  int n = const_words(v, w);
  if (off + (size_t)n > e->nkey || e->key[off] != w[0] || (n == 2 && e->key[off + 1] != w[1])) return -1;
  jit_memo_const *c = &m->consts[m->nc++];
  *c = (jit_memo_const){.dflt = dflt, .same = v, .src = src, .koff = (uint16_t)off, .n = (uint8_t)n};
  if (PyLong_CheckExact(v) || PyFloat_CheckExact(v)) c->ref = Py_NewRef(v); /* else None, a bool, or kept by e */
  return 0;
}

/* A descriptor parameter whose runtime values start at `abi`, its key at `off`: 0, or -1 when the
 * memo does not hold it (a class whose reads could run code, a base the door does not read, a map
 * that is not the plan's). */
static int memo_desc(JitObject *self, const jit_entry *e, PyObject *v, PyObject *dflt, int16_t src, int abi,
                     size_t off) {
  jit_memo *m = &self->memo;
  fl_ext_state *st = self->state;
  uint32_t rank = (uint32_t)(e->key[off] >> 8 & 0xff);
  int dtype;
  unsigned version = Py_TYPE(v) == (PyTypeObject *)FL_EXT_STATE_OBJ(st->tensor_desc_type) ? fl_ext_tmap_plain_class(st, Py_TYPE(v)) : 0;
  if (!version || (m->nd && version != m->desc_version) || m->nd >= FL_EXT_MAX_TMAPS || off + 2 + rank > e->nkey ||
      e->plan->args.kinds[abi] != FL_KIND_TMAP || (size_t)abi + 1 + 2 * rank > e->nabi ||
      fl_ext_tmap_dtype(st, v, &dtype) != 0 || dtype < INT8_MIN || dtype > INT8_MAX)
    return -1;
  m->desc_version = version;
  m->desc[m->nd++] = (jit_memo_desc){.dflt = dflt, .src = src, .abi = (uint16_t)abi, .koff = (uint16_t)off,
                                     .rank = (uint8_t)rank, .dtype = (int8_t)dtype};
  return 0;
}

int fl_jit_memo_descs(JitObject *self, PyObject *const *args, fl_value *values, fl_tensor_map_value *tmaps) {
  jit_memo *m = &self->memo;
  fl_ext_state *st = self->state;
  const jit_entry *e = m->entry;
  for (uint32_t j = 0; j < m->nd; j++) {
    jit_memo_desc *d = &m->desc[j];
    PyObject *v = d->src >= 0 ? args[d->src] : d->dflt;
    PyTypeObject *type = Py_TYPE(v);
    if (type != (PyTypeObject *)FL_EXT_STATE_OBJ(st->tensor_desc_type) || type->tp_version_tag != m->desc_version ||
        fl_ext_tmap_quiet(st, v, d->dtype, &e->key[d->koff + 2], d->rank, &values[d->abi], &tmaps[j], &d->seen))
      return 1;
  }
  return 0;
}

/* Where each parameter's value and key words are, walking the entry's key as the call that found it
 * made it. 0, or -1 for an entry the memo does not hold (a tensor read by data_ptr(), a tuple). */
static int memo_layout(JitObject *self, const jit_entry *e, const jit_bound *b) {
  jit_memo *m = &self->memo;
  const uint64_t *key = e->key;
  size_t off = 1; /* the device */
  for (Py_ssize_t i = 0, np = PyTuple_GET_SIZE(self->param_names); i < np; i++) {
    int16_t src = b->src[i];
    PyObject *dflt = src < 0 ? b->vals[i] : NULL, *v = b->vals[i];
    if (self->param_const[i]) {
      if (memo_const(m, e, off, v, src, dflt) < 0) return -1;
      off += m->consts[m->nc - 1].n;
      continue;
    }
    if (off >= e->nkey) return -1;
    int tag = (int)(key[off] & 0x7f), abi = e->param_abi[i];
    if (tag == K_TENSOR && src >= 0 && abi >= 0) {
      m->t_src[m->nt] = (uint32_t)src;
      m->t_abi[m->nt] = (uint32_t)abi;
      m->t_koff[m->nt++] = (uint16_t)off;
    } else if (tag == K_INT && (key[off] >> 8 & 15) < 2 && src >= 0) { /* within int64 */
      m->ints[m->ni++] = (jit_memo_int){src, (uint16_t)(abi >= 0 ? abi : JIT_MAX_PARAMS), (uint16_t)off};
    } else if (tag == K_TENSOR || tag == K_INT || tag == K_NONE || tag == K_BOOL || tag == K_FLOAT) {
      m->vals[m->nv++] = (jit_memo_value){dflt, src, (int16_t)abi, (uint16_t)off};
    } else if (tag == K_DESC && abi >= 0) {
      if (memo_desc(self, e, v, dflt, src, abi, off) < 0) return -1;
      off += 1 + m->desc[m->nd - 1].rank;
    } else {
      return -1;
    }
    off++;
  }
  for (Py_ssize_t o = 0; o < b->nopts; o++) {
    if (off >= e->nkey || key[off] != (K_OPTION | (uint64_t)b->opt_index[o] << 8) ||
        memo_const(m, e, off + 1, b->opt_vals[o], b->opt_src[o], NULL) < 0)
      return -1;
    off += 1 + m->consts[m->nc - 1].n;
  }
  for (size_t s = 0; s < e->ngrid_src; s++) {
    Py_ssize_t i = e->grid_src[s].index;
    if (e->grid_src[s].kind == SRC_ARG)
      m->grid[m->ng++] = (jit_memo_grid){b->src[i] < 0 ? b->vals[i] : NULL, b->src[i], (int16_t)i};
  }
  return off == e->nkey ? 0 : -1;
}

/* After a fast call through the full path: its form and entry become the memo. `b` was bound
 * from args (positional, then the keywords' values at args + nargs). */
void fl_jit_memo_set(JitObject *self, jit_entry *e, const jit_bound *b, size_t nargs, PyObject *kwnames) {
  jit_memo *m = &self->memo;
  if (m->entry == e && m->nargs == nargs && fl_ext_same_names(kwnames, m->kwnames)) return;
  fl_jit_memo_clear(self);
  if (!e->param_abi || memo_layout(self, e, b) < 0) {
    fl_jit_memo_clear(self);
    return;
  }
  m->kwnames = Py_XNewRef(kwnames); /* a tuple of str: freeing one runs no code */
  m->nargs = nargs;
  m->entry = e;
}


/* ---- binding a call to the kernel's parameters and options ---- */

static Py_ssize_t ident_index(PyObject *names, PyObject *key) {
  Py_ssize_t n = PyTuple_GET_SIZE(names);
  for (Py_ssize_t i = 0; i < n; i++)
    if (PyTuple_GET_ITEM(names, i) == key) return i;
  return -1;
}

static Py_ssize_t equal_index(PyObject *names, PyObject *key) {
  Py_ssize_t n = PyTuple_GET_SIZE(names);
  for (Py_ssize_t i = 0; i < n; i++) {
    int eq = PyUnicode_Compare(PyTuple_GET_ITEM(names, i), key);
    if (eq == 0) return i;
    if (eq == -1 && PyErr_Occurred()) PyErr_Clear();
  }
  return -1;
}

Py_ssize_t fl_ext_name_index(PyObject *names, PyObject *key) {
  Py_ssize_t i = ident_index(names, key);
  return i >= 0 ? i : equal_index(names, key);
}

/* A keyword: its parameter index (*param) or option index (*option), -1 for the other. Names are
 * compared by identity first (the policy interns them, as the compiler interns keyword names). */
static void keyword_index(JitObject *self, PyObject *key, Py_ssize_t *param, Py_ssize_t *option) {
  *option = -1;
  *param = ident_index(self->param_names, key);
  if (*param >= 0) return;
  *option = ident_index(self->option_names, key);
  if (*option >= 0) return;
  *param = equal_index(self->param_names, key);
  if (*param < 0) *option = equal_index(self->option_names, key);
}

/* 0 bound; 1 not bindable here (b->why); kwnames/kwvals exclude grid= and warmup=. */
int fl_jit_bind_call(JitObject *self, jit_bound *b, PyObject *const *args, size_t nargs, PyObject *kwnames,
                     PyObject *const *kwvals, Py_ssize_t nkw) {
  Py_ssize_t np = PyTuple_GET_SIZE(self->param_names);
  if ((Py_ssize_t)nargs > np) return b->why = "args_count", 1;
  memcpy(b->vals, args, nargs * sizeof(PyObject *));
  for (Py_ssize_t i = (Py_ssize_t)nargs; i < np; i++) b->vals[i] = NULL;
  for (Py_ssize_t i = 0; i < np; i++) b->src[i] = (int16_t)(i < (Py_ssize_t)nargs ? i : -1);
  b->nopts = 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    Py_ssize_t i, j;
    keyword_index(self, PyTuple_GET_ITEM(kwnames, k), &i, &j);
    if (i >= 0) {
      if (b->vals[i]) return b->why = "args_repeated", 1;
      b->vals[i] = kwvals[k];
      b->src[i] = (int16_t)(nargs + (size_t)k);
      continue;
    }
    if (j < 0) return b->why = "unknown_keyword", 1;
    for (Py_ssize_t o = 0; o < b->nopts; o++)
      if (b->opt_index[o] == j) return b->why = "args_repeated", 1;
    /* Kept in option order, so the key does not depend on the keywords' order. */
    Py_ssize_t at = b->nopts++;
    while (at > 0 && b->opt_index[at - 1] > j) {
      b->opt_index[at] = b->opt_index[at - 1];
      b->opt_vals[at] = b->opt_vals[at - 1];
      b->opt_src[at] = b->opt_src[at - 1];
      at--;
    }
    b->opt_index[at] = j;
    b->opt_vals[at] = kwvals[k];
    b->opt_src[at] = (int16_t)(nargs + (size_t)k);
  }
  for (Py_ssize_t i = 0; i < np; i++) {
    if (b->vals[i]) continue;
    PyObject *d = PyTuple_GET_ITEM(self->defaults, i); /* (default,) or () */
    if (PyTuple_GET_SIZE(d) != 1) return b->why = "args_missing", 1;
    b->vals[i] = PyTuple_GET_ITEM(d, 0);
  }
  return 0;
}
