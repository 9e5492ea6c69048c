/* fake_acl.c: a stand-in libascendcl that records each call, so the npu backend's launch logic is
 * tested on a machine without Ascend hardware. It implements only what the backend resolves. */
#include <stdint.h>
#include <string.h>

#include "fake_acl.h"

fake_acl fake_acl_state = {.sync_addr = FAKE_ACL_SYNC_ADDR};

/* The ACL layouts as CANN declares them: the attribute value is a 16-byte union. */
typedef struct {
  int id;
  union {
    uint32_t localMemorySize;
    uint32_t rsv[4];
  } value;
} fake_attr;
typedef struct {
  fake_attr *attrs;
  size_t numAttrs;
} fake_cfg;

int aclrtLaunchKernelWithHostArgs(void *func, uint32_t numBlocks, void *stream, fake_cfg *cfg, void *hostArgs,
                                  size_t argsSize, void *placeHolderArray, size_t placeHolderNum) {
  fake_acl *s = &fake_acl_state;
  if (s->fail_next) {
    int r = s->fail_next;
    s->fail_next = 0;
    s->recent_msg = s->fail_msg;
    return r;
  }
  s->calls++;
  s->func = func;
  s->num_blocks = numBlocks;
  s->stream = stream;
  s->cfg_null = cfg == NULL;
  s->num_attrs = cfg ? cfg->numAttrs : 0;
  s->attr_id = cfg && cfg->numAttrs ? cfg->attrs[0].id : -1;
  s->attr_value = cfg && cfg->numAttrs ? cfg->attrs[0].value.localMemorySize : 0;
  s->buffer_size = argsSize;
  memset(s->buffer, 0xee, sizeof s->buffer);
  if (hostArgs) memcpy(s->buffer, hostArgs, argsSize < sizeof s->buffer ? argsSize : sizeof s->buffer);
  s->placeholders = placeHolderArray;
  s->num_placeholders = placeHolderNum;
  return 0;
}

int aclrtGetHardwareSyncAddr(void **addr) {
  fake_acl *s = &fake_acl_state;
  s->sync_calls++;
  if (s->sync_fail) return s->sync_fail;
  *addr = (void *)(uintptr_t)s->sync_addr;
  return 0;
}

const char *aclGetRecentErrMsg(void) { return fake_acl_state.recent_msg; }
