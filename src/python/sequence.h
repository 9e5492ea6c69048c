/* sequence.h: the launch sequence (sequence.c), the one every launch form goes through from its
 * binding of the call to the submit, in the order Triton's run and launcher follow on every version
 * fastlaunch serves (3.5 to 3.9; where they differ, the step says so):
 *
 *   1. check     every value read and checked by the launcher's format before anything of the call
 *                runs: on a launcher that parses first (Triton 3.5, 3.6: its scalars parsed before
 *                the enter hook), and before an allocator (a refusal then is Triton's whole call,
 *                the allocator not called by fastlaunch)
 *   2. allocate  the global scratch: the allocator triton.set_allocator set (Python code), called
 *                with the launch's size, alignment and stream; its buffer held until the launch returns
 *   3. enter     the kernel's launch_metadata(grid, stream, *args), the hooks read from the knobs
 *                (or the call's own: compiled.run(...)), enter(metadata) (Python code)
 *   4. read      every value read for the launch, after 2 and 3 (either may have moved a tensor's
 *                storage or changed an argument; Triton's launcher reads them after both)
 *   5. launch    the submit
 *   6. exit      exit(metadata); an error after 3 leaves it uncalled, as Triton's launcher does
 *
 * Before the sequence come the form's own steps, in Triton's run's order: the pre-run hooks, the
 * device and the stream, the binding and the key, the grid (jit.c for the JIT; the other forms have
 * none of them but the grid). A call refused at 1 is handed whole to Triton (its run or its
 * launcher); refused at 4 after 3, to the kernel's launcher told enter ran; refused at 4 after 2 only,
 * to Triton's launcher, which allocates again; nothing is ever submitted twice.
 *
 * Contract: across each call into Python (2, 3, and a read's data_ptr() or descriptor attributes)
 * the sequence holds the kernel, the metadata, the exit hook, the stream object and the buffer; it
 * holds nothing of the form's (the form's read holds what it reads), and after them it reads every
 * value again (4). The launch values live in s->values (the form's: on the stack, or on the heap
 * past FL_EXT_STACK_VALUES, decided once by call_args.h's fl_ext_values) or in s->words.
 *
 * The forms and their reads: kernel[grid] and fn.run, the Autotuner's and the Heuristics' through
 * them (jit.c, jit_launch.c: the key pass's values, read again through the binding or the memo), a
 * kept CompiledKernel[grid] and CompiledKernel.run (compiled.c, compiled_run.c) and Inductor's
 * FinalizedLaunch (entry.c), these three through fl_seq_plan (a plan's positional values). A call
 * with no hook and no scratch runs no Python code between its read and its launch: each form reads
 * and launches inline (call_args.h's fl_ext_plan_launch, the memo's words), the sequence with steps
 * 1, 2, 3 and 6 empty. Private to src/python. */
#ifndef FL_SEQUENCE_H
#define FL_SEQUENCE_H

#include "ext.h"

/* ---- launch hooks (steps 3 and 6) ---- */
/* enter: the kernel's launch_metadata(grid, stream, *args) and both hooks read, then enter called:
 * 0 (launch now, then exit or hand_back), or -1 with an exception (nothing launched, h released).
 * exit: calls the exit hook after the launch (0, or -1 with its exception). hand_back: the kernel's
 * own launcher, told enter was called, for a call the plan refused after enter; its result. Both
 * release h; release alone after an error past enter (exit is not called, as in Triton). */
#define FL_EXT_HOOK_MAX_ARGS 256
typedef struct {
  PyObject *md, *exit_hook, *stream;
} fl_ext_hooks;
/* Hooks the call passed itself (compiled.run(..., launch_metadata, enter, exit, ...)): h filled from
 * them, enter(metadata) called. 0, or -1 with enter's exception (h released). */
typedef struct {
  PyObject *md, *enter, *exit;
} fl_ext_given_hooks;
int fl_ext_hooks_given(const fl_ext_given_hooks *given, PyObject *stream_obj, fl_ext_hooks *h);
int fl_ext_hooks_enter(fl_ext_state *st, PyObject *kernel, PyObject *grid, uint64_t stream, PyObject *stream_obj,
                       PyObject *const *args, size_t nargs, fl_ext_hooks *h);
int fl_ext_hooks_exit(fl_ext_hooks *h);
PyObject *fl_ext_hooks_hand_back(fl_ext_hooks *h, PyObject *kernel, const int64_t g[3], PyObject *const *args,
                                 size_t nargs);
void fl_ext_hooks_release(fl_ext_hooks *h);
/* Triton's run from the launch on, for a call fastlaunch read the device, stream and grid of and then
 * hands back after Python code ran (a grid callable that switched the device or stream): the
 * metadata, the hooks read, the kernel's launcher called with them and with the stream and grid read
 * before (never read again, as Triton's run reads them once). Its result, or NULL. */
PyObject *fl_ext_launcher_tail(fl_ext_state *st, PyObject *kernel, PyObject *grid, const int64_t g[3], uint64_t stream,
                               PyObject *const *args, size_t nargs);

/* ---- global scratch (step 2) ---- */
/* A launch's global scratch, as its launcher allocates it: the allocator's ContextVar, bytes per CTA,
 * alignment, num_ctas, the launch's trailing pointers (the first of them the buffer's address), and
 * the ints last given to the allocator (kept by the owner). */
typedef struct {
  PyObject *var;
  uint64_t size, align;
  unsigned ctas;
  size_t nhidden;
  fl_ext_scratch_ints *ints;
} fl_ext_scratch_ref;
/* The global scratch of a launch (grid g): the allocator in ContextVar `var` called as Triton calls
 * it, *buf the buffer (held by the caller until the launch returns), *addr its address. 0, or -1
 * with an exception (the allocator's own; Triton's errors for a buffer without an address). */
int fl_ext_scratch_alloc(fl_ext_state *st, const fl_ext_scratch_ref *sc, const int64_t g[3], uint64_t stream,
                         PyObject *stream_obj, PyObject **buf, uint64_t *addr);

/* ---- the sequence ---- */
typedef struct fl_seq fl_seq;
enum { FL_SEQ_CHECK, FL_SEQ_READ };
/* A form's read (its binding into the sequence): the launch values into s->values (or s->words), for
 * step 1 (FL_SEQ_CHECK: checked against the kinds, as the launcher's format checks them) or step 4
 * (FL_SEQ_READ). 0; 1 refused, err's reason says why; -1 with an exception that propagates; -2 with
 * an argument's own exception (Triton's reader meets it itself). */
typedef int (*fl_seq_read_fn)(fl_seq *s, int pass, fl_error *err);

struct fl_seq {
  fl_seq_read_fn read;
  void *call;            /* the form's call, for its read */
  fl_PlanObject *plan;   /* the plan launched (its names in a failed submit's error) */
  fl_value *values;      /* the launch's values, or */
  uint64_t *words;       /* its words (the plan takes words; the memo read them), else NULL */
  size_t n;              /* how many */
  uint64_t stream;
  PyObject *stream_obj;  /* the stream as the call gave it, or NULL (given to the allocator and hooks) */
  int64_t g[3];          /* the grid (fl_seq_plan: resolved at the first read) */
  int check;             /* step 1 (always with scratch) */
  const fl_ext_scratch_ref *scratch; /* step 2, or NULL */
  int hooks;             /* steps 3 and 6 */
  PyObject *kernel;      /* the kernel given to launch_metadata and a hand-back (held here while used) */
  PyObject *grid;        /* the grid object launch_metadata gets */
  const fl_ext_given_hooks *given; /* the call's own hooks, or NULL: the knobs' */
  PyObject *const *args; /* the launcher's kernel arguments: launch_metadata's and a hand-back's */
  size_t nargs;
  PyObject *result;      /* FL_SEQ_HANDED: the launcher's result (new reference) */
};

enum {
  FL_SEQ_LAUNCHED = 0,
  FL_SEQ_REFUSED = 1,          /* at 1 (or hooks with scratch): nothing ran, Triton's whole call */
  FL_SEQ_LATE = 2,             /* at 4 after 2 without hooks: Triton's call (it allocates again) */
  FL_SEQ_HANDED = 3,           /* at 4 after 3: handed to the kernel's launcher told enter ran */
  FL_SEQ_RAISED = -1,          /* an exception: a hook's, the allocator's, a read's, a failed submit */
  FL_SEQ_ARG_RAISED = -2,      /* an argument's own exception at 1, set */
  FL_SEQ_ARG_RAISED_LATE = -3, /* the same at 4 after 2, set */
  FL_SEQ_EXIT_RAISED = -4,     /* launched, then the exit hook raised (its exception set) */
};
/* Runs the sequence for s (its form's fields set; hooks with scratch are refused at once: Triton
 * allocates before enter, so a hand-back after enter would allocate twice). err's reason says why a
 * call was refused ("argument_raised" for an argument's exception at 4 after 3). */
int fl_seq_run(fl_seq *s, fl_error *err);

/* The sequence for a plan's positional call (a kept compiled kernel, the Inductor entry): `full` one
 * object per call position (None at the trailing scratch pointers), `grid` the launch's (NULL: the
 * plan's own, resolved from the values at the first read: the allocator's buffer is sized for it).
 * Sets s's read, values and grid, the values where fl_ext_values puts them. Returns as fl_seq_run. */
int fl_seq_plan(fl_seq *s, PyObject *const *full, size_t nfull, const int64_t *grid, fl_error *err);

#endif
