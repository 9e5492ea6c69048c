/* testing.c: fault injection for the exactly-once tests, by swapping the armed plan's submit table. */
#include "fl_internal.h"

#include <pthread.h>

/* The armed fault. Launches of the armed plan go through fault_backend (its submit_via), whose
 * submit decides per launch whether to fail; every other plan launches through its own backend,
 * so nothing here costs a launch that is not targeted. */
static atomic_int fault_point = FL_FAULT_NONE;
static atomic_uint fault_one_in = 1;
static atomic_ullong fault_state;
static atomic_ullong fault_fired;
static pthread_mutex_t arm_lock = PTHREAD_MUTEX_INITIALIZER;
static const fl_plan *armed_plan; /* holds a reference while armed; under arm_lock */

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
static fl_status fault_submit(const fl_plan *plan, uint64_t stream, const void *args, size_t size,
                              const uint32_t grid[3], fl_error *err) {
  int point = atomic_load(&fault_point);
  if (point == FL_FAULT_SUBMIT_AFTER) {
    fl_status st = plan->base->submit(plan, stream, args, size, grid, err);
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
  return plan->base->submit(plan, stream, args, size, grid, err);
}

/* Only its submit is ever read: grid limits and everything else come from the plan's own table. */
static const fl__backend fault_backend = {.name = "fault", .submit = fault_submit};

fl_status fl_fault_inject(fl_fault_point point, uint32_t one_in, uint64_t seed, const fl_plan *plan, fl_error *err) {
  if ((unsigned)point >= FL_FAULT_COUNT)
    return fl__fail(err, FL_BAD_VALUE, true, "fault_point_unknown:%d", (int)point);
  if (point == FL_FAULT_NONE || one_in == 0) plan = NULL;
  pthread_mutex_lock(&arm_lock);
  /* Disarm first, so a launch in flight never sees the new settings half-written. */
  const fl_plan *old = armed_plan;
  if (old) atomic_store(&((fl_plan *)old)->submit_via, old->base);
  atomic_store(&fault_point, FL_FAULT_NONE);
  atomic_store(&fault_one_in, one_in ? one_in : 1);
  atomic_store(&fault_state, seed * 0x9e3779b97f4a7c15ull + 1);
  atomic_store(&fault_fired, 0);
  armed_plan = plan;
  if (plan) {
    fl_plan_retain(plan);
    atomic_store(&fault_point, (int)point);
    atomic_store(&((fl_plan *)plan)->submit_via, &fault_backend);
  }
  pthread_mutex_unlock(&arm_lock);
  fl_plan_release(old); /* outside the lock: the last release may run an owner's release */
  fl__ok(err);
  return FL_OK;
}

uint64_t fl_fault_fired(void) { return atomic_load(&fault_fired); }
