/* streams.c: a fixed table of stream slots whose handles are validated without a lock. */
#include "streams.h"

#include <inttypes.h>
#include <time.h>

#define SLOT_BITS 8
#define OWNER_SHIFT 8
#define GEN_SHIFT 16

/* Each slot sits on its own cache line so that launches on different streams do not contend. */
typedef struct slot {
  _Alignas(64) _Atomic uint64_t handle; /* the live handle, 0 while the slot is free or closing */
  atomic_uint users;                    /* callers between enter and leave */
  atomic_bool taken;                    /* reserved by register until unregister is done */
  _Atomic(void *) obj;
} slot;

static slot table[FL__STREAM_SLOTS];
static _Atomic uint64_t next_gen = 1;
/* Where the next search for a free slot starts, so that freed slots are not reused at once. */
static atomic_uint next_slot = 0;

fl_status fl__stream_register(int owner, void *obj, uint64_t *handle, fl_error *err) {
  unsigned start = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
  for (unsigned i = 0; i < FL__STREAM_SLOTS; i++) {
    unsigned index = (start + i) % FL__STREAM_SLOTS;
    slot *s = &table[index];
    bool expected = false;
    if (!atomic_compare_exchange_strong(&s->taken, &expected, true)) continue;
    uint64_t gen = atomic_fetch_add_explicit(&next_gen, 1, memory_order_relaxed);
    uint64_t h = (gen << GEN_SHIFT) | ((uint64_t)owner << OWNER_SHIFT) | index;
    atomic_store_explicit(&s->obj, obj, memory_order_relaxed);
    /* Publishing the handle last makes the object visible to whoever validates it. */
    atomic_store(&s->handle, h);
    *handle = h;
    return FL_OK;
  }
  return fl__fail(err, FL_BACKEND_ERROR, false, "stream_table_full:%d", FL__STREAM_SLOTS);
}

/* Whether `handle` has the shape of one `owner` issued (its slot says whether it is still live). */
static inline bool issued_by(int owner, uint64_t handle) {
  return (int)((handle >> OWNER_SHIFT) & 0xff) == owner && (handle >> GEN_SHIFT) != 0;
}

void *fl__stream_enter(int owner, uint64_t handle) {
  if (!issued_by(owner, handle)) return NULL;
  slot *s = &table[handle & ((1u << SLOT_BITS) - 1)];
  /* Announce first, then check: unregister clears the handle first, then waits for users, so
   * (all four being sequentially consistent) either it sees this user or this user sees the
   * cleared handle. */
  atomic_fetch_add(&s->users, 1);
  if (FL__UNLIKELY(atomic_load(&s->handle) != handle)) {
    atomic_fetch_sub_explicit(&s->users, 1, memory_order_release);
    return NULL;
  }
  return atomic_load_explicit(&s->obj, memory_order_relaxed);
}

bool fl__stream_live(int owner, uint64_t handle) {
  if (!issued_by(owner, handle)) return false;
  return atomic_load_explicit(&table[fl__stream_slot(handle)].handle, memory_order_acquire) == handle;
}

void fl__stream_leave(uint64_t handle) {
  slot *s = &table[handle & ((1u << SLOT_BITS) - 1)];
  atomic_fetch_sub_explicit(&s->users, 1, memory_order_release);
}

void *fl__stream_unregister(int owner, uint64_t handle) {
  if (!issued_by(owner, handle)) return NULL;
  slot *s = &table[handle & ((1u << SLOT_BITS) - 1)];
  uint64_t expected = handle;
  if (!atomic_compare_exchange_strong(&s->handle, &expected, 0)) return NULL;
  /* Callers already inside finish what they started (a blocked submit waits for the worker, which
   * keeps draining). Callers with a stale handle only touch the counter for an instant. */
  while (atomic_load(&s->users) != 0) {
    struct timespec pause = {0, 20000};
    nanosleep(&pause, NULL);
  }
  void *obj = atomic_load_explicit(&s->obj, memory_order_relaxed);
  atomic_store_explicit(&s->obj, NULL, memory_order_relaxed);
  atomic_store_explicit(&s->taken, false, memory_order_release);
  return obj;
}

fl_status fl__stream_invalid(fl_error *err, uint64_t handle) {
  return fl__fail(err, FL_BAD_STREAM, false, "stream_invalid:0x%" PRIx64, handle);
}
