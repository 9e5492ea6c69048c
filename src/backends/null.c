/* null.c: the null backend, which validates and counts launches and runs nothing.
 *
 * Its per-stream state is one static word per stream slot: a 16-bit tag of the stream's
 * generation over a 48-bit launch count. A launch validates its handle, then counts with one
 * compare-and-swap that succeeds only while the word still carries its stream's tag, so a launch
 * racing with the stream's destruction is either counted before it or refused after it, never
 * counted on the slot's next stream. No allocation, no pinning: the launch path alone. */
#include "streams.h"

#define COUNT_BITS 48
#define COUNT_MASK ((UINT64_C(1) << COUNT_BITS) - 1)

/* One per process, as the stream handles it counts for are (streams.c). */
/* Each stream's word on a cache line of its own: threads launching on their own streams never write
 * the same line (the compare-and-swap below would otherwise bounce it between cores). */
typedef struct null_word {
  _Alignas(64) _Atomic uint64_t w;
} null_word;

typedef struct null_state {
  null_word words[FL__STREAM_SLOTS];
} null_state;
static null_state the_state;

/* 1..65535: never 0, the tag of a slot without a stream. */
static uint64_t tag_of(uint64_t handle) { return ((handle >> 16) % 0xffff) + 1; }

static fl_status null_load(const fl__backend *self, fl_error *err) {
  (void)self;
  fl__ok(err);
  return FL_OK;
}

static fl_status null_submit(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                             const uint32_t grid[3], fl_error *err) {
  (void)args;
  (void)grid;
  null_state *st = self->state;
  if (FL__UNLIKELY(!fl__stream_live(FL__STREAM_OWNER_NULL, stream))) return fl__stream_invalid(err, stream);
  if (FL__UNLIKELY(plan->layout.size > FL__MAX_ARGS_SIZE))
    return fl__fail(err, FL_UNSUPPORTED, true, "args_size_exceeds:%zu:%d", plan->layout.size, FL__MAX_ARGS_SIZE);
  _Atomic uint64_t *w = &st->words[fl__stream_slot(stream)].w;
  const uint64_t tag = tag_of(stream);
  uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
  do {
    if (FL__UNLIKELY(old >> COUNT_BITS != tag)) return fl__stream_invalid(err, stream); /* destroyed meanwhile */
    if (FL__UNLIKELY((old & COUNT_MASK) == COUNT_MASK))
      return fl__fail(err, FL_BACKEND_ERROR, false, "stream_count_overflow");
  } while (!atomic_compare_exchange_weak_explicit(w, &old, old + 1, memory_order_relaxed, memory_order_relaxed));
  fl__ok(err);
  return FL_OK;
}

static fl_status null_stream_create(const fl__backend *self, uint64_t *stream, fl_error *err) {
  null_state *ns = self->state;
  if (!stream) return fl__fail(err, FL_BAD_VALUE, true, "stream_out_null");
  *stream = 0;
  uint64_t h;
  fl_status st = fl__stream_register(FL__STREAM_OWNER_NULL, (void *)ns->words, &h, err);
  if (st != FL_OK) return st;
  /* Nobody launches on the handle before it is returned: the tag is in place first. */
  atomic_store(&ns->words[fl__stream_slot(h)].w, tag_of(h) << COUNT_BITS);
  *stream = h;
  fl__ok(err);
  return FL_OK;
}

/* Nothing runs, so there is nothing to wait for; the handle is still checked. */
static fl_status null_stream_synchronize(const fl__backend *self, uint64_t stream, fl_error *err) {
  (void)self;
  if (!fl__stream_live(FL__STREAM_OWNER_NULL, stream)) return fl__stream_invalid(err, stream);
  fl__ok(err);
  return FL_OK;
}

static fl_status null_stream_destroy(const fl__backend *self, uint64_t stream, fl_error *err) {
  null_state *ns = self->state;
  if (!fl__stream_live(FL__STREAM_OWNER_NULL, stream)) return fl__stream_invalid(err, stream);
  /* Untag the word before the slot is freed (a new stream may take the slot at once): one of two
   * concurrent destroys wins here, later launches are refused. */
  _Atomic uint64_t *w = &ns->words[fl__stream_slot(stream)].w;
  uint64_t old = atomic_load(w);
  do {
    if (old >> COUNT_BITS != tag_of(stream)) return fl__stream_invalid(err, stream);
  } while (!atomic_compare_exchange_weak(w, &old, 0));
  if (!fl__stream_unregister(FL__STREAM_OWNER_NULL, stream)) return fl__stream_invalid(err, stream);
  fl__ok(err);
  return FL_OK;
}

static fl_status null_stream_count(const fl__backend *self, uint64_t stream, uint64_t *count, fl_error *err) {
  null_state *ns = self->state;
  if (!count) return fl__fail(err, FL_BAD_VALUE, true, "count_out_null");
  if (!fl__stream_live(FL__STREAM_OWNER_NULL, stream)) return fl__stream_invalid(err, stream);
  uint64_t w = atomic_load_explicit(&ns->words[fl__stream_slot(stream)].w, memory_order_relaxed);
  if (w >> COUNT_BITS != tag_of(stream)) return fl__stream_invalid(err, stream);
  *count = w & COUNT_MASK;
  fl__ok(err);
  return FL_OK;
}

const fl__backend fl__backend_null = {
    .name = "null",
    .state = &the_state,
    /* It measures the launch path of any ABI: the plan's target says which. */
    .default_abi = FL_ABI_HOST,
    .abi_mask = (1u << FL_ABI_HOST) | (1u << FL_ABI_CUDA) | (1u << FL_ABI_NPU) | (1u << FL_ABI_HIP),
    .kernel = FL_KERNEL_NONE,
    .memory = FL_MEMORY_ANY,
    .grid_max = {INT32_MAX, INT32_MAX, INT32_MAX},
    .grid_max_product = 0,
    .grid_allow_zero = true,
    .max_args_size = FL__MAX_ARGS_SIZE,
    .load = null_load,
    .plan_init = NULL,
    .plan_fini = NULL,
    .submit = null_submit,
    .stream_create = null_stream_create,
    .stream_synchronize = null_stream_synchronize,
    .stream_destroy = null_stream_destroy,
    .stream_count = null_stream_count,
};
