/* vadd.c: a host test kernel that adds two float vectors, one block per program. */
#include "fastlaunch.h"

/* The packed host buffer for kinds ptr ptr ptr i32 i32: natural alignment, as this struct. */
typedef struct vadd_args {
  const float *x;
  const float *y;
  float *out;
  int32_t n;
  int32_t block;
} vadd_args;

void vadd(const void *args, const fl_host_program *p) {
  const vadd_args *a = args;
  int64_t start = (int64_t)p->pid[0] * a->block;
  int64_t end = start + a->block < a->n ? start + a->block : a->n;
  for (int64_t i = start; i < end; i++) a->out[i] = a->x[i] + a->y[i];
}
