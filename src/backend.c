/* backend.c: the backend table and the public stream functions that dispatch through it. */
#include "fl_internal.h"

#include <string.h>

/* Each defined in its own file under src/backends/; this table is the one place that names them. */
extern const fl__backend fl__backend_host;
extern const fl__backend fl__backend_null;
extern const fl__backend fl__backend_cuda;
extern const fl__backend fl__backend_npu;
extern const fl__backend fl__backend_hip;

static const fl__backend *const backends[FL_BACKEND_COUNT] = {
    [FL_BACKEND_HOST] = &fl__backend_host,
    [FL_BACKEND_NULL] = &fl__backend_null,
    [FL_BACKEND_CUDA] = &fl__backend_cuda,
    [FL_BACKEND_NPU] = &fl__backend_npu,
    [FL_BACKEND_HIP] = &fl__backend_hip,
};

/* A table standing in for a backend in plans created from now on; read when a plan is made or a
 * backend is asked about, never by a launch (a plan keeps its table). */
static _Atomic(const fl__backend *) stand_in[FL_BACKEND_COUNT];

void fl__backend_stand_in(fl_backend_id backend, const fl__backend *table) {
  atomic_store(&stand_in[backend], table);
}

const fl__backend *fl__backend_builtin(fl_backend_id backend) { return backends[backend]; }

const fl__backend *fl__backend_get(fl_backend_id backend) {
  if ((unsigned)backend >= FL_BACKEND_COUNT) return NULL;
  const fl__backend *table = atomic_load(&stand_in[backend]);
  return table ? table : backends[backend];
}

/* The hooks are set once (the extension's import) and read only by launches that must wait. */
static _Atomic(fl_wait_begin_fn) wait_begin;
static _Atomic(fl_wait_end_fn) wait_end;

void fl_set_wait_hooks(fl_wait_begin_fn begin, fl_wait_end_fn end) {
  atomic_store(&wait_begin, begin && end ? begin : NULL);
  atomic_store(&wait_end, begin && end ? end : NULL);
}

void *fl__wait_begin(void) {
  fl_wait_begin_fn f = atomic_load(&wait_begin);
  return f ? f() : NULL;
}

void fl__wait_end(void *token) {
  fl_wait_end_fn f = atomic_load(&wait_end);
  if (f) f(token);
}

fl_status fl_backend_info_get(fl_backend_id backend, fl_backend_info *info, fl_error *err) {
  const fl__backend *be = fl__backend_get(backend);
  if (!be) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "backend_unknown:%d", (int)backend);
  if (!info) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "info_out_null");
  info->name = be->name;
  info->default_abi = be->default_abi;
  info->abi_mask = be->abi_mask;
  info->kernel = be->kernel;
  info->memory = be->memory;
  info->own_streams = be->stream_create != NULL;
  fl__ok(err);
  return FL_OK;
}

fl_status fl_backend_configure(fl_backend_id backend, const char *name, const char *value, fl_error *err) {
  fl_error local;
  if (!err) err = &local;
  const fl__backend *be = fl__backend_get(backend);
  if (!be) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "backend_unknown:%d", (int)backend);
  if (!name) return fl__fail(err, FL_BAD_VALUE, true, "setting_unknown:%s:(null)", be->name);
  if (!be->configure) return fl__fail(err, FL_BAD_VALUE, true, "setting_unknown:%s:%.40s", be->name, name);
  return be->configure(be, name, value, err);
}

void fl__load_once_run(fl__load_once *once, void (*load)(void *state), void *state) {
  if (atomic_load_explicit(&once->done, memory_order_acquire)) return;
  pthread_mutex_lock(&once->lock);
  if (!atomic_load_explicit(&once->done, memory_order_relaxed)) {
    load(state);
    atomic_store_explicit(&once->done, true, memory_order_release);
  }
  pthread_mutex_unlock(&once->lock);
}

fl_status fl__setting_path(fl__load_once *once, const char *backend, const char *name, const char *value,
                           char *dst, size_t n, fl_error *err) {
  if (!value || !*value || strlen(value) >= n)
    return fl__fail(err, FL_BAD_VALUE, true, "setting_invalid:%s:%s", backend, name);
  pthread_mutex_lock(&once->lock);
  fl_status st = FL_OK;
  if (!atomic_load_explicit(&once->done, memory_order_relaxed))
    memcpy(dst, value, strlen(value) + 1);
  else if (strcmp(dst, value) != 0)
    st = fl__fail(err, FL_UNSUPPORTED, true, "backend_loaded:%s:%s", backend, name);
  pthread_mutex_unlock(&once->lock);
  if (st == FL_OK) fl__ok(err);
  return st;
}

static fl_status get_loaded(fl_backend_id backend, const fl__backend **out, fl_error *err) {
  const fl__backend *be = fl__backend_get(backend);
  if (!be) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "backend_unknown:%d", (int)backend);
  fl_status st = be->load(be, err);
  if (st != FL_OK) return st;
  *out = be;
  return FL_OK;
}

fl_status fl_backend_load(fl_backend_id backend, fl_error *err) {
  const fl__backend *be = NULL;
  return get_loaded(backend, &be, err);
}

fl_status fl_stream_create(fl_backend_id backend, uint64_t *stream, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st = get_loaded(backend, &be, err);
  if (st != FL_OK) return st;
  if (!stream) return fl__fail(err, FL_BAD_STREAM, true, "stream_out_null");
  if (!be->stream_create)
    return fl__fail(err, FL_UNSUPPORTED, true, "stream_create_unsupported:%s", be->name);
  return be->stream_create(be, stream, err);
}

fl_status fl_stream_synchronize(fl_backend_id backend, uint64_t stream, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st = get_loaded(backend, &be, err);
  if (st != FL_OK) return st;
  if (!be->stream_synchronize)
    return fl__fail(err, FL_UNSUPPORTED, true, "stream_synchronize_unsupported:%s", be->name);
  return be->stream_synchronize(be, stream, err);
}

fl_status fl_stream_destroy(fl_backend_id backend, uint64_t stream, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st = get_loaded(backend, &be, err);
  if (st != FL_OK) return st;
  if (!be->stream_destroy)
    return fl__fail(err, FL_UNSUPPORTED, true, "stream_destroy_unsupported:%s", be->name);
  return be->stream_destroy(be, stream, err);
}

fl_status fl_stream_count(fl_backend_id backend, uint64_t stream, uint64_t *count, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st = get_loaded(backend, &be, err);
  if (st != FL_OK) return st;
  if (!count) return fl__fail(err, FL_BAD_STREAM, true, "count_out_null");
  if (!be->stream_count)
    return fl__fail(err, FL_UNSUPPORTED, true, "stream_count_unsupported:%s", be->name);
  return be->stream_count(be, stream, count, err);
}
