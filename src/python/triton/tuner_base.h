/* tuner_base.h (below both files, so named after neither): what the AutotuneDispatcher (autotune.c)
 * and the HeuristicsDispatcher (heuristics.c) share, one copy for both: the head of their objects
 * (the tuner served, Triton's run, the policy, the parameters' names, the inner run, the reason every
 * call is Triton's, the watch, the spare call, the counts) and its construction, traversal and
 * release. Private to src/python/triton. */
#ifndef FL_TUNER_BASE_H
#define FL_TUNER_BASE_H

#include "ext.h"
#include "watch.h"

typedef struct {
  vectorcallfunc vectorcall;
  fl_ext_state *state;
  PyObject *tuner;        /* the Autotuner or Heuristics served */
  PyObject *stock_run;    /* Triton's run, bound */
  PyObject *policy;       /* revalidate() (and the Autotuner's bind(...)) */
  PyObject *arg_names;    /* tuple of str */
  PyObject *inner;        /* the inner kernel's run: a dispatcher, or anything callable with grid= */
  PyObject *stock_reason; /* str while every call goes to Triton */
  fl_ext_watch watch;
  PyObject *spare_call;
  PyObject *stock_counts;
  unsigned long long fast, stock;
  PyObject *weakrefs;
} fl_tuner_head;

/* The names the policy gives (a tuple of str): 0, or -1 with TypeError naming the position. */
static inline int fl_tuner_check_names(PyObject *names) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
    if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i)))
      return PyErr_Format(PyExc_TypeError, "arg_names[%zd]: expected a str", i), -1;
  return 0;
}

/* A new object's head (its memory zeroed by tp_alloc): every call Triton's until the first
 * revalidation. 0, or -1 with MemoryError (the caller releases the object). */
static inline int fl_tuner_init(fl_tuner_head *t, fl_ext_state *st, vectorcallfunc call, PyObject *tuner,
                                PyObject *stock_run, PyObject *policy, PyObject *names) {
  t->vectorcall = call;
  t->state = st;
  t->tuner = Py_NewRef(tuner);
  t->stock_run = Py_NewRef(stock_run);
  t->policy = Py_NewRef(policy);
  t->arg_names = Py_NewRef(names);
  t->inner = Py_NewRef(Py_None);
  t->stock_counts = PyDict_New();
  t->stock_reason = PyUnicode_FromString("not_validated");
  FL_EXT_STORE(t->watch.force, 1);
  if (t->stock_counts && t->stock_reason) return 0;
  PyErr_NoMemory();
  return -1;
}

static inline int fl_tuner_traverse(fl_tuner_head *t, visitproc visit, void *arg) {
  Py_VISIT(t->watch.dicts);
  Py_VISIT(t->tuner);
  Py_VISIT(t->stock_run);
  Py_VISIT(t->policy);
  Py_VISIT(t->inner);
  Py_VISIT(t->spare_call);
  return 0;
}

static inline void fl_tuner_clear(fl_tuner_head *t) {
  Py_CLEAR(t->watch.dicts); /* the version arrays go with the object */
  FL_EXT_STORE(t->watch.force, 1);
  Py_CLEAR(t->tuner);
  Py_CLEAR(t->stock_run);
  Py_CLEAR(t->policy);
  Py_CLEAR(t->inner);
  Py_CLEAR(t->spare_call);
}

/* What only deallocation releases, after the type's own clear (weak references are cleared before
 * it): the names, the reason, the counts, the watch. */
static inline void fl_tuner_free(fl_tuner_head *t) {
  Py_CLEAR(t->arg_names);
  Py_CLEAR(t->stock_reason);
  Py_CLEAR(t->stock_counts);
  fl_ext_watch_free(&t->watch);
}

#endif
