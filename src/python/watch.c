/* watch.c: see watch.h. */
#include "watch.h"

int fl_ext_watch_mode = FL_EXT_WATCHERS ? FL_WATCH_WATCHER : FL_WATCH_VERSIONS;

#if FL_EXT_WATCHERS
/* PyDict_Watch in a critical section on the dict: CPython 3.13's sets the watcher's bit in the dict's
 * version tag with a plain read-modify-write, which a free-threaded build's concurrent store (under
 * the dict's lock) or another PyDict_Watch could lose. With the GIL the section is nothing. */
static int watch_locked(int watcher, PyObject *dict) {
  int rc;
  Py_BEGIN_CRITICAL_SECTION(dict);
  rc = PyDict_Watch(watcher, dict);
  Py_END_CRITICAL_SECTION();
  return rc;
}
#endif
static char watch_why[160]; /* why the watcher is not in use, or "" */

#if FL_EXT_WATCHERS
uint64_t fl_ext_watch_epoch = 1, fl_ext_watch_kepoch = 1;
static int keyed_watcher = -1; /* the second watcher (keyed dicts), or -1: they go to the first */
static PyObject *interest;     /* the names any keyed dict is watched for (a set of str) */

static int watch_callback(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value) {
  (void)event, (void)dict, (void)key, (void)new_value;
  FL_EXT_COUNT(fl_ext_watch_epoch);
  return 0;
}

/* A keyed dict changed: only a write to a name of interest (or a clear, a clone, its end) counts. */
static int keyed_callback(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value) {
  (void)dict, (void)new_value;
  if ((event == PyDict_EVENT_ADDED || event == PyDict_EVENT_MODIFIED || event == PyDict_EVENT_DELETED) && key &&
      PyUnicode_CheckExact(key) && interest) {
    int in = PySet_Contains(interest, key); /* a str's cached hash: no Python code */
    if (in == 0) return 0;
    if (in < 0) PyErr_Clear();
  }
  FL_EXT_COUNT(fl_ext_watch_kepoch);
  return 0;
}
#endif

uint64_t fl_ext_watch_nonce;


int fl_ext_watch_init(fl_ext_state *st) {
#if FL_EXT_WATCHERS
  st->dict_watcher = PyDict_AddWatcher(watch_callback);
  if (st->dict_watcher >= 0) {
    keyed_watcher = PyDict_AddWatcher(keyed_callback); /* none left: the keyed dicts are watched whole */
    if (keyed_watcher < 0) PyErr_Clear();
    return 0;
  }
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

/* The version tags' array: the n dicts, then the nk keyed ones. 0, or -1 with MemoryError. */
static int versions_set(fl_ext_watch *w, PyObject *dicts, PyObject *keyed) {
  Py_ssize_t n = dicts ? PyTuple_GET_SIZE(dicts) : w->n, nk = keyed ? PyTuple_GET_SIZE(keyed) : 0;
  PyObject **at = PyMem_Malloc((size_t)(n + nk ? n + nk : 1) * sizeof *at);
  if (!at) return PyErr_NoMemory(), -1;
  for (Py_ssize_t i = 0; i < n; i++) at[i] = dicts ? PyTuple_GET_ITEM(dicts, i) : w->at[i];
  for (Py_ssize_t i = 0; i < nk; i++) at[n + i] = PyTuple_GET_ITEM(PyTuple_GET_ITEM(keyed, i), 0);
  PyMem_Free(w->at);
  w->at = at;
  w->n = n;
  w->nk = nk;
  w->sum = fl_ext_watch_sum(at, n);
  w->ksum = fl_ext_watch_sum(at + n, nk);
  return 0;
}

int fl_ext_watch_set(fl_ext_watch *w, fl_ext_state *st, PyObject *dicts) {
  FL_EXT_STORE(w->force, 1);
  if (!PyTuple_Check(dicts)) return PyErr_SetString(PyExc_TypeError, "watched: expected a tuple of dicts"), -1;
  Py_ssize_t n = PyTuple_GET_SIZE(dicts);
  for (Py_ssize_t i = 0; i < n; i++)
    if (!PyDict_Check(PyTuple_GET_ITEM(dicts, i)))
      return PyErr_Format(PyExc_TypeError, "watched[%zd]: expected a dict", i), -1;
  /* The new tuples first, the old ones released last (their release may run code that calls in). */
  PyObject *old = w->dicts, *old_keyed = w->keyed;
  w->dicts = Py_NewRef(dicts);
  w->keyed = NULL; /* none until fl_ext_watch_set_keyed */
  w->n = w->nk = 0;
  FL_EXT_STORE(w->epoch, 0);
  int rc = 0;
#if FL_EXT_WATCHERS
  if (fl_ext_watch_mode == FL_WATCH_WATCHER) {
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) rc = watch_locked(st->dict_watcher, PyTuple_GET_ITEM(dicts, i));
    FL_EXT_STORE(w->epoch, FL_EXT_LOAD(fl_ext_watch_epoch));
    FL_EXT_STORE(w->kepoch, FL_EXT_LOAD(fl_ext_watch_kepoch));
  }
#else
  (void)st;
#endif
  if (rc == 0 && fl_ext_watch_mode == FL_WATCH_VERSIONS) rc = versions_set(w, dicts, NULL);
  if (rc == 0) FL_EXT_STORE(w->force, 0);
  Py_XDECREF(old);
  Py_XDECREF(old_keyed);
  return rc;
}

/* (dict, names, values now) for each (dict, names) of `keyed`: a new tuple, or NULL with an exception. */
static PyObject *keyed_now(PyObject *keyed) {
  Py_ssize_t n = PyTuple_GET_SIZE(keyed);
  PyObject *out = PyTuple_New(n);
  for (Py_ssize_t i = 0; out && i < n; i++) {
    PyObject *item = PyTuple_GET_ITEM(keyed, i), *d, *names;
    if (!PyArg_ParseTuple(item, "O!O!:keyed", &PyDict_Type, &d, &PyTuple_Type, &names)) goto fail;
    PyObject *vals = PyTuple_New(PyTuple_GET_SIZE(names));
    if (!vals) goto fail;
    PyTuple_SET_ITEM(out, i, Py_BuildValue("(OOO)", d, names, vals));
    Py_DECREF(vals);
    if (!PyTuple_GET_ITEM(out, i)) goto fail;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); j++) {
      PyObject *name = PyTuple_GET_ITEM(names, j);
      if (!PyUnicode_CheckExact(name)) {
        PyErr_Format(PyExc_TypeError, "keyed[%zd]: names must be str", i);
        goto fail;
      }
      PyObject *v = PyDict_GetItemWithError(d, name);
      if (!v && PyErr_Occurred()) goto fail;
      PyTuple_SET_ITEM(vals, j, Py_NewRef(v ? v : names));
    }
  }
  return out;
fail:
  Py_XDECREF(out);
  return NULL;
}

int fl_ext_watch_set_keyed(fl_ext_watch *w, fl_ext_state *st, PyObject *keyed) {
  if (keyed == Py_None || w->force) return 0; /* nothing keyed; or fl_ext_watch_set failed */
  if (!PyTuple_Check(keyed)) return FL_EXT_STORE(w->force, 1), PyErr_SetString(PyExc_TypeError, "keyed: a tuple or None"), -1;
  FL_EXT_STORE(w->force, 1);
  PyObject *now = keyed_now(keyed);
  if (!now) return -1;
  int rc = 0;
#if FL_EXT_WATCHERS
  if (fl_ext_watch_mode == FL_WATCH_WATCHER) {
    if (!interest && !(interest = PySet_New(NULL))) rc = -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(now) && rc == 0; i++) {
      PyObject *entry = PyTuple_GET_ITEM(now, i), *names = PyTuple_GET_ITEM(entry, 1);
      for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names) && rc == 0; j++) rc = PySet_Add(interest, PyTuple_GET_ITEM(names, j));
      /* Without a second watcher the dict is watched whole: any write to it is a change. */
      if (rc == 0) rc = watch_locked(keyed_watcher >= 0 ? keyed_watcher : st->dict_watcher, PyTuple_GET_ITEM(entry, 0));
    }
    FL_EXT_STORE(w->epoch, FL_EXT_LOAD(fl_ext_watch_epoch));
    FL_EXT_STORE(w->kepoch, FL_EXT_LOAD(fl_ext_watch_kepoch));
  }
#else
  (void)st;
#endif
  PyObject *old = w->keyed;
  w->keyed = now;
  if (rc == 0 && fl_ext_watch_mode == FL_WATCH_VERSIONS) rc = versions_set(w, NULL, now);
  if (rc == 0) FL_EXT_STORE(w->force, 0);
  Py_XDECREF(old);
  return rc;
}


int fl_ext_watch_dict(fl_ext_state *st, PyObject *dict) {
#if FL_EXT_WATCHERS
  if (fl_ext_watch_mode != FL_WATCH_WATCHER) return 0;
  return watch_locked(st->dict_watcher, dict);
#else
  (void)st, (void)dict;
  return 0;
#endif
}

void fl_ext_watch_free(fl_ext_watch *w) {
  Py_CLEAR(w->dicts);
  Py_CLEAR(w->keyed);
  PyMem_Free(w->at);
  w->at = NULL;
  w->n = 0;
  FL_EXT_STORE(w->force, 1);
}
