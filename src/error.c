/* error.c: status names and messages, and filling an fl_error with a reason. */
#include "fl_internal.h"

#include <stdio.h>

static const char *const status_names[] = {
#define NAME(name, msg) #name,
    FL_STATUS_MAP(NAME)
#undef NAME
};

static const char *const status_messages[] = {
#define MSG(name, msg) msg,
    FL_STATUS_MAP(MSG)
#undef MSG
};

const char *fl_status_name(fl_status status) {
  if ((unsigned)status >= FL_STATUS_COUNT) return "UNKNOWN";
  return status_names[status];
}

const char *fl_status_message(fl_status status) {
  if ((unsigned)status >= FL_STATUS_COUNT) return "unknown status";
  return status_messages[status];
}

static void fill(fl_error *err, fl_status status, bool stable, bool submitted, const char *fmt,
                 va_list ap) {
  err->status = status;
  err->stable = stable;
  err->backend_submitted = submitted;
  vsnprintf(err->reason, sizeof err->reason, fmt, ap);
}

fl_status fl__fail(fl_error *err, fl_status status, bool stable, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    fill(err, status, stable, false, fmt, ap);
    va_end(ap);
  }
  return status;
}

fl_status fl__fail_submitted(fl_error *err, fl_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    fill(err, status, false, true, fmt, ap);
    va_end(ap);
  }
  return status;
}
