/* record.c: a host test kernel that appends a value per program to a log, to check ordering. */
#include "fastlaunch.h"

/* Kinds ptr ptr i64: the log, the index of its next free entry, the launch's sequence number. */
typedef struct record_args {
  int64_t *log;
  int64_t *cursor;
  int64_t seq;
} record_args;

/* One stream's launches run on one worker, so the cursor needs no atomics. Each program writes
 * seq * 1000000 + z * 10000 + y * 100 + x, so the log also shows the program order. */
void record(const void *args, const fl_host_program *p) {
  const record_args *a = args;
  a->log[(*a->cursor)++] = a->seq * 1000000 + p->pid[2] * 10000 + p->pid[1] * 100 + p->pid[0];
}
