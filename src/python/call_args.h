/* call_args.h: a call's positional arguments to a plan's runtime values, and a plan's launch from
 * them, inline in the paths of Plan.__call__ and the Inductor entry (entry.c, plan_obj.c) and the
 * testing build's loops. The slow half, fl_ext_extract, is convert.c's: this header sits above it
 * and convert.c never includes it. */
#ifndef FL_CALL_ARGS_H
#define FL_CALL_ARGS_H

#include "ext.h"

/* Where a launch's runtime values live, decided here for every reader: on the stack up to
 * FL_EXT_STACK_VALUES, on the heap above (a tensor map takes 1 + 2 x rank values from one call
 * position, so the count is the plan's values', never the call's positions). */
typedef struct {
  fl_value stack[FL_EXT_STACK_VALUES];
  fl_value *v;
} fl_ext_values;

/* v->v for n values, or NULL with MemoryError. */
static inline fl_value *fl_ext_values_get(fl_ext_values *v, size_t n) {
  v->v = n <= FL_EXT_STACK_VALUES ? v->stack : PyMem_Malloc(n * sizeof *v->v);
  if (!v->v) PyErr_NoMemory();
  return v->v;
}

static inline void fl_ext_values_put(fl_ext_values *v) {
  if (v->v && v->v != v->stack) PyMem_Free(v->v);
  v->v = NULL;
}

/* Converts a call's positional arguments to runtime values (before the submit boundary). Returns
 * 0; -1 with `err` filled (no Python exception); -2 with a Python exception that must propagate
 * as it is (KeyboardInterrupt and the like, raised by an argument's own code). A tensor map's value
 * points into `tmaps` (the caller's, FL_EXT_MAX_TMAPS entries, alive until the launch returns). */
static FL_EXT_ALWAYS_INLINE int fl_ext_collect(fl_ext_state *st, const fl_ext_args *spec, PyObject *const *args, size_t nargs, fl_value *values,
                   fl_tensor_map_value *tmaps, fl_error *err) {
  if (nargs != spec->ncall) {
    err->status = FL_BAD_ARG_COUNT;
    err->backend_submitted = false;
    err->stable = true;
    snprintf(err->reason, sizeof err->reason, "args_size_mismatch:%zu:%zu", nargs, spec->ncall);
    return -1;
  }
  /* Read once: the calls below (the door, extract) could in principle change what a pointer
   * reaches, so a field read inside the loop is read again after every call. */
  const fl_tensor_door *door = spec->data_ptr_only ? NULL : FL_EXT_DOOR(st);
  const int32_t *argmap = spec->argmap;
  const fl_kind *kinds = spec->kinds;
  const fl_memory memory = spec->memory;
  const int device = spec->device;
  /* The pointer arguments in one call through the door, up to the first it does not take (that one
   * and those after it go one at a time below). */
  uint64_t ptrs[FL_EXT_STACK_VALUES];
  size_t got = 0, j = 0;
  if (door && spec->ptr_pos && spec->nptr <= FL_EXT_STACK_VALUES)
    got = door->unpack_ptrs(args, spec->ptr_pos, spec->nptr, (int)memory, device, ptrs, NULL, NULL);
  for (size_t i = 0; i < nargs; i++) {
    size_t k = i;
    if (argmap) {
      if (argmap[i] < 0) continue; /* a position the plan skips */
      k = (size_t)argmap[i];
    }
    PyObject *obj = args[i];
    fl_kind kind = kinds[k];
    /* The two common cases inline (a tensor through the door on a device the plan takes; a
     * non-negative int of up to 63 bits for a non-pointer kind); everything else, errors included,
     * the full way. */
    if (kind == FL_KIND_PTR) {
      if (j < got) {
        values[k].type = FL_VALUE_PTR;
        values[k].v.p = ptrs[j++];
        continue;
      }
      j++;
      uint64_t p;
      int where, index;
      if (door && door->unpack(obj, &p, &where, &index) && /* 0 for anything but a tensor */
          (memory == FL_MEMORY_ANY || (where == (int)memory && (device < 0 || index == device)))) {
        values[k].type = FL_VALUE_PTR;
        values[k].v.p = p;
        continue;
      }
    } else if (PyLong_CheckExact(obj)) {
      uint64_t mag;
      int neg;
      if (fl_ext_int_digits(obj, &mag, &neg) && !neg && mag <= (uint64_t)INT64_MAX) {
        values[k] = fl_int((int64_t)mag);
        continue;
      }
    }
    int r;
    if (kind == FL_KIND_TMAP) {
      const fl_tensor_map_value *fixed = spec->tmap_fixed ? &spec->tmap_fixed[spec->tmap_index[k]] : NULL;
      fl_tensor_map_value *t = &tmaps[spec->tmap_index[k]];
      r = fixed && fixed->rank ? fl_ext_tmap_of_tensor(st, obj, k, &values[k], t, fixed, err)
                               : fl_ext_extract_tmap(st, obj, k, &values[k], t, NULL, err);
    } else {
      r = fl_ext_extract(st, kind, obj, k, &values[k], err, spec);
    }
    if (r < 0) return r;
  }
  return 0;
}

/* fl_ext_collect, then the scalars checked against their kinds, as a launcher's format checks them
 * before anything of the call runs (a hook, an allocator): what fl_launch would refuse later is
 * refused now. Returns as fl_ext_collect. */
static inline int fl_ext_collect_checked(fl_ext_state *st, fl_PlanObject *plan, PyObject *const *full, size_t nfull,
                                         fl_value *values, fl_tensor_map_value *tmaps, fl_error *err) {
  int rc = fl_ext_collect(st, &plan->args, full, nfull, values, tmaps, err);
  fl_abi abi = fl_plan_abi(plan->plan);
  for (size_t k = 0; rc == 0 && k < plan->args.nruntime; k++) {
    uint64_t slot[4];
    if (plan->args.kinds[k] != FL_KIND_PTR && plan->args.kinds[k] != FL_KIND_TMAP &&
        fl_pack_value(abi, plan->args.kinds[k], &values[k], slot, k, err) != FL_OK)
      rc = -1;
  }
  return rc;
}

/* fl_ext_collect in the words' form (a->words): every pointer argument a tensor the door takes on
 * the plan's memory and device, every other an exact int within int64. 1 with `words` filled; 0
 * when any is not, and fl_ext_collect reads them all again the full way (nothing here runs Python
 * code or changes anything, so reading twice changes nothing). */
static FL_EXT_ALWAYS_INLINE int fl_ext_collect_words(const fl_tensor_door *door, const fl_ext_args *spec,
                                                     PyObject *const *args, uint64_t *words) {
  if (spec->nptr && door->unpack_ptrs(args, spec->ptr_pos, spec->nptr, (int)spec->memory, spec->device, words,
                                      spec->ptr_k, NULL) != spec->nptr)
    return 0;
  const uint32_t *pos = spec->int_pos, *k = spec->int_k;
  for (uint32_t j = 0, n = spec->nint; j < n; j++)
    if (!fl_ext_int_word(args[pos[j]], &words[k[j]])) return 0;
  return 1;
}

/* Converts the positional arguments (before the submit boundary) and launches. Returns 0; -1 with
 * `err` filled (no Python exception); -2 with a Python exception set. Inline: the entry's path. */
static FL_EXT_ALWAYS_INLINE int fl_ext_plan_launch(fl_PlanObject *plan, PyObject *const *args, size_t nargs, uint64_t stream,
                       const int64_t *grid, fl_error *err) {
  const fl_tensor_door *door = FL_EXT_DOOR(plan->state);
  if (plan->args.words && door && nargs == plan->args.ncall) {
    uint64_t words[FL_EXT_STACK_VALUES]; /* a->words holds only for plans of at most this many */
    if (fl_ext_collect_words(door, &plan->args, args, words))
      return fl_launch_words(plan->plan, stream, words, plan->args.nruntime, grid, err) == FL_OK ? 0 : -1;
  }
  fl_ext_values home;
  fl_tensor_map_value tmaps[FL_EXT_MAX_TMAPS];
  fl_value *values = fl_ext_values_get(&home, plan->args.nruntime);
  if (!values) return -2;
  int rc = fl_ext_collect(plan->state, &plan->args, args, nargs, values, tmaps, err);
  if (rc == 0 && fl_launch(plan->plan, stream, values, plan->args.nruntime, grid, err) != FL_OK) rc = -1;
  fl_ext_values_put(&home);
  return rc;
}

#endif
