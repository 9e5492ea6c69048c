/* kinds.c: the kinds' table, the names of kinds and ABIs, and parsing them (and backend names). */
#include "fl_internal.h"

#include <string.h>

#define PTR FL__CLASS_PTR
#define INT FL__CLASS_INT
#define FLT FL__CLASS_FLOAT
#define TMAP FL__CLASS_TMAP

/* Every fact of a kind, in its row: layout.c reads the sizes, pack.c the class, range and format,
 * plans derive their inline packing from it, the extension reads a Python value by its class.
 * Sizes: host, cuda and hip take the natural C size, i1 one byte (Triton's CUDA launcher passes booleans
 * as int8), fp16 and bf16 their 16 bits; npu follows Triton-Ascend's ty_to_cpp: i1 is an int32_t
 * and a float below 64 bits a C float, and its launcher aligns pointers and types whose name ends
 * in "64" to 8, everything else to 4 (an i8 takes one byte at a 4-aligned offset). */
const fl__kind_row fl__kinds[FL_KIND_COUNT] = {
    /*               name    class size npu align unsigned max_pos     max_neg                 format */
    [FL_KIND_PTR] = {"ptr", PTR, 8, 8, 8, true, UINT64_MAX, 0, FL__FLOAT_NONE},
    [FL_KIND_I1] = {"i1", INT, 1, 4, 4, false, 1, 0, FL__FLOAT_NONE},
    [FL_KIND_I8] = {"i8", INT, 1, 1, 4, false, INT8_MAX, 128u, FL__FLOAT_NONE},
    [FL_KIND_I16] = {"i16", INT, 2, 2, 4, false, INT16_MAX, 32768u, FL__FLOAT_NONE},
    [FL_KIND_I32] = {"i32", INT, 4, 4, 4, false, INT32_MAX, 2147483648u, FL__FLOAT_NONE},
    [FL_KIND_I64] = {"i64", INT, 8, 8, 8, false, INT64_MAX, 9223372036854775808u, FL__FLOAT_NONE},
    [FL_KIND_U8] = {"u8", INT, 1, 1, 4, true, UINT8_MAX, 0, FL__FLOAT_NONE},
    [FL_KIND_U16] = {"u16", INT, 2, 2, 4, true, UINT16_MAX, 0, FL__FLOAT_NONE},
    [FL_KIND_U32] = {"u32", INT, 4, 4, 4, true, UINT32_MAX, 0, FL__FLOAT_NONE},
    [FL_KIND_U64] = {"u64", INT, 8, 8, 8, true, UINT64_MAX, 0, FL__FLOAT_NONE},
    [FL_KIND_FP16] = {"fp16", FLT, 2, 4, 4, false, 0, 0, FL__FLOAT_FP16},
    [FL_KIND_BF16] = {"bf16", FLT, 2, 4, 4, false, 0, 0, FL__FLOAT_BF16},
    [FL_KIND_FP32] = {"fp32", FLT, 4, 4, 4, false, 0, 0, FL__FLOAT_FP32},
    [FL_KIND_FP64] = {"fp64", FLT, 8, 8, 8, false, 0, 0, FL__FLOAT_FP64},
    /* cuda only: no npu slot (layout.c refuses it for every other ABI) */
    [FL_KIND_TMAP] = {"tmap", TMAP, 128, 0, 0, false, 0, 0, FL__FLOAT_NONE},
};

#undef PTR
#undef INT
#undef FLT
#undef TMAP

const char *fl_kind_name(fl_kind kind) {
  if ((unsigned)kind >= FL_KIND_COUNT) return NULL;
  return fl__kinds[kind].name;
}

bool fl_kind_is_int(fl_kind kind) { return (unsigned)kind < FL_KIND_COUNT && fl__kinds[kind].cls == FL__CLASS_INT; }
bool fl_kind_is_float(fl_kind kind) { return (unsigned)kind < FL_KIND_COUNT && fl__kinds[kind].cls == FL__CLASS_FLOAT; }
bool fl_kind_is_unsigned(fl_kind kind) { return fl_kind_is_int(kind) && fl__kinds[kind].is_unsigned; }

/* Triton spells a few scalar types differently from our kind names; these are the aliases seen in
 * its signatures across versions ("u1" is how some versions write a boolean). */
static const struct {
  const char *text;
  fl_kind kind;
} aliases[] = {
    {"u1", FL_KIND_I1},    {"f16", FL_KIND_FP16}, {"f32", FL_KIND_FP32},
    {"f64", FL_KIND_FP64}, {"bool", FL_KIND_I1},   {"nvTmaDesc", FL_KIND_TMAP},
};

fl_status fl_kind_parse(const char *text, fl_kind *out, fl_error *err) {
  if (!text) return fl__fail(err, FL_BAD_KIND, true, "kind_null");
  if (!out) return fl__fail(err, FL_BAD_KIND, true, "kind_out_null");
  /* A Triton pointer type ("*fp32", "*i8", "*k*fp16") is a pointer whatever it points to. */
  if (text[0] == '*') {
    if (text[1] == '\0') return fl__fail(err, FL_BAD_KIND, true, "kind_unknown:%s", text);
    *out = FL_KIND_PTR;
    return FL_OK;
  }
  for (int k = 0; k < FL_KIND_COUNT; k++) {
    if (strcmp(text, fl__kinds[k].name) == 0) {
      *out = (fl_kind)k;
      return FL_OK;
    }
  }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    if (strcmp(text, aliases[i].text) == 0) {
      *out = aliases[i].kind;
      return FL_OK;
    }
  }
  if (strcmp(text, "constexpr") == 0)
    return fl__fail(err, FL_BAD_KIND, true, "kind_constexpr_not_abi");
  return fl__fail(err, FL_BAD_KIND, true, "kind_unknown:%.60s", text);
}

static const char *const abi_names[FL_ABI_COUNT] = {"host", "cuda", "npu", "hip"};

const char *fl_abi_name(fl_abi abi) {
  if ((unsigned)abi >= FL_ABI_COUNT) return NULL;
  return abi_names[abi];
}

fl_status fl_abi_parse(const char *name, fl_abi *out, fl_error *err) {
  if (!name || !out) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_null");
  for (int a = 0; a < FL_ABI_COUNT; a++) {
    if (strcmp(name, abi_names[a]) == 0) {
      *out = (fl_abi)a;
      return FL_OK;
    }
  }
  return fl__fail(err, FL_BAD_DESCRIPTOR, true, "abi_unknown:%.60s", name);
}

/* Backend names live in each backend's table. */
const char *fl_backend_name(fl_backend_id backend) {
  const fl__backend *be = fl__backend_get(backend);
  return be ? be->name : NULL;
}

fl_status fl_backend_parse(const char *name, fl_backend_id *out, fl_error *err) {
  if (!name || !out) return fl__fail(err, FL_BAD_DESCRIPTOR, true, "backend_null");
  for (int b = 0; b < FL_BACKEND_COUNT; b++) {
    if (strcmp(name, fl__backend_get((fl_backend_id)b)->name) == 0) {
      *out = (fl_backend_id)b;
      return FL_OK;
    }
  }
  return fl__fail(err, FL_BAD_DESCRIPTOR, true, "backend_unknown:%.60s", name);
}
