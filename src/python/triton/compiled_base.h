/* compiled_base.h: a kept Triton CompiledKernel's launch (compiled.c: CompiledLaunch, and the
 * `compiled[grid]` call), shared with compiled_run.c (its `compiled.run(...)` called directly).
 * Private to src/python. */
#ifndef FL_COMPILED_BASE_H
#define FL_COMPILED_BASE_H

#include "call_args.h"
#include "jit_base.h"

typedef struct {
  PyObject_HEAD
  fl_ext_state *state;
  PyObject *kernel;        /* the CompiledKernel */
  PyObject *dispatcher;    /* its JITFunction's JitDispatcher, or NULL */
  PyObject *plan;          /* a Plan taking every parameter, or NULL: Triton's */
  PyObject *reason;        /* why Triton's (str), or NULL */
  PyObject *stock_getitem; /* Triton's CompiledKernel.__getitem__ */
  PyObject *spare;         /* the CompiledCall handed out while nobody else holds it */
  PyObject *stock_counts;  /* dict: reason -> calls given to Triton */
  size_t min_args;         /* the last kernel argument's position + 1: trailing constexprs may be left
                            * out, as Triton's launcher skips them (FlagGems passes none); every
                            * parameter where the launcher parses its arguments first */
  int parse_first;         /* Triton's launcher parses every argument by a format before the enter
                            * hook (Triton 3.5, 3.6): exactly one per parameter, scalars checked first */
  /* Global scratch (a kernel whose metadata asks for it): the plan's last nhidden arguments are the
   * launcher's trailing pointers, the first of them a buffer from the allocator Triton would call
   * (scratch_var: its ContextVar) of size x programs x num_ctas bytes per CTA; NULL: none. */
  PyObject *scratch_var;
  unsigned long long scratch_size, scratch_align;
  fl_ext_scratch_ints scratch_ints; /* the allocator's last size and stream ints */
  unsigned scratch_ctas;
  size_t nhidden;
  unsigned long long fast, stock, hooked;
} LaunchObject;

/* The type, set once at the module's init (compiled.c). */
extern PyTypeObject *fl_compiled_launch_type;

/* A kept compiled kernel's call with launch hooks, in its launcher's order (compiled[grid] with
 * Triton's knobs' hooks set, or compiled.run(...) with hooks passed): on a launcher that parses first
 * (Triton 3.5, 3.6) every value checked by its format, a refusal Triton's whole call (to_triton, no
 * hook called by us); then enter(metadata), the metadata made from the kernel and the knobs (given
 * NULL) or the call's own; then every value read for the launch (after enter on every version: a hook
 * may move a tensor's storage); the launch; exit(metadata). A value refused after enter goes to the
 * kernel's launcher told enter ran. The call's result, or NULL with an exception. */
typedef struct {
  LaunchObject *L;
  PyObject *grid;       /* compiled[grid]'s grid; unused with given hooks */
  const int64_t *g;
  uint64_t stream;
  PyObject *stream_obj; /* the stream as the call gave it, or NULL */
  PyObject *const *args; /* the caller's kernel arguments (as Triton's launcher gets them) */
  size_t nargs;
  PyObject *kwnames;
  PyObject *const *full; /* one per plan position (trailing constexprs filled) */
  size_t nfull;
  const fl_ext_given_hooks *given;
  PyObject *(*to_triton)(void *ctx, const char *why);
  void *ctx; /* to_triton's; NULL: this struct */
} fl_compiled_hooked_call;
/* Runs the hooked call through the launch sequence (sequence.h). */
PyObject *fl_compiled_hooked(const fl_compiled_hooked_call *c);

#endif
