/* npu_fake.h: running an npu test against the recording stand-in libascendcl (tests/c/fakes/fake_acl.c):
 * each fake test runs in a child process, because the backend loads once per process. Shared by
 * test_npu_abi.c and test_npu_layouts.c. */
#ifndef FL_NPU_FAKE_H
#define FL_NPU_FAKE_H

#include "fastlaunch.h"
#include "fl_test.h"
#include "fakes/fake_acl.h"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The library a child run opens as libascendcl, from its parent (the test's own variable). */
#define ENV "FL_TEST_FAKE_ACL"

/* Whether this is a child run; a child gives the backend its library (fl_backend_configure) first. */
static inline bool in_child(void) {
  const char *lib = getenv(ENV);
  if (!lib) return false;
  fl_error err;
  if (fl_backend_configure(FL_BACKEND_NPU, "libascendcl", lib, &err) != FL_OK) {
    fprintf(stderr, "configure: %s\n", err.reason); /* the parent sees the child fail */
    exit(1);
  }
  return true;
}

/* Runs this binary again with one test and FL_TEST_FAKE_ACL set: to `lib` when given, else to the
 * fake, built here from its source. */
static inline void run_child(const char *test, const char *lib) {
  char dir[] = "/tmp/fl_fakeacl_XXXXXX", built[256], cmd[1024];
  bool build = lib == NULL;
  if (build) {
    if (!mkdtemp(dir)) FL_FAIL_AT("mkdtemp failed");
    const char *cc = getenv("CC") ? getenv("CC") : FL_TEST_CC;
    const char *src = getenv("FL_TEST_SRC_DIR") ? getenv("FL_TEST_SRC_DIR") : FL_TEST_SRC_DIR;
    snprintf(built, sizeof built, "%s/libfakeacl.so", dir);
    snprintf(cmd, sizeof cmd, "%s -std=c11 -Wall -Wextra -Werror -shared -fPIC -O1 -o %s %s/tests/c/fakes/fake_acl.c",
             cc, built, src);
    if (system(cmd) != 0) {
      rmdir(dir);
      FL_FAIL_AT("building the fake libascendcl failed: %s", cmd);
    }
    lib = built;
  }
  setenv(ENV, lib, 1);
  char self[512];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  int status = -1;
  if (n > 0) {
    self[n] = '\0';
    char *argv[] = {self, (char *)test, NULL};
    pid_t pid;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0) waitpid(pid, &status, 0);
  }
  unsetenv(ENV);
  if (build) {
    unlink(built);
    rmdir(dir);
  }
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) FL_FAIL_AT("child run of %s failed", test);
}

/* Loads the backend (which opens the fake) and finds the fake's record. */
static inline fake_acl *fake_state(void) {
  fl_error err;
  if (fl_backend_load(FL_BACKEND_NPU, &err) != FL_OK) {
    fprintf(stderr, "npu backend did not load: %s\n", err.reason);
    return NULL;
  }
  void *h = dlopen(getenv(ENV), RTLD_NOW | RTLD_NOLOAD);
  return h ? dlsym(h, "fake_acl_state") : NULL;
}

/* The kernel handle and stream every fake launch uses. */
#define KERNEL ((void *)0xac1f00d)
#define STREAM 0x5150ull

static inline void put(unsigned char *buf, size_t at, const void *v, size_t n) { memcpy(buf + at, v, n); }
static inline void put_u64(unsigned char *buf, size_t at, uint64_t v) { put(buf, at, &v, 8); }
static inline void put_i32(unsigned char *buf, size_t at, int32_t v) { put(buf, at, &v, 4); }

/* The fake's copy of the buffer equals `want` (size bytes) and argsSize is size. */
static inline void expect_buffer(const fake_acl *s, const unsigned char *want, size_t size) {
  ASSERT_EQ_U(s->buffer_size, size);
  for (size_t i = 0; i < size; i++)
    if (s->buffer[i] != want[i]) FL_FAIL_AT("buffer byte %zu: 0x%02x, expected 0x%02x", i, s->buffer[i], want[i]);
}

#endif
