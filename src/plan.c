/* plan.c: building a launch plan once (layout, template; its grid in plan_grid.c) and its reference
 * counting. */
#include "plan_grid.h"

#include <stdio.h>
#include <string.h>

static void plan_free(fl_plan *plan) {
  if (!plan) return;
  if (plan->base && plan->base->plan_fini) plan->base->plan_fini(plan->base, plan);
  fl__tmap_plan_fini(plan);
  for (int d = 0; d < 3; d++) fl_grid_program_free(plan->grid_prog[d]);
  fl__free(plan->tmpl);
  fl__free(plan->offsets);
  fl__free(plan->fast);
  fl__free(plan->word_slots);
  fl__free(plan->kinds);
  fl__free(plan->name);
  fl__free(plan);
}

/* Names the grid language can refer to: identifiers that are neither Python keywords nor the
 * language's functions, each once. Anything else could never be named, or would be ambiguous. */
static bool is_reserved(const char *name) {
  static const char *const reserved[] = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
      "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
      "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
      "min", "max", "cdiv", "ceildiv"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    if (strcmp(name, reserved[i]) == 0) return true;
  return false;
}

static bool is_identifier(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (s++; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

static fl_status check_names(const char *const *names, size_t n, fl_error *err) {
  for (size_t i = 0; i < n; i++) {
    if (!names[i]) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "arg_name_null:%zu", i);
    if (!is_identifier(names[i]) || is_reserved(names[i]))
      return fl__fail(err, FL_BAD_DESCRIPTOR, true, "arg_name_invalid:%zu:%.40s", i, names[i]);
    /* Quadratic, once per plan; plans have at most FL__MAX_ARGS arguments. */
    for (size_t j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0)
        return fl__fail(err, FL_BAD_DESCRIPTOR, true, "arg_name_duplicate:%zu:%.40s", i, names[i]);
  }
  return FL_OK;
}

static fl_status check_desc(const fl_plan_desc *desc, const fl__backend **be_out, fl_error *err) {
  if (!desc) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "desc_null");
  const fl__backend *be = fl__backend_get(desc->backend);
  if (!be) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "backend_unknown:%d", (int)desc->backend);
  fl_status st = fl__target_check(&desc->target, err);
  if (st != FL_OK) return st;
  if (!(be->abi_mask & (1u << desc->target.abi)))
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_not_for_backend:%s:%s", fl_abi_name(desc->target.abi),
                    be->name);
  /* Before anything is allocated: a huge count is refused for what it is, not as a failed
   * allocation (which would read as retryable). */
  if (desc->nkinds > FL__MAX_ARGS)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "too_many_args:%zu:%d", desc->nkinds, FL__MAX_ARGS);
  if (desc->nkinds && !desc->kinds) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "kinds_null");
  if (desc->arg_names && (st = check_names(desc->arg_names, desc->nkinds, err)) != FL_OK) return st;
  if (desc->runtime_arg_count > desc->nkinds)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "runtime_arg_count_exceeds:%zu:%zu",
                    desc->runtime_arg_count, desc->nkinds);
  if (desc->runtime_arg_count < desc->nkinds && !desc->fixed_args)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "fixed_args_null:%zu", desc->nkinds - desc->runtime_arg_count);
  if (be->kernel != FL_KERNEL_NONE && !desc->kernel) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "kernel_null");
  if ((unsigned)desc->grid_mode > FL_GRID_PROGRAM)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "grid_mode_unknown:%d", (int)desc->grid_mode);
  *be_out = be;
  return FL_OK;
}

/* A words plan's slots: the whole words first, then the 32-bit ints (fl_launch_words). */
static fl_status plan_word_slots(fl_plan *plan, fl_error *err) {
  plan->word_slots = fl__calloc(plan->nruntime ? plan->nruntime : 1, sizeof *plan->word_slots);
  if (!plan->word_slots) return fl__fail(err, FL_NOMEM, false, "nomem:plan");
  size_t j = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < plan->nruntime; i++) {
      if ((plan->fast[i] == FL__FAST_S32) != (pass == 1)) continue;
      plan->word_slots[j].offset = (uint32_t)plan->offsets[i]; /* below FL__MAX_ARGS_SIZE */
      plan->word_slots[j++].index = (uint32_t)i;
    }
    if (pass == 0) plan->n_words8 = j;
  }
  return FL_OK;
}

/* The plan's name, kinds, layout and each runtime argument's inline packing (from its kind's row). */
static fl_status plan_arguments(fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  const size_t n = desc->nkinds ? desc->nkinds : 1;
  plan->name = fl__strdup(desc->name ? desc->name : "kernel");
  plan->kinds = fl__calloc(n, sizeof *plan->kinds);
  plan->offsets = fl__calloc(n, sizeof *plan->offsets);
  plan->fast = fl__calloc(n, sizeof *plan->fast);
  if (!plan->name || !plan->kinds || !plan->offsets || !plan->fast) return fl__fail(err, FL_NOMEM, false, "nomem:plan");
  fl_status st = fl_layout_compute(&desc->target, desc->kinds, desc->nkinds, &plan->layout, plan->offsets, err);
  if (st != FL_OK) return st;
  memcpy(plan->kinds, desc->kinds, desc->nkinds * sizeof *plan->kinds);
  plan->words = true;
  for (size_t i = 0; i < plan->nruntime; i++) {
    const fl__kind_row *row = &fl__kinds[plan->kinds[i]];
    size_t slot = fl__layout_kind_size(desc->target.abi, plan->kinds[i]);
    bool s32 = row->cls == FL__CLASS_INT && slot == 4 && row->max_pos == INT32_MAX && row->max_neg == 2147483648u;
    bool s64 = row->cls == FL__CLASS_INT && slot == 8 && row->max_pos == INT64_MAX;
    plan->fast[i] = row->cls == FL__CLASS_PTR    ? FL__FAST_PTR
                    : row->cls == FL__CLASS_TMAP ? FL__FAST_TMAP
                    : s32                        ? FL__FAST_S32
                    : s64                        ? FL__FAST_S64
                                                 : FL__FAST_NONE;
    plan->words = plan->words && plan->fast[i] != FL__FAST_NONE && plan->fast[i] != FL__FAST_TMAP;
  }
  return plan->words ? plan_word_slots(plan, err) : FL_OK;
}

fl_status fl_plan_create(const fl_plan_desc *desc, fl_plan **out, fl_error *err) {
  const fl__backend *be = NULL;
  fl_status st;
  if (!out) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "plan_out_null");
  *out = NULL;
  if ((st = check_desc(desc, &be, err)) != FL_OK) return st;
  if ((st = be->load(be, err)) != FL_OK) return st;

  fl_plan *plan = fl__calloc(1, sizeof *plan);
  if (!plan) return fl__fail(err, FL_NOMEM, false, "nomem:plan");
  plan->backend = desc->backend;
  plan->base = be;
  plan->target = desc->target;
  plan->kernel = desc->kernel;
  plan->nargs = desc->nkinds;
  plan->nruntime = desc->runtime_arg_count;
  plan->grid_mode = desc->grid_mode;
  /* A plan that clamps its block count to the core count launches any grid (npu ABI). */
  plan->grid_max_product =
      desc->target.abi == FL_ABI_NPU && desc->target.npu.clamp_blocks ? 0 : be->grid_max_product;
  atomic_init(&plan->refcount, 1);
  if ((st = plan_arguments(plan, desc, err)) != FL_OK || (st = fl__tmap_plan_init(plan, desc, err)) != FL_OK)
    goto error;
  if (plan->layout.size > be->max_args_size) {
    st = fl__fail(err, FL_UNSUPPORTED, true, "args_too_large:%zu:%zu", plan->layout.size, be->max_args_size);
    goto error;
  }
  /* At least FL__SMALL_ARGS bytes (zeros past layout.size): a launch copies a small template whole,
   * in a few moves of constant size. */
  plan->tmpl = fl__calloc(plan->layout.size > FL__SMALL_ARGS ? plan->layout.size : FL__SMALL_ARGS, 1);
  if (!plan->tmpl) {
    st = fl__fail(err, FL_NOMEM, false, "nomem:template");
    goto error;
  }
  /* Fixed arguments are packed once; a value that does not fit is a stable refusal of the plan. */
  for (size_t i = plan->nruntime; i < plan->nargs; i++) {
    if (fl__kinds[plan->kinds[i]].cls == FL__CLASS_PTR || fl__kinds[plan->kinds[i]].cls == FL__CLASS_TMAP) {
      st = fl__fail(err, FL_BAD_DESCRIPTOR, true, "fixed_%s_unsupported:%zu", fl_kind_name(plan->kinds[i]), i);
      goto error;
    }
    st = fl_pack_value(desc->target.abi, plan->kinds[i], &desc->fixed_args[i - plan->nruntime],
                       plan->tmpl + plan->offsets[i], i, err);
    if (st != FL_OK) {
      if (err) err->stable = true;
      goto error;
    }
  }
  if ((st = fl__plan_grid_build(plan, desc, err)) != FL_OK) goto error;
  if (plan->layout.ffts >= 0) memcpy(plan->tmpl + plan->layout.ffts, &desc->target.npu.ffts_addr, 8);
  if (be->plan_init && (st = be->plan_init(be, plan, desc, err)) != FL_OK) goto error;
  /* From here on the plan owns the kernel's owner; on failure the caller keeps it. */
  plan->owner = desc->owner;
  plan->owner_release = desc->owner_release;
  *out = plan;
  return FL_OK;
error:
  plan->base = NULL; /* plan_init did not run, or failed and cleaned up after itself */
  plan_free(plan);
  return st;
}

void fl_plan_retain(const fl_plan *plan) {
  if (plan) atomic_fetch_add_explicit(&((fl_plan *)plan)->refcount, 1, memory_order_relaxed);
}

void fl_plan_release(const fl_plan *cplan) {
  fl_plan *plan = (fl_plan *)cplan;
  if (!plan) return;
  if (atomic_fetch_sub_explicit(&plan->refcount, 1, memory_order_acq_rel) != 1) return;
  void *owner = plan->owner;
  void (*release)(void *) = plan->owner_release;
  plan_free(plan);
  if (release) release(owner);
}

const fl_layout *fl_plan_layout(const fl_plan *plan) { return plan ? &plan->layout : NULL; }
size_t fl_plan_nargs(const fl_plan *plan) { return plan ? plan->nargs : 0; }
size_t fl_plan_runtime_arg_count(const fl_plan *plan) { return plan ? plan->nruntime : 0; }
fl_backend_id fl_plan_backend(const fl_plan *plan) { return plan ? plan->backend : FL_BACKEND_COUNT; }
fl_abi fl_plan_abi(const fl_plan *plan) { return plan ? plan->target.abi : FL_ABI_COUNT; }
int fl_plan_device(const fl_plan *plan) {
  return plan && plan->base->plan_device ? plan->base->plan_device(plan->base, plan) : -1;
}
fl_grid_mode fl_plan_grid_mode(const fl_plan *plan) { return plan ? plan->grid_mode : FL_GRID_CALLER; }
const char *fl_plan_name(const fl_plan *plan) { return plan ? plan->name : NULL; }

size_t fl_plan_arg_offset(const fl_plan *plan, size_t index) {
  if (!plan || index >= plan->nargs) return SIZE_MAX;
  return plan->offsets[index];
}

fl_kind fl_plan_arg_kind(const fl_plan *plan, size_t index) {
  if (!plan || index >= plan->nargs) return FL_KIND_COUNT;
  return plan->kinds[index];
}

fl_status fl_plan_template(const fl_plan *plan, void *dst, size_t size, fl_error *err) {
  if (!plan) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "plan_null");
  if (!dst) return fl__fail(err, FL_BAD_VALUE, true, "template_dst_null");
  if (size < plan->layout.size)
    return fl__fail(err, FL_BAD_VALUE, true, "template_buffer_too_small:%zu:%zu", size, plan->layout.size);
  memcpy(dst, plan->tmpl, plan->layout.size);
  return FL_OK;
}
