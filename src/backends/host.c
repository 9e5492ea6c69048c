/* host.c: the host backend, where a stream is a worker thread that runs C kernels in order. */
#include "streams.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>

#define RING_SIZE 256
#define RING_MASK (RING_SIZE - 1)
#define HOST_MAX_ARGS 4096
#define CACHE_LINE 64

/* One queued launch. `seq` follows Vyukov's bounded queue: pos when the entry is free for the
 * submitter that claims position pos, pos + 1 once that launch is published, pos + RING_SIZE when
 * the worker has finished with it. A NULL plan asks the worker to stop. */
typedef struct entry {
  _Atomic uint64_t seq;
  const fl_plan *plan;
  uint32_t grid[3];
  _Alignas(16) unsigned char args[HOST_MAX_ARGS];
} entry;

typedef struct host_stream {
  void *raw; /* what fl__malloc returned, before alignment */
  pthread_t thread;
  /* Free entries and published entries: sem_wait/sem_post take no lock when uncontended. */
  sem_t spaces;
  sem_t items;
  /* Only synchronize sleeps here; the worker touches them when `waiters` says someone does. */
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  atomic_int waiters;
  _Alignas(CACHE_LINE) _Atomic uint64_t head; /* positions claimed by submitters */
  _Alignas(CACHE_LINE) _Atomic uint64_t completed;
  _Alignas(CACHE_LINE) entry ring[RING_SIZE];
} host_stream;

static void sem_wait_retry(sem_t *sem) {
  while (sem_wait(sem) != 0 && errno == EINTR) {
  }
}

/* Claims the next position (blocking while the ring is full) and publishes one launch there. */
static void enqueue(host_stream *s, const fl_plan *plan, const void *args, size_t size,
                    const uint32_t grid[3]) {
  if (sem_trywait(&s->spaces) != 0) {
    /* The ring is full: this thread waits for the worker, with the caller's lock (the GIL)
     * released through the wait hooks, so the kernels it waits for can depend on other threads. */
    void *token = fl__wait_begin();
    sem_wait_retry(&s->spaces);
    fl__wait_end(token);
  }
  uint64_t pos = atomic_fetch_add_explicit(&s->head, 1, memory_order_relaxed);
  entry *e = &s->ring[pos & RING_MASK];
  /* The semaphore already guarantees the worker is done with this entry; the sequence number
   * carries the memory ordering, and this loop never turns in practice. */
  while (atomic_load_explicit(&e->seq, memory_order_acquire) != pos) sched_yield();
  e->plan = plan;
  if (plan) {
    memcpy(e->grid, grid, sizeof e->grid);
    if (size) memcpy(e->args, args, size);
  }
  atomic_store_explicit(&e->seq, pos + 1, memory_order_release);
  sem_post(&s->items);
}

static void run_launch(const entry *e) {
  fl_host_kernel_fn fn = (fl_host_kernel_fn)e->plan->kernel;
  fl_host_program program;
  memcpy(program.grid, e->grid, sizeof program.grid);
  for (uint32_t z = 0; z < e->grid[2]; z++) {
    for (uint32_t y = 0; y < e->grid[1]; y++) {
      for (uint32_t x = 0; x < e->grid[0]; x++) {
        program.pid[0] = x;
        program.pid[1] = y;
        program.pid[2] = z;
        fn(e->args, &program);
      }
    }
  }
}

/* The worker polls briefly before it sleeps: while launches keep coming, a submitter's sem_post
 * then finds no sleeper to wake and costs an atomic add instead of a futex system call. */
#define WORKER_SPIN 4096

static void wait_item(host_stream *s) {
  for (int i = 0; i < WORKER_SPIN; i++) {
    if (sem_trywait(&s->items) == 0) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  sem_wait_retry(&s->items);
}

static void *worker_main(void *arg) {
  host_stream *s = arg;
  for (uint64_t pos = 0;; pos++) {
    wait_item(s);
    entry *e = &s->ring[pos & RING_MASK];
    /* A later submitter may have posted before the one at `pos` finished writing; wait for it. */
    while (atomic_load_explicit(&e->seq, memory_order_acquire) != pos + 1) sched_yield();
    const fl_plan *plan = e->plan;
    if (!plan) break;
    run_launch(e);
    /* The last reference may unload the kernel's library, which is fine once the kernel ran. */
    fl_plan_release(plan);
    atomic_store_explicit(&e->seq, pos + RING_SIZE, memory_order_release);
    sem_post(&s->spaces);
    /* Sequentially consistent with the waiter's increment, so either the waiter sees this count or
     * this thread sees the waiter and wakes it under the mutex. */
    atomic_store(&s->completed, pos + 1);
    if (atomic_load(&s->waiters) > 0) {
      pthread_mutex_lock(&s->mutex);
      pthread_cond_broadcast(&s->cond);
      pthread_mutex_unlock(&s->mutex);
    }
  }
  return NULL;
}

static void stream_free(host_stream *s) { fl__free(s->raw); }

static fl_status host_load(const fl__backend *self, fl_error *err) {
  (void)self;
  fl__ok(err);
  return FL_OK;
}

static fl_status host_submit(const fl__backend *self, const fl_plan *plan, uint64_t stream, const void *args,
                             const uint32_t grid[3], fl_error *err) {
  (void)self;
  const size_t size = plan->layout.size;
  host_stream *s = fl__stream_enter(FL__STREAM_OWNER_HOST, stream);
  if (FL__UNLIKELY(!s)) return fl__stream_invalid(err, stream);
  if (FL__UNLIKELY(size > HOST_MAX_ARGS)) {
    fl__stream_leave(stream);
    return fl__fail(err, FL_UNSUPPORTED, true, "args_size_exceeds:%zu:%d", size, HOST_MAX_ARGS);
  }
  fl_plan_retain(plan);
  enqueue(s, plan, args, size, grid);
  fl__stream_leave(stream);
  fl__ok(err);
  return FL_OK;
}

static fl_status host_stream_create(const fl__backend *self, uint64_t *stream, fl_error *err) {
  (void)self;
  if (!stream) return fl__fail(err, FL_BAD_VALUE, true, "stream_out_null");
  *stream = 0;
  void *raw = fl__malloc(sizeof(host_stream) + CACHE_LINE);
  if (!raw) return fl__fail(err, FL_NOMEM, false, "stream_alloc");
  /* fl__malloc promises malloc's alignment at most; the struct wants a cache line. */
  host_stream *s = (host_stream *)(((uintptr_t)raw + CACHE_LINE - 1) & ~(uintptr_t)(CACHE_LINE - 1));
  memset(s, 0, sizeof *s);
  s->raw = raw;
  for (uint64_t i = 0; i < RING_SIZE; i++) atomic_init(&s->ring[i].seq, i);
  atomic_init(&s->head, 0);
  atomic_init(&s->completed, 0);
  atomic_init(&s->waiters, 0);
  int stage = 0, rc;
  fl_status st;
  if ((rc = sem_init(&s->spaces, 0, RING_SIZE)) != 0) goto fail_errno;
  stage = 1;
  if ((rc = sem_init(&s->items, 0, 0)) != 0) goto fail_errno;
  stage = 2;
  if ((rc = pthread_mutex_init(&s->mutex, NULL)) != 0) goto fail_rc;
  stage = 3;
  if ((rc = pthread_cond_init(&s->cond, NULL)) != 0) goto fail_rc;
  stage = 4;
  if ((rc = pthread_create(&s->thread, NULL, worker_main, s)) != 0) goto fail_rc;
  stage = 5;
  st = fl__stream_register(FL__STREAM_OWNER_HOST, s, stream, err);
  if (st != FL_OK) {
    /* The worker is idle on `items`; the stop entry ends it. */
    enqueue(s, NULL, NULL, 0, NULL);
    pthread_join(s->thread, NULL);
    goto cleanup;
  }
  fl__ok(err);
  return FL_OK;
fail_errno:
  rc = errno;
fail_rc:
  st = fl__fail(err, FL_BACKEND_ERROR, false, "stream_create:%s:%d",
                stage < 2 ? "sem_init" : stage < 4 ? "sync_init" : "pthread_create", rc);
cleanup:
  if (stage >= 4) pthread_cond_destroy(&s->cond);
  if (stage >= 3) pthread_mutex_destroy(&s->mutex);
  if (stage >= 2) sem_destroy(&s->items);
  if (stage >= 1) sem_destroy(&s->spaces);
  stream_free(s);
  return st;
}

static fl_status host_stream_synchronize(const fl__backend *self, uint64_t stream, fl_error *err) {
  (void)self;
  host_stream *s = fl__stream_enter(FL__STREAM_OWNER_HOST, stream);
  if (!s) return fl__stream_invalid(err, stream);
  /* Every launch whose submit returned has claimed a position below this. */
  uint64_t target = atomic_load(&s->head);
  if (atomic_load_explicit(&s->completed, memory_order_acquire) < target) {
    pthread_mutex_lock(&s->mutex);
    atomic_fetch_add(&s->waiters, 1);
    while (atomic_load(&s->completed) < target) pthread_cond_wait(&s->cond, &s->mutex);
    atomic_fetch_sub(&s->waiters, 1);
    pthread_mutex_unlock(&s->mutex);
  }
  fl__stream_leave(stream);
  fl__ok(err);
  return FL_OK;
}

static fl_status host_stream_destroy(const fl__backend *self, uint64_t stream, fl_error *err) {
  (void)self;
  host_stream *s = fl__stream_unregister(FL__STREAM_OWNER_HOST, stream);
  if (!s) return fl__stream_invalid(err, stream);
  /* No caller is inside any more and none can enter: the stop entry is the last one queued, so
   * the worker drains everything before it. */
  enqueue(s, NULL, NULL, 0, NULL);
  pthread_join(s->thread, NULL);
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->mutex);
  sem_destroy(&s->items);
  sem_destroy(&s->spaces);
  stream_free(s);
  fl__ok(err);
  return FL_OK;
}

static fl_status host_stream_count(const fl__backend *self, uint64_t stream, uint64_t *count, fl_error *err) {
  (void)self;
  if (!count) return fl__fail(err, FL_BAD_VALUE, true, "count_out_null");
  host_stream *s = fl__stream_enter(FL__STREAM_OWNER_HOST, stream);
  if (!s) return fl__stream_invalid(err, stream);
  *count = atomic_load_explicit(&s->completed, memory_order_acquire);
  fl__stream_leave(stream);
  fl__ok(err);
  return FL_OK;
}

const fl__backend fl__backend_host = {
    .name = "host",
    .state = NULL, /* none of its own: each stream is an object in the registry (streams.c) */
    .default_abi = FL_ABI_HOST,
    .abi_mask = 1u << FL_ABI_HOST,
    .kernel = FL_KERNEL_HOST_FN,
    .memory = FL_MEMORY_HOST,
    .grid_max = {INT32_MAX, INT32_MAX, INT32_MAX},
    .grid_max_product = 0,
    .grid_allow_zero = true,
    .max_args_size = HOST_MAX_ARGS,
    .load = host_load,
    /* The core refuses a NULL kernel ("kernel_null"); nothing else is per plan here. */
    .plan_init = NULL,
    .plan_fini = NULL,
    .submit = host_submit,
    .stream_create = host_stream_create,
    .stream_synchronize = host_stream_synchronize,
    .stream_destroy = host_stream_destroy,
    .stream_count = host_stream_count,
};
