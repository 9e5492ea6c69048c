/* streams.h: the registry of stream handles that the host and null backends share. */
#ifndef FL_STREAMS_H
#define FL_STREAMS_H

#include "fl_internal.h"

/* A handle is (generation << 16) | (owner << 8) | slot. The generation comes from one global
 * counter that starts at 1, so handle 0 is never valid, a destroyed handle is never reissued, and a
 * handle of one backend is refused by the other. */
#define FL__STREAM_SLOTS 256

enum { FL__STREAM_OWNER_HOST = 1, FL__STREAM_OWNER_NULL = 2 };

/* Claims a free slot for `obj` and returns its new handle. BACKEND_ERROR "stream_table_full:256"
 * when every slot is taken. */
fl_status fl__stream_register(int owner, void *obj, uint64_t *handle, fl_error *err);

/* Validates `handle` without a lock and pins its slot: returns the stream's object, which stays
 * alive until the matching fl__stream_leave, or NULL (nothing to leave) when the handle is not a
 * live handle of `owner`. */
void *fl__stream_enter(int owner, uint64_t handle);
/* Whether `handle` is a live handle of `owner` at this instant, pinning nothing: for a backend
 * whose per-stream state is static (null). */
bool fl__stream_live(int owner, uint64_t handle);
static inline unsigned fl__stream_slot(uint64_t handle) { return (unsigned)(handle & (FL__STREAM_SLOTS - 1)); }
void fl__stream_leave(uint64_t handle);

/* Invalidates `handle` so that every later enter fails, waits until no caller is inside, frees the
 * slot and returns the object for the caller to tear down; NULL when the handle was not live (a
 * concurrent unregister of the same handle gets NULL too). */
void *fl__stream_unregister(int owner, uint64_t handle);

/* The BAD_STREAM report for a handle that did not validate. */
fl_status fl__stream_invalid(fl_error *err, uint64_t handle);

#endif /* FL_STREAMS_H */
