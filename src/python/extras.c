/* extras.c: what a wheel's module adds beyond the product: nothing. The testing build links its
 * own layer (testing.c) in this file's place. */
#include "ext.h"

int fl_ext_add_extras(PyObject *module, fl_ext_state *st) {
  (void)module;
  (void)st;
  return 0;
}
