// torch_npu_standin.cpp: a stand-in for the two functions of torch_npu's libtorch_npu.so that a
// launcher uses to put its kernel launches in order with aten ops, for machines without an NPU:
//
//   void RunAclCall(const std::string &op_name, const std::function<int()> &func);
//   uint32_t OpApiGetTaskQueueEnable();
//
// As in torch_npu, with the task queue on (mode 1 or 2) RunAclCall copies func into a FIFO that one
// worker thread runs in order, and returns; with it off (mode 0) it runs func at once on the
// caller's thread. A func returning nonzero counts as a failed task. Errors in RunAclCall itself
// are C++ exceptions. The initial mode comes from TASK_QUEUE_ENABLE (default 1), and is 0 when
// ASCEND_LAUNCH_BLOCKING=1.
//
// Test controls (extern "C", none lets an exception out): switch modes (draining first, as
// torch_npu.npu.set_task_queue_enable does), submit an "aten op" (a task that records itself in the
// runtime stand-in's log through standin_rt_record_aten, found with dlsym at first use so neither
// library links the other), drain, read the counters, and make the next RunAclCall throw.
//
// Lifetime: the queue is allocated once and never freed, so the worker never touches a destroyed
// object. At exit (or dlclose) a static destructor lets the worker finish what was enqueued, for
// up to a few seconds, then joins it; if the worker is stuck, or exit runs on the worker itself, it
// is detached instead, so the process always exits. A forked child has no worker: not supported.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#define API __attribute__((visibility("default")))

namespace {

struct Queue {
  std::mutex mu;
  std::condition_variable work;  // the worker waits here for tasks (or stop)
  std::condition_variable done;  // drainers wait here for finished == target
  std::deque<std::function<int()>> tasks;
  uint64_t enqueued = 0, finished = 0;  // all guarded by mu
  uint64_t errors = 0;
  std::atomic<int> mode{1};  // written under mu; read without it by OpApiGetTaskQueueEnable (an atomic, as torch_npu's)
  int fail = 0;  // what the next RunAclCall does: 0 normal, 1 throw first, 2 enqueue then throw
  bool stop = false;
  std::thread worker;
};

// Created on first use (thread-safe static initialization), never destroyed.
Queue &queue() {
  static Queue *q = [] {
    Queue *n = new Queue;
    const char *tqe = std::getenv("TASK_QUEUE_ENABLE");
    const char *blocking = std::getenv("ASCEND_LAUNCH_BLOCKING");
    if (tqe && *tqe) n->mode = std::atoi(tqe);
    if (blocking && std::strcmp(blocking, "1") == 0) n->mode = 0;
    return n;
  }();
  return *q;
}

bool on_worker(Queue &q) { return q.worker.joinable() && q.worker.get_id() == std::this_thread::get_id(); }

// Runs one task, counting a nonzero return or an exception as a failed task.
void run_task(Queue &q, const std::function<int()> &f) {
  int rc;
  try {
    rc = f();
  } catch (...) {
    rc = -1;
  }
  if (rc != 0) {
    std::lock_guard<std::mutex> g(q.mu);
    q.errors++;
  }
}

void worker_main(Queue *q) {
  std::unique_lock<std::mutex> lk(q->mu);
  for (;;) {
    q->work.wait(lk, [q] { return q->stop || !q->tasks.empty(); });
    if (q->tasks.empty()) return;  // stop, and nothing left
    std::function<int()> f = std::move(q->tasks.front());
    q->tasks.pop_front();
    lk.unlock();
    run_task(*q, f);
    f = nullptr;  // the task's captures die outside the lock too
    lk.lock();
    q->finished++;
    q->done.notify_all();
  }
}

// Either enqueues f (queue on) or runs it here (queue off); the mode is read under the lock, so a
// task is never enqueued behind a switch to mode 0 that already drained. May throw (bad_alloc,
// system_error when the worker cannot start).
void submit(Queue &q, const std::function<int()> &f) {
  std::unique_lock<std::mutex> lk(q.mu);
  if (q.mode > 0) {
    if (!q.worker.joinable()) q.worker = std::thread(worker_main, &q);
    q.tasks.push_back(f);
    q.enqueued++;
    lk.unlock();
    q.work.notify_one();
    return;
  }
  lk.unlock();
  run_task(q, f);
}

// Waits until every task enqueued before the call has finished, the lock held on return. On the
// worker itself it cannot wait for itself: it returns at once.
void drain_locked(Queue &q, std::unique_lock<std::mutex> &lk) {
  if (on_worker(q)) return;
  uint64_t target = q.enqueued;
  q.done.wait(lk, [&q, target] { return q.finished >= target; });
}

using record_fn = void (*)(uint64_t, uint64_t);

// standin_rt_record_aten from whichever loaded library exports it, looked up until found (the
// runtime stand-in may be loaded after this library).
record_fn record_aten() {
  static std::atomic<record_fn> cached{nullptr};
  record_fn r = cached.load(std::memory_order_acquire);
  if (r) return r;
  void *p = dlsym(RTLD_DEFAULT, "standin_rt_record_aten");
  if (!p) {
    std::fprintf(stderr, "torch_npu stand-in: standin_rt_record_aten not found "
                         "(load the runtime stand-in RTLD_GLOBAL)\n");
    return nullptr;
  }
  std::memcpy(&r, &p, sizeof r);  // object pointer to function pointer, without a cast warning
  cached.store(r, std::memory_order_release);
  return r;
}

// At exit: finish what was enqueued (bounded), then stop and join the worker.
struct Reaper {
  ~Reaper() {
    Queue &q = queue();
    std::unique_lock<std::mutex> lk(q.mu);
    if (!q.worker.joinable()) return;
    if (on_worker(q)) {  // exit() called from a task: the worker is this thread
      q.worker.detach();
      return;
    }
    uint64_t target = q.enqueued;
    bool drained = q.done.wait_for(lk, std::chrono::seconds(5), [&q, target] { return q.finished >= target; });
    q.stop = true;
    lk.unlock();
    q.work.notify_all();
    if (drained)
      q.worker.join();
    else
      q.worker.detach();  // a stuck task: leave it, the process ends anyway
  }
} reaper;

}  // namespace

// ---- the two functions a launcher imports from libtorch_npu.so ----

API void RunAclCall(const std::string &op_name, const std::function<int()> &func) {
  Queue &q = queue();
  int fail;
  {
    std::lock_guard<std::mutex> g(q.mu);
    fail = q.fail;
    q.fail = 0;
  }
  if (fail == 1) throw std::runtime_error("torch_npu stand-in: RunAclCall(" + op_name + ") failed before enqueuing");
  submit(q, func);  // in mode 0 with fail == 2 the task ran here, then the call throws
  if (fail == 2) throw std::runtime_error("torch_npu stand-in: RunAclCall(" + op_name + ") failed after enqueuing");
}

API uint32_t OpApiGetTaskQueueEnable() {
  return (uint32_t)queue().mode.load(std::memory_order_acquire);
}

// ---- test controls ----

extern "C" {

API void standin_npu_set_task_queue_enable(int mode) noexcept {
  Queue &q = queue();
  std::unique_lock<std::mutex> lk(q.mu);
  drain_locked(q, lk);
  q.mode = mode < 0 ? 0 : mode;
}

API int standin_npu_mode(void) noexcept { return (int)OpApiGetTaskQueueEnable(); }

API void standin_npu_aten_op(uint64_t stream, uint64_t tag) noexcept {
  record_fn rec = record_aten();
  if (!rec) return;
  try {
    submit(queue(), [rec, stream, tag] {
      rec(stream, tag);
      return 0;
    });
  } catch (const std::exception &e) {
    std::fprintf(stderr, "torch_npu stand-in: aten op %llu not submitted: %s\n", (unsigned long long)tag, e.what());
  }
}

API void standin_npu_drain(void) noexcept {
  Queue &q = queue();
  std::unique_lock<std::mutex> lk(q.mu);
  drain_locked(q, lk);
}

API uint64_t standin_npu_enqueued(void) noexcept {
  Queue &q = queue();
  std::lock_guard<std::mutex> g(q.mu);
  return q.enqueued;
}

API uint64_t standin_npu_task_errors(void) noexcept {
  Queue &q = queue();
  std::lock_guard<std::mutex> g(q.mu);
  return q.errors;
}

API void standin_npu_fail(int where) noexcept {
  Queue &q = queue();
  std::lock_guard<std::mutex> g(q.mu);
  q.fail = where;
}

}  // extern "C"
