/* fake_cuda.h: what the stand-in libcuda records about each call, shared by the fake and its test. */
#ifndef FL_FAKE_CUDA_H
#define FL_FAKE_CUDA_H

#include <stddef.h>

typedef struct fake_launch {
  int calls, ex_calls;
  unsigned grid[3], block[3], shared;
  void *stream, *function;
  void **params, **extra;
  unsigned char buffer[4096];
  size_t buffer_size;
  unsigned char param_copies[64][8];
  int nattrs;
  int attr_ids[8];
  unsigned attr_vals[8][3];
  int set_attr_calls;
  int last_set_attr, last_set_value;
  int fail_next;  /* return this error from the next launch */
  int no_context; /* cuCtxGetCurrent reports no current context */
  int context;    /* cuCtxGetCurrent's context otherwise: 0x1 + context */
} fake_launch;

#endif
