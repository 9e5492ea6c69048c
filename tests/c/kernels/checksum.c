/* checksum.c: host test kernels that add values into shared accumulators. */
#include "fastlaunch.h"

#include <time.h>

/* Kinds ptr i64 i32: the accumulator, a value, a multiplier fixed in the plan. Several streams
 * add into one accumulator, hence the atomic add. Program x adds value * mult * (x + 1). */
typedef struct checksum_args {
  uint64_t *acc;
  int64_t value;
  int32_t mult;
} checksum_args;

void checksum(const void *args, const fl_host_program *p) {
  const checksum_args *a = args;
  uint64_t add = (uint64_t)a->value * (uint64_t)(int64_t)a->mult * (uint64_t)(p->pid[0] + 1);
  __atomic_fetch_add(a->acc, add, __ATOMIC_RELAXED);
}

/* Kinds ptr ptr i64: a gate, a sum, a value. Waits until the gate opens, then adds the value; the
 * first launch holds the worker so that the queue fills up behind it. */
typedef struct gated_args {
  const int32_t *gate;
  int64_t *sum;
  int64_t value;
} gated_args;

void gated_add(const void *args, const fl_host_program *p) {
  (void)p;
  const gated_args *a = args;
  while (!__atomic_load_n(a->gate, __ATOMIC_ACQUIRE)) {
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  *a->sum += a->value;
}
