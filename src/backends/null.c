/* null.c: the null backend, which validates and counts launches and runs nothing. */
#include "streams.h"

typedef struct null_stream {
  _Atomic uint64_t count;
} null_stream;

static fl_status null_load(fl_error *err) {
  fl__ok(err);
  return FL_OK;
}

static fl_status null_submit(const fl_plan *plan, uint64_t stream, const void *args, size_t size,
                             const uint32_t grid[3], fl_error *err) {
  (void)plan;
  (void)args;
  (void)grid;
  null_stream *s = fl__stream_enter(FL__STREAM_OWNER_NULL, stream);
  if (FL__UNLIKELY(!s)) return fl__stream_invalid(err, stream);
  if (FL__UNLIKELY(size > FL__MAX_ARGS_SIZE)) {
    fl__stream_leave(stream);
    return fl__fail(err, FL_UNSUPPORTED, true, "args_size_exceeds:%zu:%d", size, FL__MAX_ARGS_SIZE);
  }
  atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
  fl__stream_leave(stream);
  fl__ok(err);
  return FL_OK;
}

static fl_status null_stream_create(uint64_t *stream, fl_error *err) {
  if (!stream) return fl__fail(err, FL_BAD_VALUE, true, "stream_out_null");
  *stream = 0;
  null_stream *s = fl__malloc(sizeof *s);
  if (!s) return fl__fail(err, FL_NOMEM, false, "stream_alloc");
  atomic_init(&s->count, 0);
  fl_status st = fl__stream_register(FL__STREAM_OWNER_NULL, s, stream, err);
  if (st != FL_OK) {
    fl__free(s);
    return st;
  }
  fl__ok(err);
  return FL_OK;
}

/* Nothing runs, so there is nothing to wait for; the handle is still checked. */
static fl_status null_stream_synchronize(uint64_t stream, fl_error *err) {
  if (!fl__stream_enter(FL__STREAM_OWNER_NULL, stream)) return fl__stream_invalid(err, stream);
  fl__stream_leave(stream);
  fl__ok(err);
  return FL_OK;
}

static fl_status null_stream_destroy(uint64_t stream, fl_error *err) {
  null_stream *s = fl__stream_unregister(FL__STREAM_OWNER_NULL, stream);
  if (!s) return fl__stream_invalid(err, stream);
  fl__free(s);
  fl__ok(err);
  return FL_OK;
}

static fl_status null_stream_count(uint64_t stream, uint64_t *count, fl_error *err) {
  if (!count) return fl__fail(err, FL_BAD_VALUE, true, "count_out_null");
  null_stream *s = fl__stream_enter(FL__STREAM_OWNER_NULL, stream);
  if (!s) return fl__stream_invalid(err, stream);
  *count = atomic_load_explicit(&s->count, memory_order_relaxed);
  fl__stream_leave(stream);
  fl__ok(err);
  return FL_OK;
}

const fl__backend fl__backend_null = {
    .name = "null",
    /* It measures the launch path of any flavour: the plan's target says which. */
    .default_abi = FL_ABI_HOST,
    .abi_mask = (1u << FL_ABI_HOST) | (1u << FL_ABI_CUDA) | (1u << FL_ABI_NPU),
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
