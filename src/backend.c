/* backend.c: the backend table and the public stream functions that dispatch through it. */
#include "fl_internal.h"

static const fl__backend *const backends[FL_BACKEND_COUNT] = {
    [FL_BACKEND_HOST] = &fl__backend_host,
    [FL_BACKEND_NULL] = &fl__backend_null,
    [FL_BACKEND_CUDA] = &fl__backend_cuda,
    [FL_BACKEND_NPU] = &fl__backend_npu,
};

const fl__backend *fl__backend_get(int backend) {
  if (backend < 0 || backend >= FL_BACKEND_COUNT) return NULL;
  return backends[backend];
}

static fl_status get_loaded(int backend, const fl__backend **out, fl_error *err) {
  const fl__backend *be = fl__backend_get(backend);
  if (!be) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "backend_unknown:%d", backend);
  fl_status st = be->load(err);
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
  return be->stream_create(stream, err);
}

fl_status fl_stream_synchronize(fl_backend_id backend, uint64_t stream, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st = get_loaded(backend, &be, err);
  if (st != FL_OK) return st;
  if (!be->stream_synchronize)
    return fl__fail(err, FL_UNSUPPORTED, true, "stream_synchronize_unsupported:%s", be->name);
  return be->stream_synchronize(stream, err);
}

fl_status fl_stream_destroy(fl_backend_id backend, uint64_t stream, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st = get_loaded(backend, &be, err);
  if (st != FL_OK) return st;
  if (!be->stream_destroy)
    return fl__fail(err, FL_UNSUPPORTED, true, "stream_destroy_unsupported:%s", be->name);
  return be->stream_destroy(stream, err);
}

fl_status fl_stream_count(fl_backend_id backend, uint64_t stream, uint64_t *count, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st = get_loaded(backend, &be, err);
  if (st != FL_OK) return st;
  if (!count) return fl__fail(err, FL_BAD_STREAM, true, "count_out_null");
  if (!be->stream_count)
    return fl__fail(err, FL_UNSUPPORTED, true, "stream_count_unsupported:%s", be->name);
  return be->stream_count(stream, count, err);
}
