/* hip_stub.c: a libamdhip64.so for machines without an AMD GPU, so Triton's own AMD launcher and
 * fastlaunch's hip backend both run here against the same runtime. It launches nothing.
 *
 * hipModuleLoadData(Ex) reads an hsaco the way the HIP runtime does: the ELF's NT_AMDGPU_METADATA
 * note (MessagePack) gives each kernel's name, kernarg segment size and each argument's offset and
 * size. A launch is counted and, when stub.record is set, recorded: function, grid, block, shared
 * memory, stream, and the argument bytes laid out as the kernarg segment (from a parameter array by
 * the metadata's offsets, as the runtime copies them; from HIP_LAUNCH_PARAM_BUFFER_POINTER as is).
 * Errors are injectable (load, launch, hipGetDevice), the driver version settable, one address
 * refusable as a host pointer. */
#include "hip_stub.h"

#include <elf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

API hip_stub_state stub = {.version = 60443482, .warp_size = 64, .max_shared = 65536};

typedef struct stub_module {
  struct stub_module *next; /* the loaded modules, to tell their functions from made-up handles */
  uint32_t count;
  hip_stub_kernel kernels[HIP_STUB_MAX_KERNELS];
} stub_module;

static stub_module *loaded;

/* The loaded modules' functions, in an open-addressing set: a launch tells a function of this
 * stand-in from a made-up handle in constant time, as the runtime reads a handle's kernel. */
#define KNOWN_SLOTS 16384
static const hip_stub_kernel *known_set[KNOWN_SLOTS];

static size_t slot_of(const void *f) { return ((uintptr_t)f >> 4) * 0x9E3779B97F4A7C15ull >> 50; }

static void known_add(const hip_stub_kernel *k) {
  for (size_t i = slot_of(k), n = 0; n < KNOWN_SLOTS; i = (i + 1) % KNOWN_SLOTS, n++)
    if (!known_set[i] || known_set[i] == k) {
      known_set[i] = k;
      return;
    }
}

static void known_remove(const hip_stub_kernel *k) {
  for (size_t i = slot_of(k), n = 0; n < KNOWN_SLOTS && known_set[i]; i = (i + 1) % KNOWN_SLOTS, n++)
    if (known_set[i] == k) {
      /* Re-insert the rest of the cluster so that no lookup stops early. */
      known_set[i] = NULL;
      for (size_t j = (i + 1) % KNOWN_SLOTS; known_set[j]; j = (j + 1) % KNOWN_SLOTS) {
        const hip_stub_kernel *m = known_set[j];
        known_set[j] = NULL;
        known_add(m);
      }
      return;
    }
}

/* ---- MessagePack, the subset code object metadata uses ---- */
typedef struct mp {
  const unsigned char *p, *end;
  bool bad;
} mp;

static uint64_t be(mp *m, int n) {
  if (m->end - m->p < n) {
    m->bad = true;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | m->p[i];
  m->p += n;
  return v;
}

/* The next value's header: 's' str (len), 'm' map (count), 'a' array (count), 'i' integer (value),
 * 'x' anything else (skipped whole). */
static char next(mp *m, uint64_t *n) {
  if (m->p >= m->end) return m->bad = true, 'x';
  unsigned c = *m->p++;
  if (c <= 0x7f) return *n = c, 'i';
  if (c >= 0xe0) return *n = (uint64_t)(int64_t)(int8_t)c, 'i';
  if ((c & 0xf0) == 0x80) return *n = c & 0x0f, 'm';
  if ((c & 0xf0) == 0x90) return *n = c & 0x0f, 'a';
  if ((c & 0xe0) == 0xa0) return *n = c & 0x1f, 's';
  switch (c) {
    case 0xcc: return *n = be(m, 1), 'i';
    case 0xcd: return *n = be(m, 2), 'i';
    case 0xce: return *n = be(m, 4), 'i';
    case 0xcf: return *n = be(m, 8), 'i';
    case 0xd0: return *n = (uint64_t)(int8_t)be(m, 1), 'i';
    case 0xd1: return *n = (uint64_t)(int16_t)be(m, 2), 'i';
    case 0xd2: return *n = (uint64_t)(int32_t)be(m, 4), 'i';
    case 0xd3: return *n = be(m, 8), 'i';
    case 0xd9: return *n = be(m, 1), 's';
    case 0xda: return *n = be(m, 2), 's';
    case 0xdb: return *n = be(m, 4), 's';
    case 0xdc: return *n = be(m, 2), 'a';
    case 0xdd: return *n = be(m, 4), 'a';
    case 0xde: return *n = be(m, 2), 'm';
    case 0xdf: return *n = be(m, 4), 'm';
    case 0xc4: *n = be(m, 1); break;
    case 0xc5: *n = be(m, 2); break;
    case 0xc6: *n = be(m, 4); break;
    case 0xca: *n = 4; break;
    case 0xcb: *n = 8; break;
    default: *n = 0; break; /* nil, booleans */
  }
  if ((uint64_t)(m->end - m->p) < *n) return m->bad = true, 'x';
  m->p += *n;
  return 'x';
}

static void skip(mp *m, int depth) {
  uint64_t n;
  char t = next(m, &n);
  if (depth > 16) m->bad = true;
  if (t == 's') {
    if ((uint64_t)(m->end - m->p) < n) m->bad = true;
    else m->p += n;
  } else if (t == 'a' || t == 'm') {
    for (uint64_t i = 0; i < (t == 'm' ? 2 * n : n) && !m->bad; i++) skip(m, depth + 1);
  }
}

/* A map key: true when it is the string `want` (the key consumed either way). */
static bool key_is(mp *m, const char *want) {
  uint64_t n;
  const unsigned char *at = m->p;
  char t = next(m, &n);
  if (t != 's') {
    m->p = at;
    skip(m, 0);
    return false;
  }
  if ((uint64_t)(m->end - m->p) < n) return m->bad = true, false;
  bool same = strlen(want) == n && memcmp(m->p, want, n) == 0;
  m->p += n;
  return same;
}

static uint64_t int_value(mp *m) {
  uint64_t n;
  const unsigned char *at = m->p;
  if (next(m, &n) == 'i') return n;
  m->p = at;
  skip(m, 0);
  m->bad = true;
  return 0;
}

static void read_kernel(mp *m, hip_stub_kernel *k) {
  uint64_t fields;
  if (next(m, &fields) != 'm') return (void)(m->bad = true);
  for (uint64_t f = 0; f < fields && !m->bad; f++) {
    uint64_t n;
    if (next(m, &n) != 's' || (uint64_t)(m->end - m->p) < n) {
      m->bad = true;
      return;
    }
    const char *key = (const char *)m->p;
    m->p += n;
    if (n == 5 && memcmp(key, ".name", 5) == 0) {
      uint64_t len;
      if (next(m, &len) != 's' || len >= sizeof k->name || (uint64_t)(m->end - m->p) < len) {
        m->bad = true;
        return;
      }
      memcpy(k->name, m->p, len);
      k->name[len] = '\0';
      m->p += len;
    } else if (n == 21 && memcmp(key, ".kernarg_segment_size", 21) == 0) {
      k->kernarg_size = (uint32_t)int_value(m);
    } else if (n == 5 && memcmp(key, ".args", 5) == 0) {
      uint64_t nargs;
      if (next(m, &nargs) != 'a') return (void)(m->bad = true);
      for (uint64_t i = 0; i < nargs && !m->bad; i++) {
        uint64_t nf;
        if (next(m, &nf) != 'm') return (void)(m->bad = true);
        uint32_t off = 0, size = 0;
        for (uint64_t j = 0; j < nf && !m->bad; j++) {
          uint64_t kl;
          if (next(m, &kl) != 's' || (uint64_t)(m->end - m->p) < kl) return (void)(m->bad = true);
          const char *ak = (const char *)m->p;
          m->p += kl;
          if (kl == 7 && memcmp(ak, ".offset", 7) == 0) off = (uint32_t)int_value(m);
          else if (kl == 5 && memcmp(ak, ".size", 5) == 0) size = (uint32_t)int_value(m);
          else skip(m, 0);
        }
        if (k->nargs < HIP_STUB_MAX_ARGS) {
          k->offset[k->nargs] = off;
          k->size[k->nargs++] = size;
        }
      }
    } else {
      skip(m, 0);
    }
  }
}

/* The metadata note's kernels into mod; false when the image is not an hsaco with one. */
static bool read_metadata(const unsigned char *desc, size_t n, stub_module *mod) {
  mp m = {desc, desc + n, false};
  uint64_t top;
  if (next(&m, &top) != 'm') return false;
  for (uint64_t i = 0; i < top && !m.bad; i++) {
    if (!key_is(&m, "amdhsa.kernels")) {
      skip(&m, 0);
      continue;
    }
    uint64_t nk;
    if (next(&m, &nk) != 'a') return false;
    for (uint64_t k = 0; k < nk && !m.bad; k++) {
      if (mod->count >= HIP_STUB_MAX_KERNELS) {
        skip(&m, 0);
        continue;
      }
      hip_stub_kernel *kk = &mod->kernels[mod->count];
      memset(kk, 0, sizeof *kk);
      read_kernel(&m, kk);
      if (!m.bad) mod->count++;
    }
  }
  return !m.bad && mod->count > 0;
}

static bool read_image(const void *image, stub_module *mod) {
  const unsigned char *b = image;
  const Elf64_Ehdr *eh = image;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_AMDGPU)
    return false;
  for (unsigned s = 0; s < eh->e_shnum; s++) {
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff + (size_t)s * eh->e_shentsize);
    if (sh->sh_type != SHT_NOTE) continue;
    size_t at = 0;
    while (at + 12 <= sh->sh_size) {
      const uint32_t *h = (const uint32_t *)(b + sh->sh_offset + at);
      uint32_t namesz = h[0], descsz = h[1], type = h[2];
      size_t name_at = at + 12, desc_at = name_at + ((namesz + 3u) & ~3u);
      if (desc_at + descsz > sh->sh_size) break;
      if (type == 32 && namesz == 7 && memcmp(b + sh->sh_offset + name_at, "AMDGPU", 7) == 0)
        return read_metadata(b + sh->sh_offset + desc_at, descsz, mod);
      at = desc_at + ((descsz + 3u) & ~3u);
    }
  }
  return false;
}

/* ---- the runtime's API, as much of it as Triton's AMD driver and fastlaunch load ---- */
enum { OK = 0, INVALID_VALUE = 1, INVALID_IMAGE = 200, NOT_FOUND = 500 };

API const char *hipGetErrorName(int e) {
  switch (e) {
    case 0: return "hipSuccess";
    case 1: return "hipErrorInvalidValue";
    case 101: return "hipErrorInvalidDevice";
    case 200: return "hipErrorInvalidImage";
    case 209: return "hipErrorNoBinaryForGpu";
    case 400: return "hipErrorInvalidHandle";
    case 500: return "hipErrorNotFound";
    case 701: return "hipErrorLaunchOutOfResources";
    case 719: return "hipErrorLaunchFailure";
    default: return "hipErrorUnknown";
  }
}
API const char *hipGetErrorString(int e) { return hipGetErrorName(e); }
API int hipGetLastError(void) { return OK; }
API int hipDriverGetVersion(int *v) {
  if (!v) return INVALID_VALUE;
  *v = stub.version;
  return OK;
}
API int hipRuntimeGetVersion(int *v) { return hipDriverGetVersion(v); }
API int hipGetDevice(int *d) {
  stub.get_device_calls++;
  if (stub.fail_get_device) return stub.fail_get_device;
  *d = stub.device;
  return OK;
}
/* The device and stream as torch's C shim answers them, for the JIT dispatcher's C sources. */
API int hip_stub_current_device(int32_t *device) {
  *device = stub.device;
  return 0;
}
API int hip_stub_current_stream(int32_t device, void **stream) {
  if (device != stub.device) return 1;
  *stream = (void *)(uintptr_t)stub.stream_handle;
  return 0;
}
API int hipSetDevice(int d) {
  stub.device = d;
  return OK;
}
API int hipGetDeviceCount(int *n) {
  *n = 1;
  return OK;
}
API int hipDeviceGetAttribute(int *v, int attr, int device) {
  (void)device;
  *v = attr == 87 ? stub.warp_size : attr == 74 ? stub.max_shared : 0;
  return OK;
}
API int hipModuleLoadDataEx(void **module, const void *image, unsigned n, void *options, void **values) {
  (void)n, (void)options, (void)values;
  if (stub.fail_load) return stub.fail_load;
  if (!module || !image) return INVALID_VALUE;
  stub_module *mod = calloc(1, sizeof *mod);
  if (!mod) return 2; /* hipErrorOutOfMemory */
  if (!read_image(image, mod)) {
    free(mod);
    return INVALID_IMAGE;
  }
  mod->next = loaded;
  loaded = mod;
  for (uint32_t i = 0; i < mod->count; i++) known_add(&mod->kernels[i]);
  *module = mod;
  return OK;
}
API int hipModuleLoadData(void **module, const void *image) { return hipModuleLoadDataEx(module, image, 0, NULL, NULL); }
API int hipModuleUnload(void *module) {
  for (stub_module **at = &loaded; *at; at = &(*at)->next)
    if (*at == module) {
      stub_module *mod = module;
      *at = mod->next;
      for (uint32_t i = 0; i < mod->count; i++) known_remove(&mod->kernels[i]);
      free(module);
      return OK;
    }
  return 400; /* hipErrorInvalidHandle */
}
API int hipModuleGetFunction(void **function, void *module, const char *name) {
  stub_module *mod = module;
  if (!mod || !name) return INVALID_VALUE;
  for (uint32_t i = 0; i < mod->count; i++)
    if (strcmp(mod->kernels[i].name, name) == 0) {
      *function = &mod->kernels[i];
      return OK;
    }
  return NOT_FOUND;
}
API int hipFuncGetAttribute(int *v, int attr, void *f) {
  (void)f;
  *v = attr == 0 ? 1024 : 0; /* HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK; no registers, no spills */
  return OK;
}
API int hipPointerGetAttribute(void *data, int attr, uint64_t ptr) {
  (void)attr;
  if (stub.host_pointer && ptr == stub.host_pointer) return INVALID_VALUE;
  *(uint64_t *)data = ptr;
  return OK;
}

/* A function of a loaded module, or NULL for a handle made up by a test (never dereferenced). */
static const hip_stub_kernel *known(void *f) {
  for (size_t i = slot_of(f), n = 0; n < KNOWN_SLOTS && known_set[i]; i = (i + 1) % KNOWN_SLOTS, n++)
    if ((const void *)known_set[i] == f) return known_set[i];
  return NULL;
}

static void record(void *f, const unsigned g[3], const unsigned b[3], unsigned shared, void *stream, void **params,
                   void **extra) {
  stub.function = (uint64_t)(uintptr_t)f;
  stub.stream = (uint64_t)(uintptr_t)stream;
  memcpy(stub.grid, g, sizeof stub.grid);
  memcpy(stub.block, b, sizeof stub.block);
  stub.shared = shared;
  stub.used_params = params != NULL;
  memset(stub.kernarg, 0, sizeof stub.kernarg);
  const hip_stub_kernel *k = known(f);
  stub.known_function = k != NULL;
  stub.kernarg_size = k ? k->kernarg_size : 0;
  if (params && k) {
    for (uint32_t i = 0; i < k->nargs; i++)
      if (k->offset[i] + k->size[i] <= HIP_STUB_KERNARG_MAX) memcpy(stub.kernarg + k->offset[i], params[i], k->size[i]);
  } else if (extra) {
    /* {BUFFER_POINTER (1), ptr, BUFFER_SIZE (2), &size, END (3)} */
    if (extra[0] == (void *)1 && extra[2] == (void *)2 && extra[4] == (void *)3) {
      size_t n = *(size_t *)extra[3];
      if (!k) stub.kernarg_size = (uint32_t)n;
      memcpy(stub.kernarg, extra[1], n < HIP_STUB_KERNARG_MAX ? n : HIP_STUB_KERNARG_MAX);
    }
  }
}

API int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                              unsigned shared, void *stream, void **params, void **extra) {
  if (stub.fail_launch) {
    int e = stub.fail_launch;
    stub.fail_launch = 0;
    return e;
  }
  if (!f || (params && extra) || (!params && !extra)) return INVALID_VALUE;
  const hip_stub_kernel *k = known(f);
  if (extra && k) { /* the runtime checks the buffer against the kernel's segment */
    if (!(extra[0] == (void *)1 && extra[2] == (void *)2 && extra[4] == (void *)3)) return INVALID_VALUE;
    if (*(size_t *)extra[3] < k->kernarg_size) return INVALID_VALUE;
  }
  stub.calls++;
  if (stub.record) {
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    record(f, g, b, shared, stream, params, extra);
  }
  return OK;
}
API int hipModuleLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                         unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
  return hipModuleLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
API int hipDrvLaunchKernelEx(const void *config, void *f, void **params, void **extra) {
  (void)config, (void)f, (void)params, (void)extra;
  return 801; /* hipErrorNotSupported: multi-CTA launches are not modelled */
}

/* hip_stub_props.c, when the stand-in was built with HIP's header (Triton's driver reads the
 * device's properties; fastlaunch never does). */
__attribute__((weak)) int hip_stub_get_device_properties(void *out, int device);

/* hipGetProcAddress: the symbols above by name (Triton's driver resolves them this way). */
API int hipGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
  (void)version, (void)flags;
  static const struct {
    const char *name;
    void *fn;
  } table[] = {
#define E(n) {#n, (void *)n}
      E(hipGetErrorName), E(hipGetErrorString), E(hipGetLastError), E(hipDriverGetVersion), E(hipGetDevice),
      E(hipSetDevice), E(hipGetDeviceCount), E(hipDeviceGetAttribute), E(hipModuleLoadDataEx), E(hipModuleLoadData),
      E(hipModuleUnload), E(hipModuleGetFunction), E(hipFuncGetAttribute), E(hipPointerGetAttribute),
      E(hipModuleLaunchKernel), E(hipModuleLaunchCooperativeKernel), E(hipDrvLaunchKernelEx),
      E(hipRuntimeGetVersion),
#undef E
  };
  if (strcmp(symbol, "hipGetDeviceProperties") == 0 && hip_stub_get_device_properties) {
    *pfn = (void *)hip_stub_get_device_properties;
    if (status) *status = 0;
    return OK;
  }
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, symbol) == 0) {
      *pfn = table[i].fn;
      if (status) *status = 0; /* HIP_GET_PROC_ADDRESS_SUCCESS */
      return OK;
    }
  *pfn = NULL;
  if (status) *status = 1; /* HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  return NOT_FOUND;
}

/* For the tools: one kernel's metadata from an hsaco image (0 found, -1 not an hsaco, -2 no such kernel). */
API int hip_stub_kernel_info(const void *image, const char *name, hip_stub_kernel *out) {
  stub_module *mod = calloc(1, sizeof *mod);
  if (!mod) return -1;
  int r = -1;
  if (read_image(image, mod)) {
    r = -2;
    for (uint32_t i = 0; i < mod->count; i++)
      if (strcmp(mod->kernels[i].name, name) == 0) {
        *out = mod->kernels[i];
        r = 0;
      }
  }
  free(mod);
  return r;
}
