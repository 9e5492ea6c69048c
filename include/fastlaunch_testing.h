/* fastlaunch_testing.h: hooks for tests, benchmarks and tools; not part of the launch contract.
 *
 * Nothing here is needed to build or launch a plan, and nothing here costs the launch path anything
 * while unused: fault injection swaps the backend table of the one plan it targets, so a plan that
 * is not targeted launches exactly as in a build without it. */
#ifndef FASTLAUNCH_TESTING_H
#define FASTLAUNCH_TESTING_H

#include "fastlaunch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Grid programs: the expressions a plan's grid is computed from (plans compile them through
 * fl_plan_desc.grid_exprs); alone, for tools and tests.
 * ------------------------------------------------------------------------------------------- */
typedef struct fl_grid_program fl_grid_program;

/* Compiles one expression. `names` (nnames entries, may be NULL) name the variables; $N names
 * variable N. The language is Python's integer expressions, with Python's precedence: decimal
 * literals, + - * // % << >>, unary + -, min(...), max(...), cdiv(a, b) and ceildiv(a, b) (ceiling
 * division), one comparison == != < <= > >= (1 when true, 0 when false; a chained a < b < c is
 * refused with "grid_expr_syntax:<offset>:chained comparison"), and the conditional `A if C else B`
 * (lowest precedence, right-associative), which evaluates only the branch C chooses, so
 * `0 if d == 0 else n // d` never divides by zero. Refuses anything outside the language with
 * FL_BAD_GRID_PROGRAM and a reason naming the position ("grid_expr_syntax:<offset>:expected 'else'"
 * and others). Operations on constants are folded at compile time when they succeed; one that would
 * fail (division by zero, overflow, negative shift) is kept and fails only if and when it is
 * evaluated, with the FL_GRID_EVAL error of the first failure in evaluation order. A constant
 * condition keeps only the branch it chooses. A program that reads no variable is evaluated once at
 * compile time and refused as "grid_expr_const_<error>" when that fails: `1 // 0` and
 * `n if 0 else 1 // 0` are refused, while `n + 1 // 0` compiles and fails with "grid_div_by_zero"
 * whenever it is evaluated. */
FL_EXTERN fl_status fl_grid_program_compile(const char *expr, const char *const *names, size_t nnames,
                                            fl_grid_program **program, fl_error *err);
/* Evaluates with Python's integer semantics on int64: floor division and modulo, arithmetic shifts;
 * division by zero and overflow are FL_GRID_EVAL errors. */
FL_EXTERN fl_status fl_grid_program_eval(const fl_grid_program *program, const int64_t *vars, size_t nvars,
                                         int64_t *out, fl_error *err);
/* True when the program refers to no variable; its value is then known at compile time. */
FL_EXTERN bool fl_grid_program_is_constant(const fl_grid_program *program);
/* The largest variable index used, plus one (0 for a constant program). */
FL_EXTERN size_t fl_grid_program_nvars(const fl_grid_program *program);
FL_EXTERN void fl_grid_program_free(fl_grid_program *program);

/* ---------------------------------------------------------------------------------------------
 * Fault injection, for tests of the exactly-once promise. When armed on a plan, each of that plan's
 * launches fails at `point` with probability 1/one_in (a deterministic sequence from `seed`). The
 * points before the submit boundary fail as ordinary refusals (nothing submitted);
 * FL_FAULT_SUBMIT_AFTER submits and then reports an error; FL_FAULT_SUBMIT_LOST submits nothing but
 * reports that it may have. One plan at a time: arming another, or FL_FAULT_NONE, disarms the
 * previous one.
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

/* Arms `point` on `plan` (NULL or FL_FAULT_NONE: disarms). FL_BAD_VALUE for an unknown point. */
FL_EXTERN fl_status fl_fault_inject(fl_fault_point point, uint32_t one_in, uint64_t seed, const fl_plan *plan,
                                    fl_error *err);
FL_EXTERN uint64_t fl_fault_fired(void); /* faults fired since the last fl_fault_inject */

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
