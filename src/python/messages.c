/* messages.c: the sentence a person reads for a reason code. The C library's reasons are short
 * stable codes ("int_out_of_range:3:i32": code, then fields); the errors raised carry the code as
 * `reason` (what code decides on) and this sentence as their message, naming the argument by its
 * name when the plan has names. */
#include "ext.h"

typedef struct message_row {
  const char *code;
  bool indexed;     /* the first field is an argument's index */
  const char *text; /* $A: the argument; $1..$3: the fields after the code (after the index when indexed) */
} message_row;

static const message_row rows[] = {
    {"int_expected", true, "$A must be an int (its kind is $1), not $2"},
    {"float_expected", true, "$A must be a float or an int (its kind is $1), not $2"},
    {"ptr_expected", true, "$A must be a tensor, an int address or None (a pointer argument), not $1"},
    {"ptr_extract_failed", true,
     "$A must be a tensor, an int address or None (a pointer argument); data_ptr() of a $1 failed"},
    {"int_out_of_range", true, "$A does not fit in its kind, $1"},
    {"uint_negative", true, "$A is negative, but its kind, $1, is unsigned"},
    {"float_out_of_range", true, "$A does not fit in its kind, $1"},
    {"ptr_negative", true, "$A is a negative address"},
    {"ptr_out_of_range", true, "$A is an address wider than 64 bits"},
    {"ptr_device_mismatch", true, "$A lives on a device this plan's backend does not launch on"},
    {"ptr_meta_tensor", true, "$A is a meta tensor: it has no memory to launch on"},
    {"value_null", true, "$A is missing"},
    {"fixed_ptr_unsupported", true, "$A is a pointer, and pointers cannot be fixed: pass it at each launch"},
    {"fixed_args_null", true, "fixed argument $A is missing"},
    {"fixed_tmap_unsupported", true, "$A is a tensor map, and tensor maps cannot be fixed: pass it at each launch"},
    {"tmap_expected", true, "$A must be a tensor descriptor (its kind is tmap)"},
    {"tmap_descriptor_invalid", true,
     "$A is not a tensor descriptor Triton reads: its shape and strides must be 1 to 5 ints"},
    {"tmap_inner_stride", true, "$A is a tensor descriptor whose last stride is not 1: Triton encodes none other"},
    {"tmap_rank_mismatch", true, "$A is a tensor descriptor of rank $1, but the kernel was compiled for rank $2"},
    {"tmap_needs_plan", true, "$A is a tensor map: it is encoded by its plan's backend, not packed alone"},
    {"tmap_meta_invalid", true, "tensor_maps[$0] is not a tensor map's metadata: $1"},
    {"tensor_maps_count_mismatch", false, "$1 tensor map metadata entries were given for $2 tmap arguments"},
    {"tmap_unsupported", false, "the $1 backend cannot encode tensor maps"},
    {"tmap_encode", false, "the $1 driver refused to encode a tensor map: $2"},
    {"kind_not_in_abi", true, "$A's kind, $1, has no slot in the $2 ABI"},
    {"arg_name_invalid", true, "arg_names[$0] ('$1') is not an identifier or is a reserved word"},
    {"arg_name_duplicate", true, "arg_names[$0] ('$1') repeats an earlier name"},
    {"arg_name_null", true, "arg_names[$0] is missing"},
    {"grid_var_missing", true, "the grid reads $A, which is not an argument of this launch"},
    {"grid_var_not_int", true, "the grid reads $A, which must be an integer argument (its kind is $1)"},
    {"grid_var_out_of_range", true, "the grid reads $A, whose value is out of the grid's range"},
    {"stream_invalid", false, "stream=$1 is not a stream of this plan's backend"},
    {"stream_invalid_type", false, "stream= must be an int handle, not $1"},
    {"stream_is_none", false, "stream=None: pass the handle of a stream of this plan's backend"},
    {"stream_table_full", false, "no more streams can be created (all $1 are in use)"},
    {"kind_unknown", false,
     "'$1' is not a kind: ptr, i1, i8, i16, i32, i64, u1, u8, u16, u32, u64, fp16, bf16, fp32, fp64, tmap, "
     "or a Triton signature entry such as *fp32"},
    {"backend_unknown", false, "'$1' is not a backend: host, null, cuda or npu"},
    {"backend_unavailable", false, "the $1 backend is not available here: $2"},
    {"backend_error", false, "the $1 backend reported an error: $2 $3"},
    {"setting_unknown", false, "the $1 backend has no setting '$2'"},
    {"setting_invalid", false, "the $1 backend's setting $2 does not take that value"},
    {"backend_loaded", false, "the $1 backend has loaded: its setting $2 can no longer change"},
    {"fault_plan_not_wrapped", false, "this plan was made while the $1 backend was not wrapped for fault injection"},
    {"abi_unknown", false, "'$1' is not an ABI: host, cuda or npu"},
    {"abi_not_for_backend", false, "the $1 backend does not take the $2 ABI"},
    {"option_unknown", false, "the $1 ABI has no option $2"},
    {"option_not_for_abi", false, "$1 is an option of another ABI, not of the $2 ABI"},
    {"option_out_of_range", false, "option $1 is out of range ($2)"},
    {"too_many_args", false, "too many kernel arguments ($1; at most $2)"},
    {"runtime_arg_count_exceeds", false, "runtime_arg_count $1 exceeds the $2 kinds given"},
    {"args_size_exceeds", false, "the packed arguments take $1 bytes, more than the backend's limit of $2"},
    {"args_size_mismatch", false, "the packed arguments take $1 bytes, the kernel expects $2"},
    {"template_buffer_too_small", false, "the buffer holds $1 bytes, the template needs $2"},
    {"invalid_grid", false, "grid= must be one to three non-negative ints, not $1"},
    {"grid_missing", false, "this plan has no grid of its own: pass grid=(x, y, z) at each launch"},
    {"grid_unexpected", false, "grid= was given, but this plan computes its own grid"},
    {"grid_dim_zero", false, "the grid's dimension $1 is 0: nothing would run"},
    {"grid_dim_negative", false, "the grid's dimension $1 is negative"},
    {"grid_dim_exceeds", false, "the grid's dimension $1 exceeds what the backend can launch"},
    {"grid_product_exceeds", false, "the grid has more programs than the backend can launch"},
    {"grid_overflow", false, "computing the grid overflowed 64 bits ($1)"},
    {"kernel_load", false, "the kernel could not be loaded by the $1 backend: $2 $3"},
    {"shared_mem_exceeds_device", false, "the kernel needs $1 bytes of shared memory, the device allows $2"},
    {"cuda_no_current_context", false, "no current CUDA context: initialise CUDA first (torch.cuda.init())"},
    {"cuda_context_changed", false, "the current CUDA context is not the one the plan was built in"},
    {"npu_device_changed", false, "the current NPU device changed from $1 to $2 since the plan was built"},
    {"npu_queue_unavailable", false, "torch_npu's task queue cannot be used: $1"},
    {"dlopen", false, "a library could not be loaded: $1"},
    {"dlsym", false, "a symbol could not be found: $1"},
};

/* Appends at most the room left; never past the end. */
static void put(char *out, size_t n, size_t *at, const char *s, size_t len) {
  while (len-- && *s && *at + 1 < n) out[(*at)++] = *s++;
  out[*at] = '\0';
}

/* The sentence of `row` (or, for a code without one, its words and fields) into out. */
static void render(const message_row *row, const char *code, const char *arg, const char *const *fields,
                   const size_t *lens, size_t nf, size_t first, char *out, size_t n) {
  size_t at = 0;
  out[0] = '\0';
  if (!row) {
    for (size_t i = 0; code[i] && at + 1 < n; i++) out[at++] = code[i] == '_' ? ' ' : code[i];
    out[at] = '\0';
    if (nf > 1) {
      put(out, n, &at, " (", 2);
      put(out, n, &at, fields[1], strlen(fields[1]));
      put(out, n, &at, ")", 1);
    }
    return;
  }
  for (const char *t = row->text; *t; t++) {
    if (t[0] == '$' && t[1] == 'A') {
      put(out, n, &at, arg, strlen(arg));
      t++;
    } else if (t[0] == '$' && t[1] >= '0' && t[1] <= '3') {
      size_t f = t[1] == '0' ? 1 : first + (size_t)(t[1] - '1');
      /* the last field named takes the rest of the reason, colons and all */
      bool last = t[1] != '0' && !strstr(t + 2, "$");
      if (f < nf) put(out, n, &at, fields[f], last ? strlen(fields[f]) : lens[f]);
      t++;
    } else {
      put(out, n, &at, t, 1);
    }
  }
}

void fl_ext_describe(const char *reason, PyObject *names, fl_ext_described *d) {
  d->index = -1;
  d->name = NULL;
  /* "kinds[3]: kind_unknown:i33": the entry's index, then the reason about it */
  long entry = -1;
  const char *full = reason;
  if (strncmp(reason, "kinds[", 6) == 0 && strspn(reason + 6, "0123456789") > 0) {
    const char *close = reason + 6 + strspn(reason + 6, "0123456789");
    if (close[0] == ']' && close[1] == ':') {
      entry = strtol(reason + 6, NULL, 10);
      reason = close + 2 + (close[2] == ' ');
    }
  }
  /* code, then up to four fields, split at ':' (a path or a message in the last field keeps its colons) */
  const char *fields[5] = {0};
  size_t lens[5] = {0}, nf = 0;
  const char *p = reason;
  while (nf < 5) {
    const char *colon = nf < 4 ? strchr(p, ':') : NULL;
    fields[nf] = p;
    lens[nf] = colon ? (size_t)(colon - p) : strlen(p);
    nf++;
    if (!colon) break;
    p = colon + 1;
  }
  size_t codelen = lens[0] < sizeof d->code - 1 ? lens[0] : sizeof d->code - 1;
  memcpy(d->code, reason, codelen);
  d->code[codelen] = '\0';
  const message_row *row = NULL;
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
    if (strcmp(rows[r].code, d->code) == 0) row = &rows[r];
  size_t first = 1; /* the field $1 names */
  char arg[96] = "";
  if (row && row->indexed && nf > 1 && lens[1] > 0 && lens[1] < 10 && strspn(fields[1], "0123456789") == lens[1]) {
    d->index = strtol(fields[1], NULL, 10);
    first = 2;
    if (names && PyTuple_Check(names) && d->index < PyTuple_GET_SIZE(names) &&
        PyUnicode_Check(PyTuple_GET_ITEM(names, d->index)))
      d->name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, d->index));
    if (d->name)
      snprintf(arg, sizeof arg, "argument '%.60s' (index %ld)", d->name, d->index);
    else
      snprintf(arg, sizeof arg, "argument %ld", d->index);
    if (!d->name) PyErr_Clear();
  }
  render(row, d->code, arg, fields, lens, nf, first, d->message, sizeof d->message);
  if (strcmp(reason, "stream_invalid:0x0") == 0)
    snprintf(d->message, sizeof d->message,
             "stream= is missing or 0: pass stream=<handle>, a stream of this plan's backend "
             "(fastlaunch.host.Stream().handle on the host backend; torch's current stream on a GPU)");
  if (entry >= 0) {
    char inner[sizeof d->message];
    memcpy(inner, d->message, sizeof inner);
    snprintf(d->message, sizeof d->message, "kinds[%ld]: %.480s", entry, inner);
    d->index = entry;
  }
  size_t len = strlen(d->message);
  snprintf(d->message + len, sizeof d->message - len, " [%s]", full);
}
