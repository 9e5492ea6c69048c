/* fake_acl.h: what the stand-in libascendcl records about each call, shared by the fake and its
 * test. */
#ifndef FL_FAKE_ACL_H
#define FL_FAKE_ACL_H

#include <stddef.h>
#include <stdint.h>

typedef struct fake_acl {
  /* aclrtLaunchKernelWithHostArgs: every call, and the last one that succeeded. */
  int calls;
  void *func;
  uint32_t num_blocks;
  void *stream;
  int cfg_null;          /* 1 when cfg was NULL */
  size_t num_attrs;      /* cfg->numAttrs */
  int attr_id;           /* cfg->attrs[0].id */
  uint32_t attr_value;   /* cfg->attrs[0].value.localMemorySize */
  unsigned char buffer[4096]; /* a copy of the host args */
  size_t buffer_size;    /* argsSize */
  void *placeholders;
  size_t num_placeholders;
  /* The next launch returns fail_next (then it is cleared) and aclGetRecentErrMsg answers fail_msg
   * (NULL allowed) until the next failure. */
  int fail_next;
  const char *fail_msg;
  const char *recent_msg;
  /* aclrtGetHardwareSyncAddr: returns sync_fail when non-zero, else stores sync_addr (0 gives a
   * NULL address with success). */
  int sync_calls;
  int sync_fail;
  uint64_t sync_addr;
} fake_acl;

#define FAKE_ACL_SYNC_ADDR 0x00005a5a12340000ull

#endif
