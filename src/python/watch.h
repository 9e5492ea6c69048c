/* watch.h: what changed in a set of dicts since a dispatcher last looked (jit.c, autotune.c).
 * CPython 3.12+: one dict watcher per interpreter moves a process-wide epoch whenever any watched
 * dict changes (a spurious move only costs a dispatcher one revalidation). 3.10 and 3.11: the sum of
 * the dicts' version tags, recorded when the set was acknowledged. A dict's tag changes whenever
 * the dict does, to the next value of one process-wide counter, so a tag only ever grows and the
 * sum grows whenever any of the dicts changed: one add per dict and one compare per call. */
#ifndef FASTLAUNCH_WATCH_H
#define FASTLAUNCH_WATCH_H

#include "ext.h"

#if PY_VERSION_HEX >= 0x030C0000
#define FL_EXT_WATCHERS 1
extern uint64_t fl_ext_watch_epoch;
#else
#define FL_EXT_WATCHERS 0
#endif

/* Dict version tags (through 3.12; deprecated there, gone later): a dict's tag changes whenever the
 * dict is modified and tags are never reused. 0 where there are none. */
#if PY_VERSION_HEX < 0x030D0000
#define FL_EXT_DICT_VERSIONS 1
static inline uint64_t fl_ext_dict_version(PyObject *dict) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return ((PyDictObject *)dict)->ma_version_tag;
#pragma GCC diagnostic pop
}
#else
#define FL_EXT_DICT_VERSIONS 0
static inline uint64_t fl_ext_dict_version(PyObject *dict) {
  (void)dict;
  return 0;
}
#endif

typedef struct {
  PyObject *dicts;     /* tuple of dicts (a new reference) */
  PyObject **at;       /* 3.10, 3.11: its items (borrowed from the tuple) and their tags' sum */
  uint64_t sum;
  Py_ssize_t n;
  uint64_t epoch;      /* 3.12+: the epoch when last acknowledged */
  int force;           /* changed, whatever the dicts say */
} fl_ext_watch;

/* True when a watched dict may have changed since fl_ext_watch_set. */
static inline int fl_ext_watch_changed(const fl_ext_watch *w) {
  if (w->force) return 1;
#if FL_EXT_WATCHERS
  return w->epoch != fl_ext_watch_epoch;
#else
  PyObject *const *at = w->at;
  Py_ssize_t n = w->n, i = 0;
  if (n == 0) return 0;
  uint64_t sum = 0;
  for (; i + 4 <= n; i += 4) /* four at a time: two instructions a dict */
    sum += fl_ext_dict_version(at[i]) + fl_ext_dict_version(at[i + 1]) + fl_ext_dict_version(at[i + 2]) +
           fl_ext_dict_version(at[i + 3]);
  for (; i < n; i++) sum += fl_ext_dict_version(at[i]);
  return sum != w->sum;
#endif
}

/* A stamp of one dict (watched with fl_ext_watch_dict first): an unchanged stamp means the dict
 * is unchanged (3.12+: no watched dict changed at all; before: the dict's own version tag). */
static inline uint64_t fl_ext_dict_stamp(PyObject *dict) {
#if FL_EXT_WATCHERS
  (void)dict;
  return fl_ext_watch_epoch;
#else
  return fl_ext_dict_version(dict);
#endif
}
/* 3.12+: the interpreter's watcher watches `dict`; nothing before. 0, or -1 with an exception. */
int fl_ext_watch_dict(fl_ext_state *st, PyObject *dict);

/* Watches `dicts` (a tuple of dicts) from now on. 0, or -1 with an exception (then `force` stays
 * set, so the next call looks again). */
int fl_ext_watch_set(fl_ext_watch *w, fl_ext_state *st, PyObject *dicts);
void fl_ext_watch_free(fl_ext_watch *w);
/* The interpreter's dict watcher (3.12+; nothing before). 0, or -1 with an exception. */
int fl_ext_watch_init(fl_ext_state *st);

#endif
