/* launch.c: the steady-state launch: copy the template, pack the runtime args, resolve the grid,
 * submit. Everything before the backend's submit is validation that can still fall back. */
#include "plan_grid.h"

#include <stdio.h>
#include <string.h>

/* Buffers too large for the stack live here; each thread has its own, so launches never share. */
static _Thread_local _Alignas(16) unsigned char large_args[FL__MAX_ARGS_SIZE];

/* Packs the runtime arguments. The common cases (an address, an int for a signed 32- or 64-bit
 * slot: plan->fast, from each kind's row) are written inline; everything else goes through
 * fl_pack_value with its range checks. */
static inline fl_status pack_runtime(const fl_plan *plan, unsigned char *buf, const fl_value *args,
                                     fl_error *err) {
  const fl_abi abi = plan->target.abi;
  size_t which = 0; /* the tensor maps met so far */
  for (size_t i = 0; i < plan->nruntime; i++) {
    const fl_value *a = &args[i];
    unsigned char *dst = buf + plan->offsets[i];
    const unsigned fast = plan->fast[i];
    if (fast == FL__FAST_PTR && a->type == FL_VALUE_PTR) {
      memcpy(dst, &a->v.p, 8);
    } else if (fast == FL__FAST_S32 && a->type == FL_VALUE_INT && a->v.i >= INT32_MIN && a->v.i <= INT32_MAX) {
      int32_t x = (int32_t)a->v.i;
      memcpy(dst, &x, 4);
    } else if (fast == FL__FAST_S64 && a->type == FL_VALUE_INT) {
      memcpy(dst, &a->v.i, 8);
    } else if (fast == FL__FAST_TMAP) {
      fl_status st = fl__tmap_pack(plan, i, which++, a, dst, err);
      if (FL__UNLIKELY(st != FL_OK)) return st;
    } else {
      fl_status st = fl_pack_value(abi, plan->kinds[i], a, dst, i, err);
      if (FL__UNLIKELY(st != FL_OK)) return st;
    }
  }
  return FL_OK;
}

/* The words' form (fl_launch_words): one 64-bit word per runtime argument, its meaning the kind's
 * (plan->words: every runtime argument has a fast row). Only an int outside a 32-bit slot's range
 * takes fl_pack_value, for its refusal in the same words as fl_launch's. */
static inline fl_status pack_words(const fl_plan *plan, unsigned char *buf, const uint64_t *words, fl_error *err) {
  const struct fl__word_slot *slot = plan->word_slots;
  const size_t n8 = plan->n_words8, n = plan->nruntime;
  size_t j = 0;
  for (; j < n8; j++) memcpy(buf + slot[j].offset, &words[slot[j].index], 8);
  for (; j < n; j++) {
    const int64_t x = (int64_t)words[slot[j].index];
    if (FL__UNLIKELY(x < INT32_MIN || x > INT32_MAX)) {
      const size_t i = slot[j].index;
      const fl_value v = fl_int(x);
      return fl_pack_value(plan->target.abi, plan->kinds[i], &v, buf + slot[j].offset, i, err);
    }
    const int32_t x32 = (int32_t)x;
    memcpy(buf + slot[j].offset, &x32, 4);
  }
  return FL_OK;
}

/* The grid of a words launch: the inline forms read their argument from its word; the rest go
 * through the values the words stand for (the arguments the programs may read, no more). */
static FL__NOINLINE fl_status words_grid_resolve(const fl_plan *plan, const uint64_t *words, const int64_t *grid,
                                                 uint32_t g[3], fl_error *err) {
  const size_t n = plan->grid_nvars < plan->nruntime ? plan->grid_nvars : plan->nruntime;
  fl_value values[n ? n : 1];
  for (size_t i = 0; i < n; i++)
    values[i] = plan->fast[i] == FL__FAST_PTR ? fl_ptr((const void *)(uintptr_t)words[i]) : fl_int((int64_t)words[i]);
  return fl__plan_grid_resolve(plan, values, grid, g, err);
}

static inline fl_status words_grid(const fl_plan *plan, const uint64_t *words, const int64_t *grid, uint32_t g[3],
                                   fl_error *err) {
  if (fl__plan_grid_static(plan, grid, g)) return FL_OK;
  const uint32_t var = plan->grid_dim[0].var;
  if (plan->grid_1d && grid == NULL && plan->fast[var] != FL__FAST_PTR &&
      fl__plan_grid_one_dim_of(plan, (int64_t)words[var], g))
    return FL_OK;
  if (plan->grid_mode == FL_GRID_CALLER && grid != NULL && fl__grid_fits(plan, grid, g)) return FL_OK;
  return words_grid_resolve(plan, words, grid, g, err);
}

/* What both forms share once the arguments are in the buffer and the grid is known. */
static inline fl_status submit_packed(const fl_plan *plan, uint64_t stream, unsigned char *buf, const uint32_t g[3],
                                      fl_error *err) {
  /* A grid with a zero dimension runs no program: like Triton's launchers, launch nothing. */
  if (FL__UNLIKELY(g[0] == 0 || g[1] == 0 || g[2] == 0)) {
    fl__ok(err);
    return FL_OK;
  }
  if (plan->layout.grid[0] >= 0 && plan->grid_mode != FL_GRID_STATIC) fl__plan_write_grid(plan, buf, g);
  /* The submit boundary: from here on only the backend can fail, and says whether it submitted. */
  return plan->base->submit(plan->base, plan, stream, buf, g, err);
}

/* The buffer of a launch, the template copied in. */
#define FL__LAUNCH_BUFFER(plan, buf)                                                                  \
  _Alignas(16) unsigned char stack_args[FL__STACK_ARGS_SIZE];                                          \
  const size_t size = (plan)->layout.size;                                                             \
  unsigned char *buf = size <= sizeof stack_args ? stack_args : large_args;                            \
  if (size <= FL__SMALL_ARGS)                                                                          \
    memcpy(buf, (plan)->tmpl, FL__SMALL_ARGS); /* a constant size: a few moves, no call */              \
  else                                                                                                 \
    memcpy(buf, (plan)->tmpl, size)

/* The grid of a launch: the static grid and the common computed one inline, the rest through
 * fl__plan_grid_resolve (plan_grid.c). fl_plan_resolve_grid answers through this too, so it shows
 * what a launch gets. */
static inline fl_status launch_grid(const fl_plan *plan, const fl_value *args, const int64_t *grid, uint32_t g[3],
                                    fl_error *err) {
  if (fl__plan_grid_static(plan, grid, g)) return FL_OK;
  if (plan->grid_1d && grid == NULL && fl__plan_grid_one_dim(plan, args, g)) return FL_OK;
  if (plan->grid_mode == FL_GRID_CALLER && grid != NULL && fl__grid_fits(plan, grid, g)) return FL_OK;
  return fl__plan_grid_resolve(plan, args, grid, g, err);
}

fl_status fl_launch(const fl_plan *plan, uint64_t stream, const fl_value *args, size_t nargs, const int64_t *grid,
                    fl_error *err) {
  fl_error local;
  if (!err) err = &local;
  if (FL__UNLIKELY(!plan)) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "plan_null");
  if (FL__UNLIKELY(nargs != plan->nruntime))
    return fl__fail(err, FL_BAD_ARG_COUNT, true, "args_size_mismatch:%zu:%zu", nargs, plan->nruntime);
  if (FL__UNLIKELY(nargs && !args)) return fl__fail(err, FL_BAD_VALUE, false, "args_null");
  FL__LAUNCH_BUFFER(plan, buf);
  fl_status st = pack_runtime(plan, buf, args, err);
  if (FL__UNLIKELY(st != FL_OK)) return st;
  uint32_t g[3];
  st = launch_grid(plan, args, grid, g, err);
  if (FL__UNLIKELY(st != FL_OK)) return st;
  return submit_packed(plan, stream, buf, g, err);
}

bool fl_plan_takes_words(const fl_plan *plan) { return plan && plan->words; }

fl_status fl_launch_words(const fl_plan *plan, uint64_t stream, const uint64_t *words, size_t nwords,
                          const int64_t *grid, fl_error *err) {
  fl_error local;
  if (!err) err = &local;
  if (FL__UNLIKELY(!plan)) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "plan_null");
  if (FL__UNLIKELY(!plan->words)) return fl__fail(err, FL_UNSUPPORTED, true, "words_unsupported");
  if (FL__UNLIKELY(nwords != plan->nruntime))
    return fl__fail(err, FL_BAD_ARG_COUNT, true, "args_size_mismatch:%zu:%zu", nwords, plan->nruntime);
  if (FL__UNLIKELY(nwords && !words)) return fl__fail(err, FL_BAD_VALUE, false, "args_null");
  FL__LAUNCH_BUFFER(plan, buf);
  fl_status st = pack_words(plan, buf, words, err);
  if (FL__UNLIKELY(st != FL_OK)) return st;
  uint32_t g[3];
  st = words_grid(plan, words, grid, g, err);
  if (FL__UNLIKELY(st != FL_OK)) return st;
  return submit_packed(plan, stream, buf, g, err);
}

/* What a launch with these values would get as its grid (include/fastlaunch.h). */
fl_status fl_plan_resolve_grid(const fl_plan *plan, const fl_value *args, size_t nargs, const int64_t *grid,
                               uint32_t out[3], fl_error *err) {
  fl_error local;
  if (!err) err = &local;
  if (!plan) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "plan_null");
  if (nargs != plan->nruntime)
    return fl__fail(err, FL_BAD_ARG_COUNT, true, "args_size_mismatch:%zu:%zu", nargs, plan->nruntime);
  if (nargs && !args) return fl__fail(err, FL_BAD_VALUE, false, "args_null");
  return launch_grid(plan, args, grid, out, err);
}
