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
extern uint64_t fl_ext_watch_epoch;  /* moves when any dict watched whole changes */
extern uint64_t fl_ext_watch_kepoch; /* moves when a keyed dict's key of interest is written (a second watcher) */
#else
#define FL_EXT_WATCHERS 0
#endif

/* The change detector in use: the dict watcher (3.12+), else the version tags' sum (3.10, 3.11, and
 * 3.12 when every watcher id is taken by other code), else none (3.13+ with no watcher id left: every
 * look says "changed"). fl_ext_watch_init sets it; fl_ext_watch_detector names it. */
enum { FL_WATCH_WATCHER, FL_WATCH_VERSIONS, FL_WATCH_NONE };
extern int fl_ext_watch_mode;

/* Dict version tags (through 3.12; deprecated there, gone later): a dict's tag changes whenever the
 * dict is modified and tags are never reused. 0 where there are none. 3.12 keeps its watchers' bits
 * in the tag's low 8 bits (a PyDict_Watch or Unwatch changes them): only the version part is read. */
#if PY_VERSION_HEX < 0x030D0000
#define FL_EXT_DICT_VERSIONS 1
static inline uint64_t fl_ext_dict_version(PyObject *dict) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#if FL_EXT_WATCHERS
  return ((PyDictObject *)dict)->ma_version_tag >> 8;
#else
  return ((PyDictObject *)dict)->ma_version_tag;
#endif
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
  PyObject **at;       /* the version tags' detector: the dicts (borrowed from the tuples) and their tags' sum */
  uint64_t sum;
  Py_ssize_t n;
  uint64_t epoch;      /* the watcher's: the epoch when last acknowledged (0 under another detector) */
  int force;           /* changed, whatever the dicts say */
  /* Dicts of which only some keys matter (a module's globals a kernel or its traced grid reads): a
   * tuple of (dict, names, values then), or NULL. A write to another key (a loop variable at module
   * level) is no change: the second watcher moves kepoch only for names of interest, and the version
   * tags' detector, seeing such a dict's tag move, compares the names' values. */
  PyObject *keyed;
  Py_ssize_t nk;       /* the version tags' detector: the keyed dicts, in `at` after the n others */
  uint64_t ksum, kepoch;
} fl_ext_watch;

/* The sum of n dicts' version tags. */
static inline uint64_t fl_ext_watch_sum(PyObject *const *at, Py_ssize_t n) {
  Py_ssize_t i = 0;
  uint64_t sum = 0;
  for (; i + 4 <= n; i += 4) /* four at a time: two instructions a dict */
    sum += fl_ext_dict_version(at[i]) + fl_ext_dict_version(at[i + 1]) + fl_ext_dict_version(at[i + 2]) +
           fl_ext_dict_version(at[i + 3]);
  for (; i < n; i++) sum += fl_ext_dict_version(at[i]);
  return sum;
}

/* Whether every name of every keyed dict holds the value it had (by identity). */
static inline int fl_ext_watch_keyed_hold(const fl_ext_watch *w) {
  if (!w->keyed) return 1;
  /* Held: a lookup can run a colliding key's __eq__, whose code may revalidate and replace it. */
  PyObject *keyed = Py_NewRef(w->keyed);
  int hold = 1;
  for (Py_ssize_t i = 0; hold && i < PyTuple_GET_SIZE(keyed); i++) {
    PyObject *entry = PyTuple_GET_ITEM(keyed, i);
    PyObject *d = PyTuple_GET_ITEM(entry, 0), *names = PyTuple_GET_ITEM(entry, 1), *vals = PyTuple_GET_ITEM(entry, 2);
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); j++) {
      PyObject *v = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(names, j)); /* borrowed: compared at once */
      if (!v && PyErr_Occurred()) PyErr_Clear();
      if ((v ? v : names) != PyTuple_GET_ITEM(vals, j)) { /* `names` stands for absent */
        hold = 0;
        break;
      }
    }
  }
  Py_DECREF(keyed);
  return hold;
}

/* Out of the launch path's way: a copy per file that calls it, never inlined there. */
static FL_EXT_COLD __attribute__((noinline, unused)) int fl_ext_watch_moved(fl_ext_watch *w) {
#if FL_EXT_WATCHERS
  if (fl_ext_watch_mode == FL_WATCH_WATCHER) {
    if (FL_EXT_LOAD(w->epoch) != FL_EXT_LOAD(fl_ext_watch_epoch) || !fl_ext_watch_keyed_hold(w)) return 1;
    /* a name of interest written elsewhere, or the same value again */
    FL_EXT_STORE(w->kepoch, FL_EXT_LOAD(fl_ext_watch_kepoch));
    return 0;
  }
  if (fl_ext_watch_mode == FL_WATCH_NONE) return 1;
#endif
  if (fl_ext_watch_sum(w->at, w->n) != w->sum || !fl_ext_watch_keyed_hold(w)) return 1;
  w->ksum = fl_ext_watch_sum(w->at + w->n, w->nk); /* another key of a keyed dict: no change */
  return 0;
}


/* True when a watched dict may have changed since fl_ext_watch_set. */
static inline int fl_ext_watch_changed(fl_ext_watch *w) {
  if (FL_EXT_LOAD(w->force)) return 1;
#if FL_EXT_WATCHERS
  if (FL_EXT_LIKELY(FL_EXT_LOAD(w->epoch) == FL_EXT_LOAD(fl_ext_watch_epoch) &&
                    FL_EXT_LOAD(w->kepoch) == FL_EXT_LOAD(fl_ext_watch_kepoch)))
    return 0;
  /* The epoch moved, or another detector is in use (its epoch is 0, never the watcher's). */
  return fl_ext_watch_moved(w);
#else
  if (FL_EXT_LIKELY(fl_ext_watch_sum(w->at, w->n) == w->sum &&
                    (w->nk == 0 || fl_ext_watch_sum(w->at + w->n, w->nk) == w->ksum)))
    return 0;
  return fl_ext_watch_moved(w);
#endif
}

/* A stamp of one dict (watched with fl_ext_watch_dict first): an unchanged stamp means the dict
 * is unchanged (the watcher: no watched dict changed at all; version tags: the dict's own tag; no
 * detector: a stamp never given twice). */
extern uint64_t fl_ext_watch_nonce; /* no detector: counts stamps, so none is given twice */
static inline uint64_t fl_ext_dict_stamp(PyObject *dict) {
#if FL_EXT_WATCHERS
  if (FL_EXT_UNLIKELY(fl_ext_watch_mode != FL_WATCH_WATCHER))
    return fl_ext_watch_mode == FL_WATCH_VERSIONS ? fl_ext_dict_version(dict) : __atomic_add_fetch(&fl_ext_watch_nonce, 1, __ATOMIC_RELAXED) | 1ull << 63;
  return FL_EXT_LOAD(fl_ext_watch_epoch);
#else
  return fl_ext_dict_version(dict);
#endif
}
/* 3.12+: the interpreter's watcher watches `dict`; nothing before. 0, or -1 with an exception. */
int fl_ext_watch_dict(fl_ext_state *st, PyObject *dict);

/* A tensor descriptor's dict, stamped so that an unchanged stamp means the dict was not modified nor
 * freed since: its version tag (through 3.12, where an attribute store, specialized or not, moves
 * it and tags are never reused); 0 where dicts have none. From 3.13 an attribute store on an
 * object's inline values can bypass the dict (no version tag, no watcher event seen: a descriptor
 * whose `base` was reassigned read as the old one, tma_fidelity under 3.13), so there each
 * descriptor is read in full. */
static inline int fl_ext_tmap_stamped(void) { return FL_EXT_DICT_VERSIONS; }
static inline uint64_t fl_ext_tmap_stamp(PyObject *dict) { return fl_ext_dict_version(dict); }

/* Watches `dicts` (a tuple of dicts) from now on. 0, or -1 with an exception (then `force` stays
 * set, so the next call looks again). */
int fl_ext_watch_set(fl_ext_watch *w, fl_ext_state *st, PyObject *dicts);
/* The keyed dicts: a tuple of (dict, tuple of str) or None; their names' values now are what later
 * looks compare with. Call after fl_ext_watch_set. 0, or -1 with an exception (force set). */
int fl_ext_watch_set_keyed(fl_ext_watch *w, fl_ext_state *st, PyObject *keyed);
void fl_ext_watch_free(fl_ext_watch *w);
/* The interpreter's dict watcher (3.12+; nothing before), or the detector that stands in when no
 * watcher id is left. Never fails: 0. */
int fl_ext_watch_init(fl_ext_state *st);
/* (detector, why): "watcher", "version_tags" or None (the JIT cannot tell a change: off), and why
 * the watcher is not in use (None when it is). */
PyObject *fl_ext_watch_detector(PyObject *module, PyObject *unused);

#endif
