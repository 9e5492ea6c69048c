/* testing.c: fault injection for the exactly-once tests, as a wrapper around each backend (testing
 * builds only). A plan created while its backend is wrapped (fl_fault_wrap) has the wrapper as its
 * table: a copy of the backend's with its own submit, which forwards every launch to the backend's
 * submit unless a fault is armed on that plan. Plans carry no test field, and a plan created while
 * its backend is not wrapped launches exactly as in a release build. */
#include "fl_internal.h"

#include <pthread.h>

/* The armed fault: its point, odds and sequence, and the plan it targets. */
static atomic_int fault_point = FL_FAULT_NONE;
static atomic_uint fault_one_in = 1;
static atomic_ullong fault_state;
static atomic_ullong fault_fired;
static pthread_mutex_t arm_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(const fl_plan *) armed_plan; /* holds a reference while armed; set under arm_lock */

/* True when the armed fault fires for this launch (a splitmix64 step per check). */
static bool fires(void) {
  uint64_t z = atomic_fetch_add(&fault_state, 0x9e3779b97f4a7c15ull) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  if (z % atomic_load(&fault_one_in) != 0) return false;
  atomic_fetch_add(&fault_fired, 1);
  return true;
}

/* Every point reports what the real stage would: the ones before the boundary fail as refusals
 * (nothing submitted), SUBMIT_AFTER submits and then fails, SUBMIT_LOST fails as if it might have. */
static fl_status fault_submit(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                              const uint32_t grid[3], fl_error *err) {
  (void)self; /* the wrapper: the backend's own table does the work */
  const fl__backend *real = fl__backend_builtin(plan->backend);
  if (atomic_load(&armed_plan) != plan) return real->submit(real, plan, stream, args, grid, err);
  int point = atomic_load(&fault_point);
  if (point == FL_FAULT_SUBMIT_AFTER) {
    fl_status st = real->submit(real, plan, stream, args, grid, err);
    if (st == FL_OK && fires()) return fl__fail_submitted(err, FL_BACKEND_ERROR, "fault_injected:submit_after");
    return st;
  }
  if (point != FL_FAULT_NONE && fires()) {
    switch (point) {
      case FL_FAULT_PACK:
        return fl__fail(err, FL_BAD_VALUE, false, "fault_injected:pack");
      case FL_FAULT_GRID:
        return fl__fail(err, FL_BAD_GRID, false, "fault_injected:grid");
      case FL_FAULT_SUBMIT_REFUSED:
        return fl__fail(err, FL_BAD_STREAM, false, "fault_injected:submit_refused");
      default:
        return fl__fail_submitted(err, FL_BACKEND_ERROR, "fault_injected:submit_lost");
    }
  }
  return real->submit(real, plan, stream, args, grid, err);
}

/* One wrapper per backend, filled once: the backend's table with fault_submit as its submit. They
 * are never written again, since plans made while wrapped keep pointing at them. */
static fl__backend wrappers[FL_BACKEND_COUNT];
static pthread_once_t wrappers_once = PTHREAD_ONCE_INIT;

static void fill_wrappers(void) {
  for (int b = 0; b < FL_BACKEND_COUNT; b++) {
    wrappers[b] = *fl__backend_builtin((fl_backend_id)b);
    wrappers[b].submit = fault_submit;
  }
}

fl_status fl_fault_wrap(fl_backend_id backend, bool on, fl_error *err) {
  if ((unsigned)backend >= FL_BACKEND_COUNT) return fl__fail(err, FL_BAD_VALUE, true, "backend_unknown:%d", (int)backend);
  pthread_once(&wrappers_once, fill_wrappers);
  fl__backend_wrap(backend, on ? &wrappers[backend] : NULL);
  fl__ok(err);
  return FL_OK;
}

fl_status fl_fault_inject(fl_fault_point point, uint32_t one_in, uint64_t seed, const fl_plan *plan, fl_error *err) {
  if ((unsigned)point >= FL_FAULT_COUNT)
    return fl__fail(err, FL_BAD_VALUE, true, "fault_point_unknown:%d", (int)point);
  if (point == FL_FAULT_NONE || one_in == 0) plan = NULL;
  if (plan && plan->base != &wrappers[plan->backend])
    return fl__fail(err, FL_BAD_VALUE, true, "fault_plan_not_wrapped:%s", plan->base->name);
  pthread_mutex_lock(&arm_lock);
  /* Disarm first, so a launch in flight never sees the new settings half-written. */
  const fl_plan *old = atomic_exchange(&armed_plan, NULL);
  atomic_store(&fault_point, FL_FAULT_NONE);
  atomic_store(&fault_one_in, one_in ? one_in : 1);
  atomic_store(&fault_state, seed * 0x9e3779b97f4a7c15ull + 1);
  atomic_store(&fault_fired, 0);
  if (plan) {
    fl_plan_retain(plan);
    atomic_store(&fault_point, (int)point);
    atomic_store(&armed_plan, plan);
  }
  pthread_mutex_unlock(&arm_lock);
  fl_plan_release(old); /* outside the lock: the last release may run an owner's release */
  fl__ok(err);
  return FL_OK;
}

uint64_t fl_fault_fired(void) { return atomic_load(&fault_fired); }
