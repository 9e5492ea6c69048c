/* tensor_door.h: the C function table the optional C++ module fastlaunch._tensor hands the C
 * extension through a capsule: a torch tensor's data pointer and device at torch's own speed. */
#ifndef FL_TENSOR_DOOR_H
#define FL_TENSOR_DOOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FL_TENSOR_DOOR_VERSION 5
#define FL_TENSOR_DOOR_CAPSULE "fastlaunch._tensor.door"

/* Where a tensor's memory lives: the values of fl_memory (fastlaunch.h), which the backends'
 * tables use to say what they take. */
enum { FL_TENSOR_HOST = 1, FL_TENSOR_CUDA = 2, FL_TENSOR_NPU = 3, FL_TENSOR_OTHER = 4 };

typedef struct fl_tensor_door {
  uint32_t version;          /* FL_TENSOR_DOOR_VERSION */
  const char *torch_version; /* torch.__version__ of the torch it was built against */
  /* 1: `obj` is a plain tensor or Parameter with storage, and *ptr, *where (FL_TENSOR_*) and
   * *index (the device index, -1 for none) are filled. 0: not one it takes (a subclass, an
   * undefined, meta or storage-less tensor, anything else): the caller uses data_ptr(). Never
   * raises a Python exception; no C++ exception leaves it. Called with the GIL held. */
  int (*unpack)(PyObject *obj, uint64_t *ptr, int *where, int *index);
  /* The same, and *dtype gets the tensor's scalar type (torch's c10::ScalarType, a small int): what
   * Triton's JIT specializes a tensor argument on, with its pointer's alignment. */
  int (*unpack_typed)(PyObject *obj, uint64_t *ptr, int *where, int *index, int *dtype);
  /* Many at once: the data pointer of objs[pos[j]], j < n, each a tensor `unpack` takes that lives
   * in `memory` (FL_TENSOR_*; 0: anywhere) on device `device` (-1: any index), goes to ptr[out[j]]
   * (ptr[j] when out is NULL), and, when dtype is not NULL, dtype[j] gets its scalar type. Returns
   * how many it read: at the first it does not take, it stops (n: all). Never raises. */
  size_t (*unpack_ptrs)(PyObject *const *objs, const uint32_t *pos, size_t n, int memory, int device, uint64_t *ptr,
                        const uint32_t *out, int *dtype);
  /* Where a torch.device says: 1 with *where and *index filled, 2 for the meta device, 0 when `obj`
   * is not a torch.device (exactly). What a wrapper's `.device` answers, at C speed (a fresh
   * torch.device's attributes cost hundreds of nanoseconds through Python). Never raises. */
  int (*device)(PyObject *obj, int *where, int *index);
} fl_tensor_door;

#ifdef __cplusplus
}
#endif
#endif
