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
  /* Parameter-array launches: the size of each parameter to record (0: 8 bytes). */
  unsigned param_sizes[64];
  unsigned char param_bytes[64][128];
  /* cuTensorMapEncodeTiled: calls, the last call's arguments and the map it wrote (a mix of every
   * argument the driver reads, bit 21 of its second word always set), a failure to return. */
  int tmap_calls, tmap_fail, driver_version;
  int tmap_type, tmap_interleave, tmap_swizzle, tmap_l2, tmap_fill;
  unsigned tmap_rank, tmap_box[5], tmap_estrides[5];
  unsigned long long tmap_address, tmap_dims[5], tmap_strides[5];
  unsigned long long tmap_map[16];
} fake_launch;

#endif
