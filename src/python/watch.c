/* watch.c: see watch.h. */
#include "watch.h"

int fl_ext_watch_mode = FL_EXT_WATCHERS ? FL_WATCH_WATCHER : FL_WATCH_VERSIONS;
static char watch_why[160]; /* why the watcher is not in use, or "" */

#if FL_EXT_WATCHERS
uint64_t fl_ext_watch_epoch = 1;

static int watch_callback(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value) {
  (void)event, (void)dict, (void)key, (void)new_value;
  fl_ext_watch_epoch++;
  return 0;
}
#endif

uint64_t fl_ext_watch_nonce;

int fl_ext_watch_init(fl_ext_state *st) {
#if FL_EXT_WATCHERS
  st->dict_watcher = PyDict_AddWatcher(watch_callback);
  if (st->dict_watcher >= 0) return 0;
  /* Every id is taken (other code's watchers): the JIT falls back, and import goes on. */
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyObject *msg = ev ? PyObject_Str(ev) : NULL;
  const char *text = msg ? PyUnicode_AsUTF8(msg) : NULL;
  snprintf(watch_why, sizeof watch_why, "PyDict_AddWatcher: %s", text ? text : "no watcher id left");
  PyErr_Clear();
  Py_XDECREF(msg);
  Py_XDECREF(et);
  Py_XDECREF(ev);
  Py_XDECREF(tb);
  fl_ext_watch_mode = FL_EXT_DICT_VERSIONS ? FL_WATCH_VERSIONS : FL_WATCH_NONE;
  return 0;
#else
  (void)st;
  return 0;
#endif
}

PyObject *fl_ext_watch_detector(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  const char *name = fl_ext_watch_mode == FL_WATCH_WATCHER ? "watcher"
                     : fl_ext_watch_mode == FL_WATCH_VERSIONS ? "version_tags" : NULL;
  return Py_BuildValue("(zz)", name, watch_why[0] ? watch_why : NULL);
}

int fl_ext_watch_set(fl_ext_watch *w, fl_ext_state *st, PyObject *dicts) {
  w->force = 1;
  if (!PyTuple_Check(dicts)) return PyErr_SetString(PyExc_TypeError, "watched: expected a tuple of dicts"), -1;
  Py_ssize_t n = PyTuple_GET_SIZE(dicts);
  for (Py_ssize_t i = 0; i < n; i++)
    if (!PyDict_Check(PyTuple_GET_ITEM(dicts, i)))
      return PyErr_Format(PyExc_TypeError, "watched[%zd]: expected a dict", i), -1;
  /* The new tuple first, the old one released last (its release may run code that calls in). */
  PyObject *old = w->dicts;
  w->dicts = Py_NewRef(dicts);
  w->n = 0;
  w->epoch = 0;
  int rc = 0;
#if FL_EXT_WATCHERS
  if (fl_ext_watch_mode == FL_WATCH_WATCHER) {
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) rc = PyDict_Watch(st->dict_watcher, PyTuple_GET_ITEM(dicts, i));
    w->epoch = fl_ext_watch_epoch;
  }
#else
  (void)st;
#endif
  if (rc == 0 && fl_ext_watch_mode == FL_WATCH_VERSIONS) {
    PyObject **at = PyMem_Realloc(w->at, (size_t)(n ? n : 1) * sizeof *at);
    if (!at) {
      PyErr_NoMemory();
      rc = -1;
    } else {
      w->at = at;
      w->sum = 0;
      for (Py_ssize_t i = 0; i < n; i++) {
        at[i] = PyTuple_GET_ITEM(dicts, i);
        w->sum += fl_ext_dict_version(at[i]);
      }
      w->n = n;
    }
  }
  if (rc == 0) w->force = 0;
  Py_XDECREF(old);
  return rc;
}

int fl_ext_watch_dict(fl_ext_state *st, PyObject *dict) {
#if FL_EXT_WATCHERS
  if (fl_ext_watch_mode != FL_WATCH_WATCHER) return 0;
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
