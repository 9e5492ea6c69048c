/* tensor_map.c: tensor map arguments (FL_KIND_TMAP): each plan's metadata per map argument and its
 * memo of the maps it encoded, and the pack of one map in a launch. The encoding itself is the
 * backend's (cuda.c: Triton's arguments to the driver's cuTensorMapEncodeTiled).
 *
 * The memo: per argument, FL__TMAP_WAYS entries indexed by a hash of the value, each the value it was
 * encoded from (every field up to its rank compared) and the 128 bytes. A launch that finds its value there
 * copies the bytes and calls no driver function; a miss encodes and replaces the entry. Plans are
 * shared between threads: an argument's memo is taken with a try-lock, and a launch that finds it
 * taken encodes without it (no launch ever waits on another). */
#include "fl_internal.h"

#include <stdatomic.h>
#include <string.h>

#define FL__TMAP_WAYS 8
#define FL__TMAP_BYTES 128

typedef struct fl__tmap_entry {
  unsigned char map[FL__TMAP_BYTES]; /* a copy: the driver writes a map only at a 64-aligned address */
  fl_tensor_map_value key; /* zeroed before it is filled: compared with memcmp */
  bool valid;
} fl__tmap_entry;

struct fl__tmap_memo {
  fl_tensor_map_meta meta;
  atomic_flag busy;
  fl__tmap_entry entries[FL__TMAP_WAYS];
};

static fl_status check_meta(const fl_tensor_map_meta *m, size_t i, fl_error *err) {
  if (m->rank < 1 || m->rank > FL_TENSOR_MAP_MAX_RANK)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "tmap_meta_invalid:%zu:rank_%u", i, m->rank);
  if (m->elem_size != 1 && m->elem_size != 2 && m->elem_size != 4 && m->elem_size != 8)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "tmap_meta_invalid:%zu:elem_size_%d", i, m->elem_size);
  if (m->elem_type < 0 || m->elem_type > 15)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "tmap_meta_invalid:%zu:elem_type_%d", i, m->elem_type);
  if (m->swizzle < 0 || m->swizzle > 6)
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "tmap_meta_invalid:%zu:swizzle_%d", i, m->swizzle);
  return FL_OK;
}

fl_status fl__tmap_plan_init(fl_plan *plan, const fl_plan_desc *desc, fl_error *err) {
  size_t n = 0;
  for (size_t i = 0; i < plan->nruntime; i++) n += plan->kinds[i] == FL_KIND_TMAP;
  if (desc->ntensor_maps != n || (n && !desc->tensor_maps))
    return fl__fail(err, FL_BAD_DESCRIPTOR, true, "tensor_maps_count_mismatch:%zu:%zu",
                    desc->tensor_maps ? desc->ntensor_maps : 0, n);
  if (n == 0) return FL_OK;
  if (!plan->base->tensor_map_encode)
    return fl__fail(err, FL_UNSUPPORTED, true, "tmap_unsupported:%s", plan->base->name);
  for (size_t i = 0; i < n; i++) {
    fl_status st = check_meta(&desc->tensor_maps[i], i, err);
    if (st != FL_OK) return st;
  }
  plan->tmaps = fl__calloc(n, sizeof *plan->tmaps);
  if (!plan->tmaps) return fl__fail(err, FL_NOMEM, false, "nomem:plan");
  for (size_t i = 0; i < n; i++) {
    plan->tmaps[i].meta = desc->tensor_maps[i];
    atomic_flag_clear(&plan->tmaps[i].busy);
  }
  plan->ntmaps = n;
  return FL_OK;
}

void fl__tmap_plan_fini(fl_plan *plan) {
  fl__free(plan->tmaps);
  plan->tmaps = NULL;
  plan->ntmaps = 0;
}

/* The value a launch gives for a map argument, checked: its map, or NULL with err filled (FL_BAD_VALUE). */
static const fl_tensor_map_value *value_of(const fl_value *value, const fl_tensor_map_meta *meta, size_t index,
                                           fl_error *err) {
  if (value->type != FL_VALUE_TENSOR_MAP || !value->v.p)
    return fl__fail(err, FL_BAD_VALUE, false, "tmap_expected:%zu", index), NULL;
  const fl_tensor_map_value *v = (const fl_tensor_map_value *)(uintptr_t)value->v.p;
  if (v->rank != meta->rank)
    return fl__fail(err, FL_BAD_VALUE, false, "tmap_rank_mismatch:%zu:%u:%u", index, v->rank, meta->rank), NULL;
  if (v->rank > 0 && v->strides[v->rank - 1] != 1) /* Triton asserts it before encoding */
    return fl__fail(err, FL_BAD_VALUE, false, "tmap_inner_stride:%zu", index), NULL;
  return v;
}

/* The value with every byte defined (padding and the entries past its rank included): the key an
 * entry keeps. */
static void key_of(const fl_tensor_map_value *v, fl_tensor_map_value *out) {
  memset(out, 0, sizeof *out);
  out->base = v->base;
  out->rank = v->rank;
  for (uint32_t d = 0; d < v->rank; d++) {
    out->shape[d] = v->shape[d];
    out->strides[d] = v->strides[d];
  }
  out->nan_padding = v->nan_padding;
  out->round_tf32 = v->round_tf32;
}

/* Whether an entry's key is the value (its fields up to its rank: the value's other bytes are the
 * caller's). */
static inline bool key_is(const fl_tensor_map_value *k, const fl_tensor_map_value *v) {
  if (k->base != v->base || k->rank != v->rank || k->nan_padding != v->nan_padding || k->round_tf32 != v->round_tf32)
    return false;
  for (uint32_t d = 0; d < v->rank; d++)
    if (k->shape[d] != v->shape[d] || k->strides[d] != v->strides[d]) return false;
  return true;
}

static size_t hash_value(const fl_tensor_map_value *v) {
  uint64_t h = v->base * 0x9E3779B97F4A7C15u;
  for (uint32_t d = 0; d < v->rank; d++) {
    h = (h ^ (uint64_t)v->shape[d]) * 0x100000001B3u;
    h = (h ^ (uint64_t)v->strides[d]) * 0x100000001B3u;
  }
  h ^= (uint64_t)v->nan_padding << 1 | (uint64_t)v->round_tf32;
  return (size_t)((h ^ (h >> 29)) % FL__TMAP_WAYS);
}

fl_status fl__tmap_pack(const fl_plan *plan, size_t index, size_t which, const fl_value *value, unsigned char *dst,
                        fl_error *err) {
  struct fl__tmap_memo *memo = &plan->tmaps[which];
  const fl_tensor_map_value *v = value_of(value, &memo->meta, index, err);
  if (!v) return FL_BAD_VALUE; /* value_of's every refusal */
  fl__tmap_entry *e = &memo->entries[hash_value(v)];
  fl_tensor_map_value key;
  fl_status st;
  if (!atomic_flag_test_and_set_explicit(&memo->busy, memory_order_acquire)) {
    if (e->valid && key_is(&e->key, v)) {
      memcpy(dst, e->map, FL__TMAP_BYTES);
      atomic_flag_clear_explicit(&memo->busy, memory_order_release);
      return FL_OK;
    }
    _Alignas(64) unsigned char map[FL__TMAP_BYTES];
    key_of(v, &key);
    st = plan->base->tensor_map_encode(plan->base, &memo->meta, &key, map, err);
    e->valid = st == FL_OK;
    if (st == FL_OK) {
      e->key = key;
      memcpy(e->map, map, FL__TMAP_BYTES);
      memcpy(dst, map, FL__TMAP_BYTES);
    }
    atomic_flag_clear_explicit(&memo->busy, memory_order_release);
    return st;
  }
  _Alignas(64) unsigned char map[FL__TMAP_BYTES]; /* another thread holds the memo: encode alone */
  key_of(v, &key);
  st = plan->base->tensor_map_encode(plan->base, &memo->meta, &key, map, err);
  if (st == FL_OK) memcpy(dst, map, FL__TMAP_BYTES);
  return st;
}
