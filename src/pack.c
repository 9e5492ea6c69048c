/* pack.c: converts one argument value to its kind's slot, with range checks, for each ABI. */
#include "fl_internal.h"

#include <math.h>
#include <string.h>

static const char *const value_type_names[] = {"none", "int", "uint", "bool", "float", "ptr"};

static const char *value_type_name(int type) {
  if (type < 0 || type > FL_VALUE_PTR) return "unknown";
  return value_type_names[type];
}

/* Rounds a double to a binary format with `ebits` exponent bits and `mbits` stored mantissa bits,
 * to nearest with ties to even, subnormals included. Returns false when a finite value rounds past
 * the largest finite number (Python's struct module refuses those too). */
static bool round_to_half_format(double x, int ebits, int mbits, uint16_t *out) {
  const int emax = (1 << (ebits - 1)) - 1;
  const int emin = 1 - emax;
  const uint16_t sign = signbit(x) ? (uint16_t)(1u << (ebits + mbits)) : 0;
  const uint16_t exp_all_ones = (uint16_t)(((1u << ebits) - 1u) << mbits);
  double a = fabs(x);
  if (isnan(x)) {
    *out = (uint16_t)(sign | exp_all_ones | (1u << (mbits - 1)));
    return true;
  }
  if (isinf(x)) {
    *out = (uint16_t)(sign | exp_all_ones);
    return true;
  }
  /* The largest finite value plus half an ulp: at or above it, rounding gives infinity. */
  const double overflow_at = ldexp(2.0 - ldexp(1.0, -(mbits + 1)), emax);
  if (a >= overflow_at) return false;
  if (a < ldexp(1.0, emin)) {
    /* Subnormal: a whole number of quanta 2^(emin - mbits). Scaling by a power of two is exact and
     * rint rounds to nearest even in the default rounding mode. A result of 2^mbits quanta is the
     * smallest normal number, whose encoding is the same integer. */
    double m = rint(ldexp(a, mbits - emin));
    *out = (uint16_t)(sign | (uint16_t)m);
    return true;
  }
  int e2;
  (void)frexp(a, &e2);
  int e = e2 - 1; /* a = 1.f * 2^e */
  double m = rint(ldexp(a, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
  if (m >= ldexp(1.0, mbits + 1)) {
    m = ldexp(1.0, mbits);
    e++;
  }
  /* e <= emax holds because a < overflow_at. */
  uint16_t frac = (uint16_t)((uint32_t)m - (1u << mbits));
  *out = (uint16_t)(sign | (uint16_t)((uint32_t)(e + emax) << mbits) | frac);
  return true;
}

bool fl_double_to_fp16(double x, uint16_t *out) { return round_to_half_format(x, 5, 10, out); }
/* The largest finite float plus half an ulp: a finite double at or above it overflows. */
#define FP32_OVERFLOW_AT 0x1.ffffffp+127

/* bf16 as Triton's launchers pack a scalar: the value converted to float, then its upper 16 bits
 * (truncation, not rounding), so a launch gives the kernel the bytes the stock launcher would. */
bool fl_double_to_bf16(double x, uint16_t *out) {
  if (isfinite(x) && fabs(x) >= FP32_OVERFLOW_AT) return false;
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, 4);
  *out = (uint16_t)(u >> 16);
  return true;
}

typedef struct {
  bool neg;
  uint64_t mag;
} int_parts;

static fl_status pack_int(fl_abi abi, fl_kind kind, const fl_value *value, void *dst, size_t index,
                          fl_error *err) {
  int_parts p;
  switch (value->type) {
    case FL_VALUE_INT:
      p.neg = value->v.i < 0;
      p.mag = p.neg ? (uint64_t)0 - (uint64_t)value->v.i : (uint64_t)value->v.i;
      break;
    case FL_VALUE_UINT:
      p.neg = false;
      p.mag = value->v.u;
      break;
    case FL_VALUE_BOOL:
      p.neg = false;
      p.mag = value->v.b ? 1 : 0;
      break;
    default:
      return fl__fail(err, FL_BAD_VALUE, false, "int_expected:%zu:%s:%s", index, fl_kind_name(kind),
                      value_type_name(value->type));
  }
  const fl__kind_row *row = &fl__kinds[kind];
  if (p.neg && row->is_unsigned)
    return fl__fail(err, FL_BAD_VALUE, false, "uint_negative:%zu:%s", index, fl_kind_name(kind));
  if (p.neg ? p.mag > row->max_neg : p.mag > row->max_pos)
    return fl__fail(err, FL_BAD_VALUE, false, "int_out_of_range:%zu:%s", index, fl_kind_name(kind));
  /* Two's complement of the value, truncated to the slot: exact because the range check passed. */
  uint64_t bits = p.neg ? (uint64_t)0 - p.mag : p.mag;
  switch (fl__layout_kind_size(abi, kind)) {
    case 1: {
      uint8_t b = (uint8_t)bits;
      memcpy(dst, &b, 1);
      break;
    }
    case 2: {
      uint16_t b = (uint16_t)bits;
      memcpy(dst, &b, 2);
      break;
    }
    case 4: {
      uint32_t b = (uint32_t)bits;
      memcpy(dst, &b, 4);
      break;
    }
    default:
      memcpy(dst, &bits, 8);
      break;
  }
  return FL_OK;
}

static fl_status pack_float(fl_abi abi, fl_kind kind, const fl_value *value, void *dst, size_t index,
                            fl_error *err) {
  double x;
  switch (value->type) {
    case FL_VALUE_FLOAT:
      x = value->v.f;
      break;
    case FL_VALUE_INT:
      x = (double)value->v.i;
      break;
    case FL_VALUE_UINT:
      x = (double)value->v.u;
      break;
    case FL_VALUE_BOOL:
      x = value->v.b ? 1.0 : 0.0;
      break;
    default:
      return fl__fail(err, FL_BAD_VALUE, false, "float_expected:%zu:%s:%s", index,
                      fl_kind_name(kind), value_type_name(value->type));
  }
  const fl__float_format format = fl__kinds[kind].format;
  if (format == FL__FLOAT_FP64) {
    memcpy(dst, &x, 8);
    return FL_OK;
  }
  /* Triton-Ascend passes fp16 and bf16 scalars as a C float: the value is converted to float there,
   * after the range check of its own format. */
  if (format == FL__FLOAT_FP32 || fl__layout_kind_size(abi, kind) == 4) {
    uint16_t h;
    if (isfinite(x) && (fabs(x) >= FP32_OVERFLOW_AT ||
                        (format == FL__FLOAT_FP16 && !fl_double_to_fp16(x, &h)) ||
                        (format == FL__FLOAT_BF16 && !fl_double_to_bf16(x, &h))))
      return fl__fail(err, FL_BAD_VALUE, false, "float_out_of_range:%zu:%s", index, fl_kind_name(kind));
    float f = (float)x;
    memcpy(dst, &f, 4);
    return FL_OK;
  }
  uint16_t h;
  bool ok = format == FL__FLOAT_FP16 ? fl_double_to_fp16(x, &h) : fl_double_to_bf16(x, &h);
  if (!ok)
    return fl__fail(err, FL_BAD_VALUE, false, "float_out_of_range:%zu:%s", index, fl_kind_name(kind));
  memcpy(dst, &h, 2);
  return FL_OK;
}

static fl_status pack_ptr(const fl_value *value, void *dst, size_t index, fl_error *err) {
  uint64_t addr;
  switch (value->type) {
    case FL_VALUE_PTR:
    case FL_VALUE_UINT:
      addr = value->v.p;
      break;
    case FL_VALUE_NONE:
      addr = 0;
      break;
    case FL_VALUE_INT:
      if (value->v.i < 0) return fl__fail(err, FL_BAD_VALUE, false, "ptr_negative:%zu", index);
      addr = (uint64_t)value->v.i;
      break;
    default:
      return fl__fail(err, FL_BAD_VALUE, false, "ptr_expected:%zu:%s", index,
                      value_type_name(value->type));
  }
  memcpy(dst, &addr, 8);
  return FL_OK;
}

fl_status fl_pack_value(fl_abi abi, fl_kind kind, const fl_value *value, void *dst, size_t index,
                        fl_error *err) {
  if ((unsigned)abi >= FL_ABI_COUNT) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_unknown:%d", (int)abi);
  if ((unsigned)kind >= FL_KIND_COUNT)
    return fl__fail(err, FL_BAD_KIND, true, "kind_unknown:%zu:%d", index, (int)kind);
  if (!value) return fl__fail(err, FL_BAD_VALUE, false, "value_null:%zu", index);
  if (!dst) return fl__fail(err, FL_BAD_VALUE, false, "dst_null:%zu", index);
  switch (fl__kinds[kind].cls) {
    case FL__CLASS_PTR:
      return pack_ptr(value, dst, index, err);
    case FL__CLASS_INT: /* an i1 takes a bool, or an integer that is 0 or 1: its range is [0, 1] */
      return pack_int(abi, kind, value, dst, index, err);
    case FL__CLASS_TMAP: /* encoded by the plan's backend, with the plan's metadata (tensor_map.c) */
      return fl__fail(err, FL_BAD_KIND, true, "tmap_needs_plan:%zu", index);
    default:
      return pack_float(abi, kind, value, dst, index, err);
  }
}
