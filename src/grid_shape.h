/* grid_shape.h: the grid dimensions computed without the interpreter (grid.c finds them in a
 * compiled program; the core's launch and the JIT's grid read them inline). Internal: the core and
 * its extension, never the public header. */
#ifndef FL_GRID_SHAPE_H
#define FL_GRID_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "fastlaunch.h"

/* Python's a // b and cdiv(a, b) on int64, for b != 0 and (a, b) != (INT64_MIN, -1): C's division
 * truncates, so the floor is one lower when the division is inexact and the signs differ, the
 * ceiling one higher when inexact and the signs agree. The one place the division is written: the
 * interpreter (grid.c) and the shapes below use it. */
static inline int64_t fl__div_floor(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a % b < 0) != (b < 0)); }
static inline int64_t fl__div_ceil(int64_t a, int64_t b) { return a / b + (a % b != 0 && (a % b < 0) == (b < 0)); }

/* A grid dimension the launch computes without the interpreter, with the interpreter's values:
 *   constant:          value
 *   otherwise, x = args[var] as int64, y = x + add:
 *     ceil:            ceil(y / div)   (Triton's cdiv(x, B), Inductor's -(x // -B), or x itself)
 *     floor:           floor(y / div)  (torch_npu's (x + B - 1) // B)
 * exactly, for every x <= hi (no step of the program overflows there); past hi the program runs.
 * shift is log2(div) when div is a power of two, else -1. */
typedef struct fl__grid_shape {
  int64_t value, add, div, hi;
  uint32_t var;
  int8_t shift;
  bool constant, ceil;
} fl__grid_shape;
/* Fills *shape when the program has one of those shapes (constants excepted: the caller folds
 * them); false otherwise. */
bool fl__grid_program_shape(const fl_grid_program *program, fl__grid_shape *shape);
/* A shape's value at x, for x <= shape->hi (no step can overflow there): floor or ceiling of
 * (x + add) / div, as Python computes it; a power-of-two divisor of a non-negative y by a shift. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int64_t fl__grid_shape_apply(const fl__grid_shape *sh, int64_t x) {
  int64_t y = x + sh->add, div = sh->div;
  if (sh->shift >= 0 && y >= 0) return (y >> sh->shift) + (sh->ceil && (y & (div - 1)) != 0);
  return sh->ceil ? fl__div_ceil(y, div) : fl__div_floor(y, div);
}

#endif
