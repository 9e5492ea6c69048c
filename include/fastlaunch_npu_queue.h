/* fastlaunch_npu_queue.h: the table through which the npu backend enqueues launches on torch_npu's
 * task queue (the ABI between the C library and the C++ shim fastlaunch._npu_queue). */
#ifndef FASTLAUNCH_NPU_QUEUE_H
#define FASTLAUNCH_NPU_QUEUE_H

#include "fastlaunch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch_npu's task queue, for the npu backend: while torch_npu runs aten ops through its queue, a
 * launch straight onto the stream could overtake the ops queued before it. fastlaunch's optional
 * C++ shim (fastlaunch._npu_queue, over torch_npu's exported RunAclCall and
 * OpApiGetTaskQueueEnable) fills in this table and installs it; without one, npu launches go to
 * the stream directly (nothing else queues there).
 *
 * A queued launch is one block (an fl_npu_task followed by the packed bytes), allocated by the
 * backend, run once by the queue's thread through task->run, which launches and frees it. */
typedef struct fl_npu_task fl_npu_task;
struct fl_npu_task {
  int (*run)(fl_npu_task *task); /* launches, frees the block, returns the runtime's error code */
  const void *kernel;
  uint64_t stream;
  uint32_t blocks;
  uint32_t flags; /* the backend's own */
  uint32_t dyn_ubuf;
  uint32_t size;  /* bytes of packed arguments, right after this header (8-byte aligned) */
};
#define FL_NPU_QUEUE_VERSION 1
typedef struct fl_npu_queue {
  uint32_t version; /* FL_NPU_QUEUE_VERSION */
  /* The queue's mode now: 0 off (launch directly), 1 or 2 on (enqueue), -1 unusable: torch_npu is
   * loaded but its queue cannot be reached (then npu launches are refused before the boundary,
   * never launched out of order). */
  int (*mode)(void);
  const char *why;  /* what mode -1 means here, for messages */
  /* A name for the queue's records (the kernel's), made once per plan; NULL when it cannot be. */
  void *(*name_new)(const char *name);
  void (*name_free)(void *name);
  /* Enqueues `task` under `name` (from name_new, or NULL). 0: enqueued, task->run will be called
   * once; -1: nothing was enqueued (the task is the caller's again); -2: the queue failed after
   * the task was handed to it (it may run: the caller must not free it). `why` gets the reason. */
  int (*enqueue)(void *name, fl_npu_task *task, char *why, size_t why_size);
} fl_npu_queue;
/* Installs `queue` (NULL removes it) for plans launched from now on; the table must outlive every
 * launch. Returns FL_BAD_DESCRIPTOR "npu_queue_version:<v>" for a table of another version. */
FL_EXTERN fl_status fl_npu_set_queue(const fl_npu_queue *queue, fl_error *err);

#ifdef __cplusplus
}
#endif
#endif
