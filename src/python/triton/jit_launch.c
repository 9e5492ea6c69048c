/* jit_launch.c: an entry's launch, from the values the key pass (or the memo's match) read: the
 * values in the entry's argument order, and a launch with global scratch, whose allocator runs Python
 * code before the values are read again (jit_base.h's layers). */
#include "jit_base.h"

static int entry_values(jit_entry *e, const jit_values *vals, fl_value *values, fl_error *err);

/* The values read again after the allocator: 0 (in `words` or `values`); 1 with err's reason (they are
 * not the form they had, or the memo no longer is e's); -1 with an exception. */
static FL_EXT_COLD int scratch_reread(JitObject *self, jit_entry *e, const jit_reread *rr, fl_value *values,
                                      uint64_t *words, fl_error *err) {
  int r;
  if (rr->b) {
    jit_values again;
    r = fl_jit_launch_values(self, rr->b, rr->first, &again);
    if (r == 0) r = entry_values(e, &again, values, err);
    fl_jit_values_release(&again); /* the pointers are read: the dtypes held only while keyed */
    if (r <= 0) return r;
  } else if (self->memo.entry == e) {
    int32_t device = (int32_t)(uint32_t)(e->key[0] >> 8);
    r = jit_memo_match(self, rr->args, rr->nargs, rr->kwnames, device, rr->pv, values, words);
    if (r == 0 && self->memo.nd) r = fl_jit_memo_descs(self, rr->args, values, rr->tmaps);
    if (r == 0) return 0;
  } else { /* the allocator dropped the tables (disable(), a knob): the memo no longer says where each
            * value is; the call bound and keyed again as the full path does (still e's, as it is still
            * Triton's launcher's once Triton's run got this far) */
    jit_bound b;
    jit_key k;
    jit_values again;
    again.nheld = 0;
    Py_ssize_t nkw = rr->kwnames ? PyTuple_GET_SIZE(rr->kwnames) : 0;
    int32_t device = (int32_t)(uint32_t)(e->key[0] >> 8);
    r = fl_jit_bind_call(self, &b, rr->args, rr->nargs, rr->kwnames, rr->args + rr->nargs, nkw);
    if (r == 0) r = fl_jit_make_key(self, &b, device, &k, &again);
    /* The same variant, every pointer read (none left lazy) and no descriptor (their maps would live
     * in `again`): else Triton's. */
    if (r == 0 && (k.n != e->nkey || memcmp(k.words, e->key, k.n * sizeof *k.words) || again.nlazy || again.ntmaps))
      r = 1;
    if (r == 0) r = entry_values(e, &again, values, err);
    fl_jit_values_release(&again);
    if (r < 0) return r;
    for (size_t i = 0; r == 0 && words && i < e->nabi; i++) {
      if (values[i].type == FL_VALUE_PTR || values[i].type == FL_VALUE_INT) words[i] = values[i].v.u;
      else if (e->abi_param[i] >= 0) r = 1; /* a value no word says: Triton's */
    }
    if (r == 0) return 0;
  }
  snprintf(err->reason, sizeof err->reason, "args_changed_by_allocator");
  err->stable = false;
  return 1;
}

/* A launch of an entry with global scratch: the values checked, then the allocator called as
 * Triton's launcher calls it (Python code runs), the values read again, the buffer's address in the
 * first trailing pointer, the launch, the buffer dropped. In `words` when not NULL (the memo's match:
 * its key's words fix each value's range, so none is checked again), else `values`. As launch_entry;
 * -1 also for the allocator's exception. */
int fl_jit_launch_scratch(JitObject *self, jit_entry *e, fl_value *values, uint64_t *words, uint64_t stream,
                          const int64_t grid[3], const jit_reread *rr, fl_error *err) {
  fl_abi abi = fl_plan_abi(e->plan->plan);
  for (size_t i = 0; !words && i + e->nhidden < e->nabi; i++) { /* refused now: Triton's, the allocator not called */
    uint64_t slot[4];
    if (e->plan->args.kinds[i] != FL_KIND_PTR && e->plan->args.kinds[i] != FL_KIND_TMAP &&
        fl_pack_value(abi, e->plan->args.kinds[i], &values[i], slot, i, err) != FL_OK)
      return 1;
  }
  PyObject *buf;
  uint64_t addr;
  if (fl_ext_scratch_alloc(self->state, e->scratch_var, e->scratch_size, e->scratch_align, e->scratch_ctas, grid, stream, NULL,
                           &e->scratch_ints, &buf, &addr) < 0)
    return -1;
  err->backend_submitted = false;
  int r = scratch_reread(self, e, rr, values, words, err);
  if (r != 0) return Py_DECREF(buf), r;
  size_t first = e->nabi - e->nhidden;
  for (size_t i = first; i < e->nabi; i++) {
    if (words) words[i] = i == first ? addr : 0;
    else values[i] = i == first ? fl_ptr((const void *)(uintptr_t)addr) : fl_none();
  }
  r = (words ? fl_launch_words(e->plan->plan, stream, words, e->nabi, grid, err)
             : fl_launch(e->plan->plan, stream, values, e->nabi, grid, err)) == FL_OK ? 0 : err->backend_submitted ? -1 : 1;
  if (r < 0) fl_ext_raise(self->state, err);
  Py_DECREF(buf);
  return r;
}

/* The entry's launch values, in its argument order, from a key pass's (or a read again): 0; 1 with
 * err's reason (their layout is not the entry's, or a tensor lives where the plan does not read). */
static int entry_values(jit_entry *e, const jit_values *vals, fl_value *values, fl_error *err) {
  const fl_ext_args *spec = &e->plan->args;
  for (size_t i = 0; i < e->nabi; i++) {
    if (FL_EXT_UNLIKELY(e->abi_param[i] < 0)) { /* a trailing scratch pointer: none, or the buffer */
      values[i] = fl_none();
      continue;
    }
    int32_t at = vals->start[e->abi_param[i]] + (e->abi_member[i] > 0 ? e->abi_member[i] : 0);
    if (FL_EXT_UNLIKELY(vals->start[e->abi_param[i]] < 0 || (size_t)at >= vals->n)) {
      snprintf(err->reason, sizeof err->reason, "arg_layout_changed:%zu", i);
      return 1;
    }
    int where = vals->where[at];
    if (FL_EXT_UNLIKELY(where && !fl_ext_memory_takes(spec, where, vals->index[at]))) {
      snprintf(err->reason, sizeof err->reason, "ptr_device_mismatch:%zu", i);
      return 1;
    }
    values[i] = vals->v[at];
  }
  return 0;
}

/* Launches through the entry's plan with the values the key pass read (b: the binding they came
 * from, read again after an allocator): 0 launched; 1 refused before the boundary (err); -1 with an
 * exception (after the boundary). No Python code runs here, but an entry's allocator for its global
 * scratch (fl_jit_launch_scratch). */
int fl_jit_launch_entry(JitObject *self, jit_entry *e, jit_bound *b, const jit_values *vals, uint64_t stream,
                        const int64_t grid[3], fl_error *err) {
  fl_value values[JIT_MAX_PARAMS];
  if (entry_values(e, vals, values, err)) return 1;
  if (FL_EXT_UNLIKELY(e->scratch_var != NULL)) {
    jit_reread rr = {.b = b, .first = vals};
    return fl_jit_launch_scratch(self, e, values, NULL, stream, grid, &rr, err);
  }
  if (fl_launch(e->plan->plan, stream, values, e->nabi, grid, err) == FL_OK) return 0;
  if (err->backend_submitted) {
    fl_ext_raise(self->state, err);
    return -1;
  }
  return 1;
}
