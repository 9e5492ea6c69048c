/* test_pack.c: every conversion and every refusal of the packer, fp16/bf16 rounding against an
 * exhaustive reference over all 65,536 encodings. */
#include "fastlaunch.h"

#include <math.h>

#define FL_TESTS(X) \
  X(fp16_exhaustive_reference) X(bf16_exhaustive_reference) X(fp16_matches_compiler) \
  X(int_ranges_every_kind) X(int_refusals) X(i1_from_bool) X(float_kinds) X(float_refusals) \
  X(ptr_values) X(bad_calls) X(npu_slots) X(kind_classes)
#define FL_TEST_MAIN
#include "fl_test.h"

/* Decodes a 16-bit float with `ebits` exponent bits exactly into a double. */
static double decode16(uint16_t bits, int ebits, int mbits) {
  int emax = (1 << (ebits - 1)) - 1;
  int sign = bits >> 15;
  int e = (bits >> mbits) & ((1 << ebits) - 1);
  int m = bits & ((1 << mbits) - 1);
  double v;
  if (e == (1 << ebits) - 1) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp((double)m, 1 - emax - mbits);
  else v = ldexp((double)(m | (1 << mbits)), e - emax - mbits);
  return sign ? -v : v;
}

/* Reference rounding: the nearest of the sorted finite encodings, ties to the even encoding,
 * decided by comparing with the exact midpoint of the two neighbours. Returns false on overflow. */
static bool reference16(double x, int ebits, int mbits, uint16_t *out) {
  static double table[2][1 << 15];
  static int ntable[2];
  int which = ebits == 5 ? 0 : 1;
  if (!ntable[which]) {
    for (uint32_t b = 0; b < 0x7fff; b++) {
      double v = decode16((uint16_t)b, ebits, mbits);
      if (isfinite(v)) table[which][ntable[which]++] = v;
    }
  }
  const double *t = table[which];
  int n = ntable[which];
  if (isnan(x)) return false;
  double a = fabs(x);
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double max = t[n - 1];
  double ulp_top = max - t[n - 2];
  if (isinf(x)) {
    *out = sign | (uint16_t)(((1u << ebits) - 1) << mbits);
    return true;
  }
  if (a > max) {
    /* Above the largest finite value: rounds back to it only below the midpoint to "max + ulp". */
    if (a < max + ulp_top / 2) {
      *out = sign | (uint16_t)(n - 1);
      return true;
    }
    return false;
  }
  int lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (t[mid] <= a) lo = mid; else hi = mid;
  }
  /* Encodings of non-negative finite values are their indices in the table. */
  uint16_t pick;
  if (t[lo] == a) pick = (uint16_t)lo;
  else if (t[hi] == a) pick = (uint16_t)hi;
  else {
    double midpoint = t[lo] + (t[hi] - t[lo]) / 2; /* exact: adjacent values of a 16-bit format */
    if (a < midpoint) pick = (uint16_t)lo;
    else if (a > midpoint) pick = (uint16_t)hi;
    else pick = (lo % 2 == 0) ? (uint16_t)lo : (uint16_t)hi;
  }
  *out = sign | pick;
  return true;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void check_format(int ebits, int mbits, bool (*conv)(double, uint16_t *)) {
  int emax = (1 << (ebits - 1)) - 1;
  int checked = 0;
  /* Every encoding, its neighbours' midpoints, and values a hair either side of them. */
  for (uint32_t b = 0; b < 0x7c00u + (ebits == 8 ? 0x380u : 0); b++) {
    double v = decode16((uint16_t)b, ebits, mbits);
    double next = decode16((uint16_t)(b + 1), ebits, mbits);
    if (!isfinite(v) || !isfinite(next)) continue;
    double mid = v + (next - v) / 2;
    double probes[] = {v, -v, mid, -mid, nextafter(mid, 0), nextafter(mid, INFINITY), nextafter(v, INFINITY)};
    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
      uint16_t got = 0, want = 0;
      bool ok = conv(probes[k], &got), wok = reference16(probes[k], ebits, mbits, &want);
      if (ok != wok || (ok && got != want))
        FL_FAIL_AT("x=%a: got %d/0x%04x want %d/0x%04x", probes[k], ok, got, wok, want);
      checked++;
    }
  }
  /* Random doubles over the whole exponent range of the format and beyond. */
  for (int i = 0; i < 200000; i++) {
    double m = (double)(rnd() >> 11) / 9007199254740992.0 + 0.5;
    int e = (int)(rnd() % (uint64_t)(2 * emax + 2 * mbits + 20)) - (emax + mbits + 10);
    double x = ldexp(m, e) * ((rnd() & 1) ? -1 : 1);
    uint16_t got = 0, want = 0;
    bool ok = conv(x, &got), wok = reference16(x, ebits, mbits, &want);
    if (ok != wok || (ok && got != want)) FL_FAIL_AT("x=%a: got %d/0x%04x want %d/0x%04x", x, ok, got, wok, want);
    checked++;
  }
  uint16_t h;
  ASSERT_TRUE(conv(NAN, &h));
  ASSERT_TRUE(isnan(decode16(h, ebits, mbits)));
  ASSERT_TRUE(conv(-0.0, &h));
  ASSERT_EQ(h, 0x8000);
  ASSERT_TRUE(checked > 200000);
}

static void fp16_exhaustive_reference(void) { check_format(5, 10, fl_double_to_fp16); }
/* bf16 is packed as Triton's launchers pack it: (float)x, then the upper 16 bits (truncation). The
 * reference is the compiler's own float conversion; every bf16 encoding, values just past each
 * (which truncation keeps), and random doubles. Triton's example: 1.005859375 packs to 0x3f80. */
static void bf16_exhaustive_reference(void) {
  uint16_t h;
  int checked = 0;
  for (uint32_t b = 0; b <= 0xffffu; b++) {
    uint32_t u = b << 16;
    float f;
    memcpy(&f, &u, 4);
    float probes[] = {f, nextafterf(f, INFINITY), nextafterf(f, -INFINITY)};
    for (size_t k = 0; k < 3; k++) {
      if (!isfinite(probes[k]) && !isinf(probes[k])) { /* NaN: any NaN out */
        ASSERT_TRUE(fl_double_to_bf16(probes[k], &h));
        ASSERT_TRUE((h & 0x7f80) == 0x7f80);
        continue;
      }
      uint32_t pu;
      memcpy(&pu, &probes[k], 4);
      ASSERT_TRUE(fl_double_to_bf16(probes[k], &h));
      if (h != (uint16_t)(pu >> 16)) FL_FAIL_AT("x=%a: got 0x%04x want 0x%04x", (double)probes[k], h, pu >> 16);
      checked++;
    }
  }
  for (int i = 0; i < 200000; i++) {
    double x = ldexp((double)(rnd() >> 11) / 9007199254740992.0 + 0.5, (int)(rnd() % 300) - 160) * ((rnd() & 1) ? -1 : 1);
    if (fabs(x) >= 0x1.ffffffp+127) { /* overflows float: refused, the stock path runs it */
      ASSERT_TRUE(!fl_double_to_bf16(x, &h));
      continue;
    }
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    ASSERT_TRUE(fl_double_to_bf16(x, &h));
    if (h != (uint16_t)(u >> 16)) FL_FAIL_AT("x=%a: got 0x%04x want 0x%04x", x, h, u >> 16);
    checked++;
  }
  ASSERT_TRUE(fl_double_to_bf16(1.005859375, &h));
  ASSERT_EQ(h, 0x3f80);
  ASSERT_TRUE(!fl_double_to_bf16(3.5e38, &h)); /* overflows float: refused, the stock path runs it */
  ASSERT_TRUE(checked > 200000);
}

/* A second, independent reference where the compiler has _Float16 (correctly rounded conversion). */
static void fp16_matches_compiler(void) {
#ifdef __FLT16_MAX__
  for (int i = 0; i < 200000; i++) {
    double x = ldexp((double)(rnd() >> 11) / 9007199254740992.0 + 0.5, (int)(rnd() % 50) - 30);
    if (x >= 65520.0) continue;
    _Float16 f = (_Float16)x;
    uint16_t want, got;
    memcpy(&want, &f, 2);
    ASSERT_TRUE(fl_double_to_fp16(x, &got));
    if (got != want) FL_FAIL_AT("x=%a got 0x%04x compiler 0x%04x", x, got, want);
  }
#else
  printf("     (no _Float16 in this compiler: the exhaustive reference stands alone)\n");
#endif
}

typedef struct {
  fl_kind kind;
  int64_t min;
  uint64_t max;
  int size;
} int_kind;

static const int_kind int_kinds[] = {
    {FL_KIND_I8, INT8_MIN, INT8_MAX, 1},    {FL_KIND_I16, INT16_MIN, INT16_MAX, 2},
    {FL_KIND_I32, INT32_MIN, INT32_MAX, 4}, {FL_KIND_I64, INT64_MIN, INT64_MAX, 8},
    {FL_KIND_U8, 0, UINT8_MAX, 1},          {FL_KIND_U16, 0, UINT16_MAX, 2},
    {FL_KIND_U32, 0, UINT32_MAX, 4},        {FL_KIND_U64, 0, UINT64_MAX, 8},
};

static int64_t read_signed(const unsigned char *p, int size) {
  switch (size) {
    case 1: { int8_t v; memcpy(&v, p, 1); return v; }
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
  }
}

static uint64_t read_unsigned(const unsigned char *p, int size) {
  switch (size) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

static void int_ranges_every_kind(void) {
  fl_error err;
  char want[64];
  for (size_t k = 0; k < sizeof int_kinds / sizeof int_kinds[0]; k++) {
    const int_kind *ik = &int_kinds[k];
    const char *name = fl_kind_name(ik->kind);
    bool is_unsigned = ik->min == 0;
    for (int abi = 0; abi < FL_ABI_COUNT; abi++) {
      unsigned char buf[16] = {0};
      fl_value lo = fl_int(ik->min), hi = ik->max > INT64_MAX ? fl_uint(ik->max) : fl_int((int64_t)ik->max);
      memset(buf, 0xAA, sizeof buf);
      ASSERT_OK(fl_pack_value(abi, ik->kind, &lo, buf, 3, &err), &err);
      if (is_unsigned) ASSERT_EQ_U(read_unsigned(buf, ik->size), 0);
      else ASSERT_EQ(read_signed(buf, ik->size), ik->min);
      ASSERT_EQ(buf[ik->size], 0xAA); /* nothing written past the slot */
      ASSERT_OK(fl_pack_value(abi, ik->kind, &hi, buf, 3, &err), &err);
      ASSERT_EQ_U(read_unsigned(buf, ik->size), ik->max);
      /* One past each end. */
      if (ik->max < UINT64_MAX) {
        fl_value over = fl_uint(ik->max + 1);
        snprintf(want, sizeof want, "int_out_of_range:3:%s", name);
        ASSERT_FAILS(fl_pack_value(abi, ik->kind, &over, buf, 3, &err), &err, FL_BAD_VALUE, want);
        ASSERT_TRUE(!err.stable && !err.backend_submitted);
      }
      if (is_unsigned) {
        fl_value neg = fl_int(-1);
        snprintf(want, sizeof want, "uint_negative:3:%s", name);
        ASSERT_FAILS(fl_pack_value(abi, ik->kind, &neg, buf, 3, &err), &err, FL_BAD_VALUE, want);
      } else if (ik->min > INT64_MIN) {
        fl_value under = fl_int(ik->min - 1);
        snprintf(want, sizeof want, "int_out_of_range:3:%s", name);
        ASSERT_FAILS(fl_pack_value(abi, ik->kind, &under, buf, 3, &err), &err, FL_BAD_VALUE, want);
      }
      /* Random in-range values round-trip. */
      for (int i = 0; i < 1000; i++) {
        uint64_t r = rnd();
        fl_value v;
        if (is_unsigned) v = fl_uint(ik->size == 8 ? r : r % (ik->max + 1));
        else v = fl_int(ik->size == 8 ? (int64_t)r : (int64_t)(r % (ik->max - (uint64_t)ik->min + 1)) + ik->min);
        ASSERT_OK(fl_pack_value(abi, ik->kind, &v, buf, 0, &err), &err);
        if (is_unsigned) ASSERT_EQ_U(read_unsigned(buf, ik->size), v.v.u);
        else ASSERT_EQ(read_signed(buf, ik->size), v.v.i);
      }
    }
  }
}

static void int_refusals(void) {
  fl_error err;
  unsigned char buf[8] = {0};
  fl_value f = fl_float(1.0), p = fl_ptr(buf), n = fl_none();
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_I32, &f, buf, 2, &err), &err, FL_BAD_VALUE, "int_expected:2:i32:float");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_U8, &p, buf, 0, &err), &err, FL_BAD_VALUE, "int_expected:0:u8:ptr");
  ASSERT_FAILS(fl_pack_value(FL_ABI_CUDA, FL_KIND_I64, &n, buf, 5, &err), &err, FL_BAD_VALUE, "int_expected:5:i64:none");
  fl_value big = fl_uint(UINT64_MAX);
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_I64, &big, buf, 1, &err), &err, FL_BAD_VALUE, "int_out_of_range:1:i64");
  fl_value neg = fl_int(INT64_MIN);
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_U64, &neg, buf, 1, &err), &err, FL_BAD_VALUE, "uint_negative:1:u64");
}

static void i1_from_bool(void) {
  fl_error err;
  unsigned char buf[8] = {0};
  fl_value t = fl_bool(true), f = fl_bool(false), one = fl_int(1), two = fl_int(2), m1 = fl_int(-1);
  for (int abi = 0; abi < FL_ABI_COUNT; abi++) {
    int size = abi == FL_ABI_NPU ? 4 : 1;
    memset(buf, 0xAA, sizeof buf);
    ASSERT_OK(fl_pack_value(abi, FL_KIND_I1, &t, buf, 0, &err), &err);
    ASSERT_EQ_U(read_unsigned(buf, size), 1);
    ASSERT_EQ(buf[size], 0xAA);
    ASSERT_OK(fl_pack_value(abi, FL_KIND_I1, &f, buf, 0, &err), &err);
    ASSERT_EQ_U(read_unsigned(buf, size), 0);
    ASSERT_OK(fl_pack_value(abi, FL_KIND_I1, &one, buf, 0, &err), &err);
    ASSERT_EQ_U(read_unsigned(buf, size), 1);
    ASSERT_FAILS(fl_pack_value(abi, FL_KIND_I1, &two, buf, 4, &err), &err, FL_BAD_VALUE, "int_out_of_range:4:i1");
    ASSERT_FAILS(fl_pack_value(abi, FL_KIND_I1, &m1, buf, 4, &err), &err, FL_BAD_VALUE, "int_out_of_range:4:i1");
  }
  /* A bool is an integer for the other integer kinds, as in Python. */
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_I32, &t, buf, 0, &err), &err);
  ASSERT_EQ(read_signed(buf, 4), 1);
}

static void float_kinds(void) {
  fl_error err;
  unsigned char buf[16] = {0};
  for (int i = 0; i < 20000; i++) {
    double x = ldexp((double)(rnd() >> 11) / 9007199254740992.0, (int)(rnd() % 60) - 30) * ((rnd() & 1) ? -1 : 1);
    fl_value v = fl_float(x);
    ASSERT_OK(fl_pack_value(FL_ABI_CUDA, FL_KIND_FP64, &v, buf, 0, &err), &err);
    double d;
    memcpy(&d, buf, 8);
    ASSERT_TRUE(d == x);
    ASSERT_OK(fl_pack_value(FL_ABI_CUDA, FL_KIND_FP32, &v, buf, 0, &err), &err);
    float f;
    memcpy(&f, buf, 4);
    ASSERT_TRUE(f == (float)x);
    uint16_t h, want;
    /* fp16 overflows within this range: the packer must refuse exactly where the reference does. */
    bool fits = reference16(x, 5, 10, &want);
    ASSERT_EQ(fl_pack_value(FL_ABI_HOST, FL_KIND_FP16, &v, buf, 0, &err), fits ? FL_OK : FL_BAD_VALUE);
    memcpy(&h, buf, 2);
    if (fits) ASSERT_EQ(h, want);
    ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_BF16, &v, buf, 0, &err), &err);
    memcpy(&h, buf, 2);
    uint32_t fu;
    memcpy(&fu, &f, 4);
    ASSERT_EQ(h, (uint16_t)(fu >> 16)); /* truncated, as Triton's launchers pack bf16 */
  }
  /* Integers and booleans are numbers for float kinds. */
  fl_value seven = fl_int(7), yes = fl_bool(true), huge = fl_uint(UINT64_MAX);
  double d;
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_FP64, &seven, buf, 0, &err), &err);
  memcpy(&d, buf, 8);
  ASSERT_TRUE(d == 7.0);
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_FP64, &yes, buf, 0, &err), &err);
  memcpy(&d, buf, 8);
  ASSERT_TRUE(d == 1.0);
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_FP64, &huge, buf, 0, &err), &err);
  memcpy(&d, buf, 8);
  ASSERT_TRUE(d == 18446744073709551616.0);
  /* Infinities and NaN pass through every float kind. */
  fl_value inf = fl_float(-INFINITY), nan = fl_float(NAN);
  float f;
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_FP32, &inf, buf, 0, &err), &err);
  memcpy(&f, buf, 4);
  ASSERT_TRUE(isinf(f) && f < 0);
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_BF16, &nan, buf, 0, &err), &err);
}

static void float_refusals(void) {
  fl_error err;
  unsigned char buf[8] = {0};
  fl_value p = fl_ptr(buf), n = fl_none();
  fl_value big16 = fl_float(65520.0), ok16 = fl_float(65519.99), big32 = fl_float(1e39), bigbf = fl_float(3.4e38 * 1.01);
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_FP32, &p, buf, 1, &err), &err, FL_BAD_VALUE, "float_expected:1:fp32:ptr");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_FP64, &n, buf, 1, &err), &err, FL_BAD_VALUE, "float_expected:1:fp64:none");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_FP16, &big16, buf, 6, &err), &err, FL_BAD_VALUE, "float_out_of_range:6:fp16");
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_FP16, &ok16, buf, 6, &err), &err);
  uint16_t h;
  memcpy(&h, buf, 2);
  ASSERT_EQ(h, 0x7bff); /* 65504, the largest finite fp16 */
  ASSERT_FAILS(fl_pack_value(FL_ABI_CUDA, FL_KIND_FP32, &big32, buf, 0, &err), &err, FL_BAD_VALUE, "float_out_of_range:0:fp32");
  ASSERT_FAILS(fl_pack_value(FL_ABI_CUDA, FL_KIND_BF16, &bigbf, buf, 0, &err), &err, FL_BAD_VALUE, "float_out_of_range:0:bf16");
  ASSERT_FAILS(fl_pack_value(FL_ABI_NPU, FL_KIND_FP16, &big16, buf, 2, &err), &err, FL_BAD_VALUE, "float_out_of_range:2:fp16");
}

static void ptr_values(void) {
  fl_error err;
  unsigned char buf[8] = {0};
  uint64_t got;
  fl_value p = fl_ptr((void *)(uintptr_t)0x1234560), n = fl_none(), i = fl_int(4096), u = fl_uint(UINT64_MAX);
  ASSERT_OK(fl_pack_value(FL_ABI_HOST, FL_KIND_PTR, &p, buf, 0, &err), &err);
  memcpy(&got, buf, 8);
  ASSERT_EQ_U(got, 0x1234560);
  ASSERT_OK(fl_pack_value(FL_ABI_CUDA, FL_KIND_PTR, &n, buf, 0, &err), &err);
  memcpy(&got, buf, 8);
  ASSERT_EQ_U(got, 0);
  ASSERT_OK(fl_pack_value(FL_ABI_NPU, FL_KIND_PTR, &i, buf, 0, &err), &err);
  memcpy(&got, buf, 8);
  ASSERT_EQ_U(got, 4096);
  ASSERT_OK(fl_pack_value(FL_ABI_NPU, FL_KIND_PTR, &u, buf, 0, &err), &err);
  memcpy(&got, buf, 8);
  ASSERT_EQ_U(got, UINT64_MAX);
  fl_value neg = fl_int(-8), f = fl_float(1.5), b = fl_bool(true);
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_PTR, &neg, buf, 9, &err), &err, FL_BAD_VALUE, "ptr_negative:9");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_PTR, &f, buf, 9, &err), &err, FL_BAD_VALUE, "ptr_expected:9:float");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_PTR, &b, buf, 9, &err), &err, FL_BAD_VALUE, "ptr_expected:9:bool");
}

static void bad_calls(void) {
  fl_error err;
  unsigned char buf[8] = {0};
  fl_value v = fl_int(1), weird = fl_int(1);
  weird.type = 42;
  ASSERT_FAILS(fl_pack_value(7, FL_KIND_I32, &v, buf, 0, &err), &err, FL_BAD_DESCRIPTOR, "abi_unknown:7");
  ASSERT_TRUE(err.stable);
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, (fl_kind)99, &v, buf, 3, &err), &err, FL_BAD_KIND, "kind_unknown:3:99");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_I32, NULL, buf, 3, &err), &err, FL_BAD_VALUE, "value_null:3");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_I32, &v, NULL, 3, &err), &err, FL_BAD_VALUE, "dst_null:3");
  ASSERT_FAILS(fl_pack_value(FL_ABI_HOST, FL_KIND_I32, &weird, buf, 3, &err), &err, FL_BAD_VALUE, "int_expected:3:i32:unknown");
  /* Names and parsing. */
  fl_kind k;
  ASSERT_OK(fl_kind_parse("*fp16", &k, &err), &err);
  ASSERT_EQ(k, FL_KIND_PTR);
  ASSERT_OK(fl_kind_parse("u1", &k, &err), &err);
  ASSERT_EQ(k, FL_KIND_I1);
  ASSERT_OK(fl_kind_parse("bf16", &k, &err), &err);
  ASSERT_EQ(k, FL_KIND_BF16);
  ASSERT_FAILS(fl_kind_parse("constexpr", &k, &err), &err, FL_BAD_KIND, "kind_constexpr_not_abi");
  ASSERT_OK(fl_kind_parse("nvTmaDesc", &k, &err), &err); /* Triton's expanded signature's tensor map */
  ASSERT_EQ(k, FL_KIND_TMAP);
  ASSERT_FAILS(fl_kind_parse("nvTmaDes", &k, &err), &err, FL_BAD_KIND, "kind_unknown:nvTmaDes");
  ASSERT_FAILS(fl_kind_parse("*", &k, &err), &err, FL_BAD_KIND, "kind_unknown:*");
  for (int i = 0; i < FL_KIND_COUNT; i++) {
    ASSERT_OK(fl_kind_parse(fl_kind_name(i), &k, &err), &err);
    ASSERT_EQ(k, i);
  }
  ASSERT_TRUE(fl_kind_name(FL_KIND_COUNT) == NULL);
  ASSERT_STREQ(fl_status_name(FL_BAD_STREAM), "BAD_STREAM");
  ASSERT_STREQ(fl_status_name(-1), "UNKNOWN");
}

static void npu_slots(void) {
  fl_error err;
  unsigned char buf[8] = {0};
  memset(buf, 0xAA, sizeof buf);
  fl_value h = fl_float(1.5);
  ASSERT_OK(fl_pack_value(FL_ABI_NPU, FL_KIND_FP16, &h, buf, 0, &err), &err);
  float f;
  memcpy(&f, buf, 4);
  ASSERT_TRUE(f == 1.5f); /* Triton-Ascend passes fp16 scalars as a C float */
  ASSERT_EQ(buf[4], 0xAA);
  fl_value c = fl_int(-3);
  ASSERT_OK(fl_pack_value(FL_ABI_NPU, FL_KIND_I8, &c, buf, 0, &err), &err);
  ASSERT_EQ(read_signed(buf, 1), -3);
}

/* The kinds' classes, from their rows: one pointer, nine integers (four unsigned), four floats; out
 * of range is none of them. */
static void kind_classes(void) {
  int ints = 0, floats = 0, unsigned_ = 0;
  for (int k = 0; k < FL_KIND_COUNT; k++) {
    ints += fl_kind_is_int((fl_kind)k);
    floats += fl_kind_is_float((fl_kind)k);
    unsigned_ += fl_kind_is_unsigned((fl_kind)k);
    ASSERT_TRUE(!(fl_kind_is_int((fl_kind)k) && fl_kind_is_float((fl_kind)k)));
  }
  ASSERT_EQ(ints, 9);
  ASSERT_EQ(floats, 4);
  ASSERT_EQ(unsigned_, 4);
  ASSERT_TRUE(!fl_kind_is_int(FL_KIND_PTR) && !fl_kind_is_float(FL_KIND_PTR) && !fl_kind_is_unsigned(FL_KIND_PTR));
  ASSERT_TRUE(fl_kind_is_unsigned(FL_KIND_U8) && fl_kind_is_unsigned(FL_KIND_U64) && !fl_kind_is_unsigned(FL_KIND_I64));
  ASSERT_TRUE(!fl_kind_is_int(FL_KIND_COUNT) && !fl_kind_is_float((fl_kind)-1) && !fl_kind_is_unsigned(FL_KIND_COUNT));
  ASSERT_TRUE(!fl_kind_is_int(FL_KIND_TMAP) && !fl_kind_is_float(FL_KIND_TMAP));
  /* A tensor map is encoded by its plan's backend: packed alone, it is refused by name. */
  fl_error err;
  fl_tensor_map_value t = {.rank = 1};
  fl_value v = fl_tensor_map(&t);
  unsigned char buf[128];
  ASSERT_FAILS(fl_pack_value(FL_ABI_CUDA, FL_KIND_TMAP, &v, buf, 3, &err), &err, FL_BAD_KIND, "tmap_needs_plan:3");
}
