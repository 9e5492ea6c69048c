/* jit_launch.c: an entry's launch, from the values the key pass (or the memo's match) read: the
 * values in the entry's argument order, and the JIT's binding into the launch sequence (sequence.h)
 * for a launch with global scratch or launch hooks, whose Python code runs before the values are read
 * again (jit_base.h's layers). */
#include "jit_base.h"

static int entry_values(jit_entry *e, const jit_values *vals, fl_value *values, fl_error *err);

/* The JIT's read, its binding into the launch sequence (s->call a jit_reread). Step 1: the values the
 * key pass (or the memo's match) read, their scalars checked (the memo's words need none: its key's
 * words fix each value's range). Step 4: read again, through the binding the full path made, or by
 * matching the memo again while it is still e's, or, where Python code dropped the tables (disable(),
 * a knob), by binding and keying the call again as the full path does (still e's, as it is still
 * Triton's launcher's once Triton's run got this far). 0; 1 with err's reason; -1 with an exception. */
static int jit_read(fl_seq *s, int pass, fl_error *err) {
  const jit_reread *rr = s->call;
  JitObject *self = rr->self;
  jit_entry *e = rr->e;
  fl_value *values = s->values;
  uint64_t *words = s->words;
  int r;
  if (pass == FL_SEQ_CHECK) {
    fl_abi abi = fl_plan_abi(e->plan->plan);
    for (size_t i = 0; !words && i + e->nhidden < e->nabi; i++) {
      uint64_t slot[4];
      if (e->plan->args.kinds[i] != FL_KIND_PTR && e->plan->args.kinds[i] != FL_KIND_TMAP &&
          fl_pack_value(abi, e->plan->args.kinds[i], &values[i], slot, i, err) != FL_OK)
        return 1;
    }
    return 0;
  }
  if (rr->b) {
    jit_values again;
    r = fl_jit_launch_values(self, rr->b, rr->first, &again);
    if (r == 0) r = entry_values(e, &again, values, err);
    else if (r > 0) snprintf(err->reason, sizeof err->reason, "arg_layout_changed");
    fl_jit_values_release(&again); /* the pointers are read: the dtypes held only while keyed */
    return r;
  }
  int32_t device = (int32_t)(uint32_t)(e->key[0] >> 8);
  if (self->memo.entry == e) {
    r = jit_memo_match(self, rr->args, rr->nargs, rr->kwnames, device, rr->pv, values, words);
    if (r == 0 && self->memo.nd) r = fl_jit_memo_descs(self, rr->args, values, rr->tmaps);
    return r == 0 ? 0 : (snprintf(err->reason, sizeof err->reason, "args_changed"), 1);
  }
  jit_bound b;
  jit_key k;
  jit_values again;
  again.nheld = 0;
  Py_ssize_t nkw = rr->kwnames ? PyTuple_GET_SIZE(rr->kwnames) : 0;
  r = fl_jit_bind_call(self, &b, rr->args, rr->nargs, rr->kwnames, rr->args + rr->nargs, nkw);
  if (r == 0) r = fl_jit_make_key(self, &b, device, &k, &again);
  /* The same variant, every pointer read (none left lazy) and no descriptor (their maps would live
   * in `again`): else Triton's. */
  if (r == 0 && (k.n != e->nkey || memcmp(k.words, e->key, k.n * sizeof *k.words) || again.nlazy || again.ntmaps))
    r = 1;
  if (r == 0) r = entry_values(e, &again, values, err);
  fl_jit_values_release(&again);
  for (size_t i = 0; r == 0 && words && i < e->nabi; i++) {
    if (values[i].type == FL_VALUE_PTR || values[i].type == FL_VALUE_INT) words[i] = values[i].v.u;
    else if (e->abi_param[i] >= 0) r = 1; /* a value no word says: Triton's */
  }
  if (r > 0) snprintf(err->reason, sizeof err->reason, "args_changed");
  return r;
}

/* The sequence for an entry's launch (values or words in its order, read once already by the key
 * pass or the memo). As launch_entry; -1 also for the allocator's or a hook's exception; -2 launched,
 * then the exit hook raised; with hooks, a hand-back's result in *handed. */
static int run_sequence(fl_seq *s, fl_error *err, PyObject **handed) {
  int r = fl_seq_run(s, err);
  if (r == FL_SEQ_HANDED) *handed = s->result;
  if (r == FL_SEQ_EXIT_RAISED) return -2;
  return r == FL_SEQ_LAUNCHED || r == FL_SEQ_HANDED ? 0 : r == FL_SEQ_REFUSED || r == FL_SEQ_LATE ? 1 : -1;
}

static fl_ext_scratch_ref scratch_of(jit_entry *e) {
  return (fl_ext_scratch_ref){e->scratch_var, e->scratch_size, e->scratch_align, e->scratch_ctas, e->nhidden,
                              &e->scratch_ints};
}

int fl_jit_launch_scratch(JitObject *self, jit_entry *e, fl_value *values, uint64_t *words, uint64_t stream,
                          const int64_t grid[3], jit_reread *rr, fl_error *err) {
  fl_ext_scratch_ref sc = scratch_of(e);
  rr->self = self;
  rr->e = e;
  fl_seq s = {.read = jit_read, .call = rr, .plan = e->plan, .values = values, .words = words, .n = e->nabi,
              .stream = stream, .g = {grid[0], grid[1], grid[2]}, .scratch = &sc};
  PyObject *unused = NULL;
  return run_sequence(&s, err, &unused);
}

int fl_jit_launch_hooked(JitObject *self, jit_entry *e, jit_bound *b, const jit_values *vals, PyObject *kernel,
                         PyObject *grid, uint64_t stream, const int64_t g[3], PyObject **handed, fl_error *err) {
  fl_value values[JIT_MAX_PARAMS];
  jit_reread rr = {.self = self, .e = e, .b = b, .first = vals};
  fl_seq s = {.read = jit_read, .call = &rr, .plan = e->plan, .values = values, .n = e->nabi, .stream = stream,
              .g = {g[0], g[1], g[2]}, .hooks = 1, .kernel = kernel, .grid = grid, .args = b->vals,
              .nargs = (size_t)PyTuple_GET_SIZE(self->param_names)};
  fl_ext_scratch_ref sc = scratch_of(e);
  if (e->scratch_var) s.scratch = &sc; /* refused by the sequence: Triton allocates before enter */
  *handed = NULL;
  return run_sequence(&s, err, handed);
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
