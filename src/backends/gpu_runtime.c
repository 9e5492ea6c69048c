/* gpu_runtime.c: the loading, settings and plan bookkeeping the cuda and hip backends share. */
#include "gpu_runtime.h"

#include "../dl.h"

#include <string.h>

bool fl__gpu_open_library(fl__gpu_runtime *rt, const char *const *names) {
  const char *const custom[] = {rt->library, NULL};
  rt->lib = fl__dl_open(rt->library[0] ? custom : names, rt->load_why, sizeof rt->load_why);
  return rt->lib != NULL;
}

bool fl__gpu_sym(fl__gpu_runtime *rt, void **slot, const char *name) {
  *slot = fl__dl_sym(rt->lib, name, rt->load_why, sizeof rt->load_why);
  return *slot != NULL;
}

static void open_runtime(void *state) {
  fl__gpu_runtime *rt = state;
  rt->open(rt);
}

fl_status fl__gpu_load(const fl__backend *self, fl_error *err) {
  fl__gpu_runtime *rt = self->state;
  fl__load_once_run(&rt->once, open_runtime, rt);
  if (rt->load_status != FL_OK)
    return fl__fail(err, FL_BACKEND_UNAVAILABLE, true, "backend_unavailable:%s:%s", rt->vendor, rt->load_why);
  return FL_OK;
}

void *fl__gpu_symbol(const fl__backend *self, const char *name) {
  fl__gpu_runtime *rt = self->state;
  if (fl__gpu_load(self, NULL) != FL_OK) return NULL;
  return fl__dl_sym(rt->lib, name, NULL, 0);
}

fl_status fl__gpu_configure(const fl__backend *self, const char *name, const char *value, fl_error *err) {
  fl__gpu_runtime *rt = self->state;
  if (strcmp(name, "library") == 0)
    return fl__setting_path(&rt->once, rt->vendor, name, value, rt->library, sizeof rt->library, err);
  if (strcmp(name, "params") != 0)
    return fl__fail(err, FL_BAD_VALUE, true, "setting_unknown:%s:%.40s", rt->vendor, name);
  if (!value || (strcmp(value, "array") != 0 && strcmp(value, "packed") != 0))
    return fl__fail(err, FL_BAD_VALUE, true, "setting_invalid:%s:params", rt->vendor);
  bool array = strcmp(value, "array") == 0;
  pthread_mutex_lock(&rt->once.lock);
  if (!atomic_load_explicit(&rt->once.done, memory_order_relaxed)) rt->use_param_array = array;
  bool same = rt->use_param_array == array;
  pthread_mutex_unlock(&rt->once.lock);
  if (!same) return fl__fail(err, FL_UNSUPPORTED, true, "backend_loaded:%s:params", rt->vendor);
  fl__ok(err);
  return FL_OK;
}

int fl__gpu_plan_device(const fl__backend *self, const fl_plan *plan) {
  (void)self;
  return ((const fl__gpu_plan *)plan->backend_data)->device;
}

void fl__gpu_plan_fini(const fl__backend *self, fl_plan *plan) {
  (void)self;
  fl__free(plan->backend_data);
  plan->backend_data = NULL;
}
