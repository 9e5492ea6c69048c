/* fastlaunch_testing.h: hooks for tests, benchmarks and tools; not part of the launch contract.
 *
 * Nothing here is needed to build or launch a plan, and nothing here costs the launch path anything
 * while unused: fault injection wraps a backend for the plans created while it is wrapped, so a plan
 * created otherwise launches exactly as in a build without it. */
#ifndef FASTLAUNCH_TESTING_H
#define FASTLAUNCH_TESTING_H

#include "fastlaunch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Fault injection, for tests of the exactly-once promise. When armed on a plan, each of that plan's
 * launches fails at `point` with probability 1/one_in (a deterministic sequence from `seed`). The
 * points before the submit boundary fail as ordinary refusals (nothing submitted);
 * FL_FAULT_SUBMIT_AFTER submits and then reports an error; FL_FAULT_SUBMIT_LOST submits nothing but
 * reports that it may have. One plan at a time: arming another, or FL_FAULT_NONE, disarms the
 * previous one. Only a plan created while its backend was wrapped (fl_fault_wrap) can be armed: its
 * table is the wrapper, which forwards each launch to the backend's submit unless it is armed.
 * ------------------------------------------------------------------------------------------- */
typedef enum fl_fault_point {
  FL_FAULT_NONE,
  FL_FAULT_PACK,           /* BAD_VALUE "fault_injected:pack" */
  FL_FAULT_GRID,           /* BAD_GRID "fault_injected:grid" */
  FL_FAULT_SUBMIT_REFUSED, /* the backend refuses before enqueuing: "fault_injected:submit_refused" */
  FL_FAULT_SUBMIT_AFTER,   /* enqueued, then an error: backend_submitted */
  FL_FAULT_SUBMIT_LOST,    /* not enqueued, error says it may have been: backend_submitted */
  FL_FAULT_COUNT
} fl_fault_point;

/* Wraps `backend` (on) for the plans created from now on, or stops wrapping it (off: plans created
 * while it was wrapped stay wrapped). FL_BAD_VALUE "backend_unknown:<n>" for an unknown backend. */
FL_EXTERN fl_status fl_fault_wrap(fl_backend_id backend, bool on, fl_error *err);

/* Arms `point` on `plan` (NULL or FL_FAULT_NONE: disarms). FL_BAD_VALUE for an unknown point, and
 * "fault_plan_not_wrapped:<backend>" for a plan created while its backend was not wrapped. */
FL_EXTERN fl_status fl_fault_inject(fl_fault_point point, uint32_t one_in, uint64_t seed, const fl_plan *plan,
                                    fl_error *err);
FL_EXTERN uint64_t fl_fault_fired(void); /* faults fired since the last fl_fault_inject */

/* Plans created from now on (on) take pointers to any memory where their backend wants its
 * device's (fl_backend_info.memory is FL_MEMORY_ANY), for the stand-in drivers, which launch
 * nothing; off: plans created from then on check again. */
FL_EXTERN void fl_accept_any_memory(bool on);

/* ---------------------------------------------------------------------------------------------
 * Benchmarks.
 * ------------------------------------------------------------------------------------------- */
/* The backend's own floor: n launches of the plan's kernel straight through the device runtime
 * (for cuda: cuLaunchKernel with a parameter array over `packed`, a buffer laid out as the plan's),
 * timed in nanoseconds. FL_UNSUPPORTED for a backend that has no such loop. */
FL_EXTERN fl_status fl_bench_launch_loop(const fl_plan *plan, uint64_t stream, const void *packed,
                                         const uint32_t grid[3], uint64_t n, uint64_t *ns, fl_error *err);

/* A cubin (or PTX) image loaded into the current CUDA context, for tests that bring their own
 * binary (Triton kernels need none of this: their CUfunction goes into the plan as is). */
FL_EXTERN fl_status fl_cuda_module_load(const void *image, const char *name, void **function, void **module,
                                        fl_error *err);
FL_EXTERN void fl_cuda_module_unload(void *module);
/* The same through the hip backend's runtime (hipModuleLoadData of an hsaco image). */
FL_EXTERN fl_status fl_hip_module_load(const void *image, const char *name, void **function, void **module,
                                       fl_error *err);
FL_EXTERN void fl_hip_module_unload(void *module);

/* ---------------------------------------------------------------------------------------------
 * Conversions the packer uses, for reference tests; false when the finite value overflows the
 * format (infinities and NaN convert). fp16 rounds to nearest even (as Triton's PyFloat_Pack2);
 * bf16 is the upper half of the value converted to float, as Triton's launchers pack it.
 * ------------------------------------------------------------------------------------------- */
FL_EXTERN bool fl_double_to_fp16(double x, uint16_t *out);
FL_EXTERN bool fl_double_to_bf16(double x, uint16_t *out);

#ifdef __cplusplus
}
#endif
#endif /* FASTLAUNCH_TESTING_H */
