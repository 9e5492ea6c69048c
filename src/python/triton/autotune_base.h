/* autotune_base.h (below both .c files, so named after neither): the types of Triton's Autotuner's
 * dispatcher, shared by autotune_key.c (the key of a
 * call, the table of keys) and autotune.c (the call, the type) above it. Private to src/python. */
#ifndef FL_AUTOTUNE_H
#define FL_AUTOTUNE_H

#include "tuner_base.h"

#define AT_MAX_KEY 256   /* key words; a longer key goes to Triton */
#define AT_MAX_ENTRIES 256
#define AT_MAX_KW 64

enum { A_ABSENT = 1, A_INT, A_UINT, A_NEG, A_BOOL, A_NONE, A_FLOAT, A_STR, A_DTYPE, A_DTYPE_OBJ };

#define AT_MAX_HELD 64   /* dtype objects a key holds (tensors the door does not read) */
typedef struct {
  uint64_t words[AT_MAX_KEY];
  size_t n;
  PyObject *held[AT_MAX_HELD]; /* the dtypes whose addresses are in the key, held until it is done */
  size_t nheld;
} at_key;

typedef struct {
  uint64_t *key;
  size_t nkey;
  uint64_t hash;
  PyObject *config;     /* Triton's Config; NULL: refused (reason) */
  PyObject *refusal;
  PyObject *names;      /* tuple: config.all_kwargs() keys */
  PyObject *values;     /* tuple: its values */
  PyObject *kw_in;      /* the call's kwnames last seen (or NULL) ... */
  int kw_form;
  PyObject *kw_out;     /* ... and the kwnames the inner call gets for them */
  PyObject *keep;       /* strs the key holds by identity */
  PyObject *pre_hook;   /* the config's pre_hook when bound (the policy forgets the key if it changes), or NULL */
} at_entry;

typedef struct {
  PyObject_HEAD
  fl_tuner_head t;        /* tuner: the Autotuner; inner: a JitDispatcher, or the inner kernel's run */
  Py_ssize_t *key_params; /* indices into arg_names of the key's names that are parameters */
  Py_ssize_t nkeys;
  PyObject *configs;      /* the tuner's list; its length decides whether there is a key */
  int inner_is_jit;
  PyObject *last_best;    /* the config this dispatcher last stored as best_config (borrowed) */
  int nargs_dirty;        /* Triton's run left `nargs` set (it raised): set it back to None */
  PyObject *kw_seen;      /* the kwnames make_key last read, and each one's index into arg_names (-1) */
  Py_ssize_t kw_param[AT_MAX_KW];
  PyObject *strip_in, *strip_out; /* the run() form's kwnames last seen, without grid= and warmup= */
  at_entry *entries;
  size_t count;
  uint64_t gen;           /* counts clearings of the table and rebindings (an entry is read by copy) */
} AutotuneObject;

/* autotune_key.c */
uint64_t fl_at_key_hash(const at_key *k);
/* The key of a call, as Autotuner.run builds its tuple: 0, or 1 with *why. */
int fl_at_make_key(AutotuneObject *self, PyObject *const *args, size_t nargs, PyObject *kwnames, at_key *k,
                   const char **why);
void fl_at_key_release(at_key *k);
at_entry *fl_at_table_find(AutotuneObject *self, const at_key *k, uint64_t h);
/* A config's pre_hook called as Autotuner.run calls it (nargs set meanwhile): 0, or -1 with its exception. */
FL_EXT_COLD int fl_at_config_pre_hook(AutotuneObject *self, PyObject *hook, PyObject *grid, PyObject *const *args,
                                      size_t nargs, PyObject *kwnames, PyObject *cnames, PyObject *cvalues);

/* autotune.c: the run() form called with its keywords in a dict (TunerSlot's bound form). */
PyObject *fl_at_call_dict(PyObject *callable, PyObject *const *args, size_t nargs, PyObject *kwargs);

#endif
