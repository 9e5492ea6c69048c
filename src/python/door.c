/* door.c: the tensor door (fastlaunch._tensor, a capsule of functions reading torch's C++ tensor)
 * loaded once, when torch is first seen: by one thread, the others finding it loaded, refused or
 * being built (free-threaded builds: a mutex, the pointer published once). Depends on ext.h only. */
#include "ext.h"

#include <string.h>
#include <strings.h>

/* The why of load()'s (module, why), or `otherwise`. */
static const char *door_reason(PyObject *result, const char *otherwise) {
  PyObject *why = PyTuple_GET_ITEM(result, 1);
  const char *s = PyUnicode_Check(why) ? PyUnicode_AsUTF8(why) : NULL;
  return s ? s : otherwise;
}

static void door_load(fl_ext_state *st);

void fl_ext_door_load(fl_ext_state *st) {
#ifdef Py_GIL_DISABLED
  /* One thread loads it; another that finds it loading waits (the lock is released while it waits,
   * like the GIL) and finds it loaded, refused or being built. */
  PyMutex_Lock(&st->door_lock);
  if (FL_EXT_LOAD(st->door_state) == 0) door_load(st);
  PyMutex_Unlock(&st->door_lock);
#else
  door_load(st);
#endif
}

static void door_load(fl_ext_state *st) {
  /* Only once torch is imported: a tensor cannot exist before, and fastlaunch never imports it. */
  PyObject *name = PyUnicode_FromString("torch");
  PyObject *torch = name ? PyImport_GetModule(name) : NULL;
  Py_XDECREF(name);
  if (!torch) {
    PyErr_Clear();
    return; /* tried again at the next tensor-like argument */
  }
  /* Other threads use data_ptr() while the door is built (fastlaunch._door may run the compiler). */
  FL_EXT_STORE(st->door_state, -1);
  const char *env = getenv("FASTLAUNCH_TENSOR_DOOR"); /* a switch, as fastlaunch.config reads it */
  PyObject *builder = NULL, *result = NULL, *capsule = NULL, *version = NULL;
  if (env && (strcmp(env, "0") == 0 || strcasecmp(env, "false") == 0 || strcasecmp(env, "no") == 0 ||
              strcasecmp(env, "off") == 0)) {
    snprintf(st->door_why, sizeof st->door_why, "switched off by FASTLAUNCH_TENSOR_DOOR=%.8s", env);
  } else if (!(builder = PyImport_ImportModule("fastlaunch._door")) ||
             !(result = PyObject_CallMethod(builder, "load", NULL)) || !PyTuple_Check(result) ||
             PyTuple_GET_SIZE(result) != 2) {
    snprintf(st->door_why, sizeof st->door_why, "fastlaunch._door.load() failed");
  } else if (PyTuple_GET_ITEM(result, 0) == Py_None) {
    const char *why = door_reason(result, "not built");
    snprintf(st->door_why, sizeof st->door_why, "%s", why);
    if (strncmp(why, "being built", 11) == 0) FL_EXT_STORE(st->door_state, -2); /* fastlaunch._door calls _door_retry at its end */
  } else if (!(capsule = PyObject_GetAttrString(PyTuple_GET_ITEM(result, 0), "door")) ||
             !PyCapsule_IsValid(capsule, FL_TENSOR_DOOR_CAPSULE)) {
    snprintf(st->door_why, sizeof st->door_why, "fastlaunch._tensor has no door capsule");
  } else {
    const fl_tensor_door *door = PyCapsule_GetPointer(capsule, FL_TENSOR_DOOR_CAPSULE);
    version = PyObject_GetAttrString(torch, "__version__");
    const char *running = version && PyUnicode_Check(version) ? PyUnicode_AsUTF8(version) : NULL;
    if (door->version != FL_TENSOR_DOOR_VERSION) {
      snprintf(st->door_why, sizeof st->door_why, "its door is version %u, this fastlaunch reads version %d",
               door->version, FL_TENSOR_DOOR_VERSION);
    } else if (!running || strcmp(running, door->torch_version) != 0) {
      /* torch's C++ objects are only read by the torch the door was compiled against. */
      snprintf(st->door_why, sizeof st->door_why, "built for another torch (%.40s), running %.40s",
               door->torch_version, running ? running : "?");
    } else {
      __atomic_store_n(&st->door, door, __ATOMIC_RELEASE);
      FL_EXT_STORE(st->door_state, 1);
      snprintf(st->door_why, sizeof st->door_why, "%s", door_reason(result, running));
    }
  }
  PyErr_Clear();
  Py_XDECREF(version);
  Py_XDECREF(capsule);
  Py_XDECREF(result);
  Py_XDECREF(builder);
  Py_DECREF(torch);
}
