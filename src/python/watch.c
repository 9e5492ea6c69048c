/* watch.c: see watch.h. */
#include "watch.h"

#if FL_EXT_WATCHERS
uint64_t fl_ext_watch_epoch = 1;

static int watch_callback(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value) {
  (void)event, (void)dict, (void)key, (void)new_value;
  fl_ext_watch_epoch++;
  return 0;
}
#endif

int fl_ext_watch_init(fl_ext_state *st) {
#if FL_EXT_WATCHERS
  st->dict_watcher = PyDict_AddWatcher(watch_callback);
  return st->dict_watcher < 0 ? -1 : 0;
#else
  (void)st;
  return 0;
#endif
}

int fl_ext_watch_set(fl_ext_watch *w, fl_ext_state *st, PyObject *dicts) {
  w->force = 1;
  if (!PyTuple_Check(dicts)) return PyErr_SetString(PyExc_TypeError, "watched: expected a tuple of dicts"), -1;
  Py_ssize_t n = PyTuple_GET_SIZE(dicts);
  for (Py_ssize_t i = 0; i < n; i++)
    if (!PyDict_Check(PyTuple_GET_ITEM(dicts, i)))
      return PyErr_Format(PyExc_TypeError, "watched[%zd]: expected a dict", i), -1;
  Py_XSETREF(w->dicts, Py_NewRef(dicts));
#if FL_EXT_WATCHERS
  for (Py_ssize_t i = 0; i < n; i++)
    if (PyDict_Watch(st->dict_watcher, PyTuple_GET_ITEM(dicts, i)) < 0) return -1;
  w->epoch = fl_ext_watch_epoch;
#else
  (void)st;
  w->n = 0;
  PyObject **at = PyMem_Realloc(w->at, (size_t)(n ? n : 1) * sizeof *at);
  if (!at) return PyErr_NoMemory(), -1;
  w->at = at;
  w->sum = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    at[i] = PyTuple_GET_ITEM(dicts, i);
    w->sum += fl_ext_dict_version(at[i]);
  }
  w->n = n;
#endif
  w->force = 0;
  return 0;
}

int fl_ext_watch_dict(fl_ext_state *st, PyObject *dict) {
#if FL_EXT_WATCHERS
  return PyDict_Watch(st->dict_watcher, dict);
#else
  (void)st, (void)dict;
  return 0;
#endif
}

void fl_ext_watch_free(fl_ext_watch *w) {
  Py_CLEAR(w->dicts);
  PyMem_Free(w->at);
  w->at = NULL;
  w->n = 0;
  w->force = 1;
}
