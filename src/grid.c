/* grid.c: grid programs: Python-style integer expressions compiled to stack bytecode and evaluated. */
#include "fl_internal.h"

#include <string.h>

/* Limits. The evaluation stack is a fixed array, so its depth is checked at compile time; the
 * nesting limit keeps the recursive-descent parser's own recursion small. */
#define GRID_MAX_LEN 4096
#define GRID_STACK 64
#define GRID_MAX_NESTING 200
#define GRID_MAX_VAR INT32_MAX

/* Opcodes. Binary operators come in two forms: both operands on the stack, or the right operand
 * an immediate (OP_K added), which is the common shape `x // -128` after constant folding.
 * A conditional `A if C else B` is laid out as  C, JZ, A, JMP, B  with forward jumps relative to
 * the next instruction, so only the chosen branch runs. FAIL raises its argument (an E_ code): it
 * stands for a constant subexpression that always fails, inside a branch that may never run. */
enum {
  OP_CONST,
  OP_VAR,
  OP_NEG,
  OP_JZ,   /* pops; skips arg instructions when the value was zero */
  OP_JMP,  /* skips arg instructions */
  OP_FAIL, /* fails with error arg */
  OP_ADD,
  OP_SUB,
  OP_MUL,
  OP_FLOORDIV,
  OP_MOD,
  OP_SHL,
  OP_SHR,
  OP_MIN,
  OP_MAX,
  OP_CDIV,
  OP_EQ, /* comparisons push 1 or 0, as Python's True and False are 1 and 0 in arithmetic */
  OP_NE,
  OP_LT,
  OP_LE,
  OP_GT,
  OP_GE,
  OP_K = 32
};

/* Evaluation outcomes of one operation. */
enum { E_NONE, E_DIV0, E_OVF, E_SHIFT };

typedef struct ins {
  int64_t arg; /* constant value, variable index or right-hand immediate */
  uint32_t op;
} ins;

struct fl_grid_program {
  size_t ncode;
  size_t nvars;    /* largest variable index read, plus one */
  uint32_t depth;  /* stack slots the code needs */
  bool constant;
  int64_t value;   /* the value when constant */
  ins code[];
};

/* ---- arithmetic with Python semantics on int64 ---- */

static inline int ar_add(int64_t a, int64_t b, int64_t *r) {
  return __builtin_add_overflow(a, b, r) ? E_OVF : E_NONE;
}

static inline int ar_sub(int64_t a, int64_t b, int64_t *r) {
  return __builtin_sub_overflow(a, b, r) ? E_OVF : E_NONE;
}

static inline int ar_mul(int64_t a, int64_t b, int64_t *r) {
  return __builtin_mul_overflow(a, b, r) ? E_OVF : E_NONE;
}

/* Python's a // b rounds towards negative infinity; C's a / b truncates, so the quotient drops
 * by one when the remainder is nonzero and the signs differ. b == -1 is split off because
 * INT64_MIN / -1 is undefined in C. */
static inline int ar_floordiv(int64_t a, int64_t b, int64_t *r) {
  if (b == 0) return E_DIV0;
  if (b == -1) {
    if (a == INT64_MIN) return E_OVF;
    *r = -a;
    return E_NONE;
  }
  int64_t q = a / b, m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) q--;
  *r = q;
  return E_NONE;
}

/* Python's a % b takes the sign of the divisor; INT64_MIN % -1 is 0 there but undefined in C. */
static inline int ar_mod(int64_t a, int64_t b, int64_t *r) {
  if (b == 0) return E_DIV0;
  if (b == -1) {
    *r = 0;
    return E_NONE;
  }
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  *r = m;
  return E_NONE;
}

/* cdiv(a, b) = -(a // -b) = ceil(a / b), computed directly so that -b never has to exist: only a
 * result outside int64 (INT64_MIN, -1) overflows. */
static inline int ar_cdiv(int64_t a, int64_t b, int64_t *r) {
  if (b == 0) return E_DIV0;
  if (b == -1) {
    if (a == INT64_MIN) return E_OVF;
    *r = -a;
    return E_NONE;
  }
  int64_t q = a / b, m = a % b;
  if (m != 0 && ((m < 0) == (b < 0))) q++;
  *r = q;
  return E_NONE;
}

/* a << b fits exactly when a lies in [INT64_MIN >> b, INT64_MAX >> b]; the shift itself is done
 * on the unsigned value because left-shifting a negative int is undefined in C. Python shifts
 * zero by any count to zero. */
static inline int ar_shl(int64_t a, int64_t b, int64_t *r) {
  if (b < 0) return E_SHIFT;
  if (a == 0) {
    *r = 0;
    return E_NONE;
  }
  if (b >= 64) return E_OVF;
  int64_t hi = INT64_MAX >> b, lo = -hi - 1;
  if (a < lo || a > hi) return E_OVF;
  *r = (int64_t)((uint64_t)a << b);
  return E_NONE;
}

/* Arithmetic right shift written on non-negative values only, so it does not depend on how the
 * compiler shifts negative numbers. */
static inline int ar_shr(int64_t a, int64_t b, int64_t *r) {
  if (b < 0) return E_SHIFT;
  if (b >= 64) {
    *r = a < 0 ? -1 : 0;
    return E_NONE;
  }
  *r = a >= 0 ? a >> b : ~(~a >> b);
  return E_NONE;
}

static int ar_binary(uint32_t op, int64_t a, int64_t b, int64_t *r) {
  switch (op) {
    case OP_ADD: return ar_add(a, b, r);
    case OP_SUB: return ar_sub(a, b, r);
    case OP_MUL: return ar_mul(a, b, r);
    case OP_FLOORDIV: return ar_floordiv(a, b, r);
    case OP_MOD: return ar_mod(a, b, r);
    case OP_SHL: return ar_shl(a, b, r);
    case OP_SHR: return ar_shr(a, b, r);
    case OP_MIN: *r = a < b ? a : b; return E_NONE;
    case OP_MAX: *r = a > b ? a : b; return E_NONE;
    case OP_CDIV: return ar_cdiv(a, b, r);
    case OP_EQ: *r = a == b; return E_NONE;
    case OP_NE: *r = a != b; return E_NONE;
    case OP_LT: *r = a < b; return E_NONE;
    case OP_LE: *r = a <= b; return E_NONE;
    case OP_GT: *r = a > b; return E_NONE;
    case OP_GE: *r = a >= b; return E_NONE;
    default: return E_OVF;
  }
}

/* ---- the folding code builder ---- */

/* One pending operand while code is built: its code runs from `start` to the end of the code so
 * far. A constant is always exactly one instruction at `start` (OP_CONST, or OP_FAIL when it
 * always fails), so folding can rewrite it in place.
 *
 * `cerr` is the error of the first constant subexpression, in evaluation order, that always fails
 * and is always evaluated when this operand is: then this operand can never complete, so whatever
 * would run after it is dropped, and at the top the program is refused with that error. Branches of
 * a conditional whose condition is not constant are not always evaluated, so their errors stay in
 * the code as OP_FAIL and are raised only if the branch runs. */
typedef struct sym {
  int64_t value;
  size_t start;
  uint32_t depth;
  bool constant;
  int cerr;
} sym;

typedef struct builder {
  ins *code;
  size_t ncode;
  sym *stack;
  size_t nstack;
} builder;

static void b_const(builder *b, int64_t value) {
  b->code[b->ncode] = (ins){value, OP_CONST};
  b->stack[b->nstack++] = (sym){value, b->ncode, 1, true, E_NONE};
  b->ncode++;
}

static void b_var(builder *b, int64_t index) {
  b->code[b->ncode] = (ins){index, OP_VAR};
  b->stack[b->nstack++] = (sym){0, b->ncode, 1, false, E_NONE};
  b->ncode++;
}

/* Makes the constant `x` one that always fails with e. */
static void b_poison(builder *b, sym *x, int e) {
  x->value = 0;
  x->cerr = e;
  b->code[x->start] = (ins){e, OP_FAIL};
  b->ncode = x->start + 1;
}

static void b_fail(builder *b, int e) {
  b_const(b, 0);
  b_poison(b, &b->stack[b->nstack - 1], e);
}

static void b_neg(builder *b) {
  sym *x = &b->stack[b->nstack - 1];
  if (x->cerr) return;
  if (x->constant) {
    if (x->value == INT64_MIN) {
      b_poison(b, x, E_OVF);
    } else {
      x->value = -x->value;
      b->code[x->start].arg = x->value;
    }
    return;
  }
  b->code[b->ncode++] = (ins){0, OP_NEG};
}

static void b_binary(builder *b, uint32_t op) {
  sym r = b->stack[--b->nstack];
  sym *l = &b->stack[b->nstack - 1];
  if (l->cerr) {
    /* The left operand never completes, so the right one never runs. */
    b->ncode = r.start;
  } else if (r.cerr) {
    /* Neither does the right one. The operation is never reached but is still emitted, so that
     * the code stays well-formed for substitution to replay. */
    if (l->constant && r.constant) {
      b_poison(b, l, r.cerr);
    } else {
      b->code[b->ncode++] = (ins){0, op};
      l->cerr = r.cerr;
      l->constant = false;
      if (r.depth + 1 > l->depth) l->depth = r.depth + 1;
    }
  } else if (l->constant && r.constant) {
    int64_t v = 0;
    int e = ar_binary(op, l->value, r.value, &v);
    if (e != E_NONE) {
      b_poison(b, l, e);
    } else {
      l->value = v;
      b->code[l->start].arg = v;
      b->ncode = l->start + 1;
    }
  } else if (r.constant) {
    b->ncode = r.start;
    b->code[b->ncode++] = (ins){r.value, op + OP_K};
  } else {
    b->code[b->ncode++] = (ins){0, op};
    if (r.depth + 1 > l->depth) l->depth = r.depth + 1;
    l->constant = false;
  }
}

/* Completes `c if-JZ a JMP e` once all three are built (and popped): the condition's code starts
 * the conditional, the jump slots at jz and jmp are filled in and the result is pushed. Each part
 * starts from the same stack height, so the depth is the largest of the three. */
static void b_cond(builder *b, sym c, size_t jz, sym a, size_t jmp, sym e) {
  b->code[jz] = (ins){(int64_t)(jmp - jz), OP_JZ};
  b->code[jmp] = (ins){(int64_t)(b->ncode - jmp - 1), OP_JMP};
  uint32_t depth = c.depth;
  if (a.depth > depth) depth = a.depth;
  if (e.depth > depth) depth = e.depth;
  b->stack[b->nstack++] = (sym){0, c.start, depth, false, c.cerr};
}

static fl_status const_fail(int e, fl_error *err) {
  const char *what = e == E_DIV0 ? "div_by_zero" : e == E_SHIFT ? "negative_shift" : "overflow";
  return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_const_%s", what);
}

/* Turns the finished builder (one operand left) into a program, or refuses it. */
static fl_status b_finish(builder *b, fl_grid_program **out, fl_error *err) {
  sym *top = &b->stack[0];
  if (top->cerr != E_NONE) return const_fail(top->cerr, err);
  if (top->depth > GRID_STACK) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_too_deep");
  fl_grid_program *p = fl__malloc(sizeof *p + b->ncode * sizeof(ins));
  if (!p) return fl__fail(err, FL_NOMEM, false, "nomem:grid_program");
  p->ncode = b->ncode;
  p->depth = top->depth;
  p->constant = top->constant;
  p->value = top->constant ? top->value : 0;
  p->nvars = 0;
  memcpy(p->code, b->code, b->ncode * sizeof(ins));
  for (size_t i = 0; i < b->ncode; i++)
    if (p->code[i].op == OP_VAR && (size_t)p->code[i].arg + 1 > p->nvars) p->nvars = (size_t)p->code[i].arg + 1;
  *out = p;
  return FL_OK;
}

/* ---- the parser ---- */

enum {
  T_END,
  T_NUM,
  T_NAME,
  T_VAR,
  T_LP,
  T_RP,
  T_COMMA,
  T_PLUS,
  T_MINUS,
  T_STAR,
  T_FLOORDIV,
  T_PERCENT,
  T_SHL,
  T_SHR,
  T_SLASH, /* Python's true division: refused with its own message */
  T_EQ,
  T_NE,
  T_LT,
  T_LE,
  T_GT,
  T_GE,
  T_IF,
  T_ELSE,
  T_BAD
};

typedef struct parser {
  const char *src;
  size_t len;
  size_t pos;
  int tok;
  size_t tok_pos;
  size_t tok_len;
  int64_t tok_val;
  const char *const *names;
  size_t nnames;
  int nesting;
  builder b;
  fl_error *err;
  fl_status status;
} parser;

static int fail_syntax(parser *p, size_t at, const char *what) {
  p->status = fl__fail(p->err, FL_BAD_GRID_PROGRAM, true, "grid_expr_syntax:%zu:%s", at, what);
  return -1;
}

/* A syntax error at the current token; a stray character or a true division says so instead of
 * the generic expectation, since that is the actual mistake. */
static int fail_expected(parser *p, const char *what) {
  if (p->tok == T_BAD) return fail_syntax(p, p->tok_pos, "unexpected character");
  if (p->tok == T_SLASH) return fail_syntax(p, p->tok_pos, "true division '/' is not supported");
  return fail_syntax(p, p->tok_pos, what);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* Reads the next token. Returns -1 (with the error recorded) only for malformed numbers. */
static int next(parser *p) {
  const char *s = p->src;
  size_t i = p->pos;
  while (i < p->len && is_space(s[i])) i++;
  p->tok_pos = i;
  if (i >= p->len) {
    p->tok = T_END;
    p->tok_len = 0;
    p->pos = i;
    return 0;
  }
  char c = s[i];
  size_t n = 1;
  if (is_digit(c)) {
    uint64_t v = 0;
    bool nonzero = false;
    size_t j = i;
    for (; j < p->len && is_digit(s[j]); j++) {
      unsigned d = (unsigned)(s[j] - '0');
      if (d) nonzero = true;
      if (v > ((uint64_t)INT64_MAX - d) / 10) {
        p->status = fl__fail(p->err, FL_BAD_GRID_PROGRAM, true, "grid_expr_literal_overflow:%zu", i);
        return -1;
      }
      v = v * 10 + d;
    }
    n = j - i;
    /* Python refuses 007 but accepts 000. */
    if (c == '0' && n > 1 && nonzero) return fail_syntax(p, i, "leading zeros are not allowed");
    p->tok = T_NUM;
    p->tok_val = (int64_t)v;
  } else if (c == '$') {
    if (i + 1 >= p->len || !is_digit(s[i + 1])) return fail_syntax(p, i, "expected variable number");
    uint64_t v = 0;
    while (i + n < p->len && is_digit(s[i + n])) {
      v = v * 10 + (unsigned)(s[i + n] - '0');
      if (v > GRID_MAX_VAR) return fail_syntax(p, i, "variable index too large");
      n++;
    }
    p->tok = T_VAR;
    p->tok_val = (int64_t)v;
  } else if (is_name_start(c)) {
    while (i + n < p->len && is_name_char(s[i + n])) n++;
    /* The keywords are never names: `if` in an operand's place is a syntax error. */
    if (n == 2 && memcmp(s + i, "if", 2) == 0) p->tok = T_IF;
    else if (n == 4 && memcmp(s + i, "else", 4) == 0) p->tok = T_ELSE;
    else p->tok = T_NAME;
  } else {
    char c2 = i + 1 < p->len ? s[i + 1] : '\0';
    switch (c) {
      case '(': p->tok = T_LP; break;
      case ')': p->tok = T_RP; break;
      case ',': p->tok = T_COMMA; break;
      case '+': p->tok = T_PLUS; break;
      case '-': p->tok = T_MINUS; break;
      case '*': p->tok = T_STAR; break;
      case '%': p->tok = T_PERCENT; break;
      case '/':
        if (c2 == '/') p->tok = T_FLOORDIV, n = 2;
        else p->tok = T_SLASH;
        break;
      case '<':
        if (c2 == '<') p->tok = T_SHL, n = 2;
        else if (c2 == '=') p->tok = T_LE, n = 2;
        else p->tok = T_LT;
        break;
      case '>':
        if (c2 == '>') p->tok = T_SHR, n = 2;
        else if (c2 == '=') p->tok = T_GE, n = 2;
        else p->tok = T_GT;
        break;
      case '=':
        if (c2 == '=') p->tok = T_EQ, n = 2;
        else p->tok = T_BAD;
        break;
      case '!':
        if (c2 == '=') p->tok = T_NE, n = 2;
        else p->tok = T_BAD;
        break;
      default: p->tok = T_BAD; break;
    }
  }
  p->tok_len = n;
  p->pos = i + n;
  return 0;
}

static int parse_expr(parser *p);

static int enter(parser *p) {
  if (++p->nesting > GRID_MAX_NESTING) {
    p->status = fl__fail(p->err, FL_BAD_GRID_PROGRAM, true, "grid_expr_too_deep");
    return -1;
  }
  return 0;
}

/* Names longer than this are cut in reasons, which have a fixed size. */
#define NAME_IN_REASON 100

static int parse_call(parser *p, size_t name_pos, size_t name_len) {
  const char *name = p->src + name_pos;
  uint32_t op;
  bool variadic;
  if (name_len == 3 && memcmp(name, "min", 3) == 0) op = OP_MIN, variadic = true;
  else if (name_len == 3 && memcmp(name, "max", 3) == 0) op = OP_MAX, variadic = true;
  else if ((name_len == 4 && memcmp(name, "cdiv", 4) == 0) || (name_len == 7 && memcmp(name, "ceildiv", 7) == 0))
    op = OP_CDIV, variadic = false;
  else {
    int shown = name_len > NAME_IN_REASON ? NAME_IN_REASON : (int)name_len;
    p->status = fl__fail(p->err, FL_BAD_GRID_PROGRAM, true, "grid_expr_unknown_function:%.*s", shown, name);
    return -1;
  }
  if (enter(p) || next(p)) return -1; /* past '(' */
  size_t nargs = 0;
  while (p->tok != T_RP) {
    if (parse_expr(p)) return -1;
    if (++nargs > 1) b_binary(&p->b, op);
    if (p->tok == T_COMMA) {
      if (next(p)) return -1;
    } else if (p->tok != T_RP) {
      return fail_expected(p, "expected ',' or ')'");
    }
  }
  if (variadic ? nargs < 1 : nargs != 2) {
    p->status = fl__fail(p->err, FL_BAD_GRID_PROGRAM, true, "grid_expr_bad_arity:%.*s", (int)name_len, name);
    return -1;
  }
  p->nesting--;
  return next(p);
}

static int parse_primary(parser *p) {
  switch (p->tok) {
    case T_NUM:
      b_const(&p->b, p->tok_val);
      return next(p);
    case T_VAR:
      b_var(&p->b, p->tok_val);
      return next(p);
    case T_LP:
      if (enter(p) || next(p) || parse_expr(p)) return -1;
      if (p->tok != T_RP) return fail_expected(p, "expected ')'");
      p->nesting--;
      return next(p);
    case T_NAME: {
      size_t at = p->tok_pos, len = p->tok_len;
      if (next(p)) return -1;
      if (p->tok == T_LP) return parse_call(p, at, len);
      for (size_t k = 0; k < p->nnames; k++) {
        const char *nm = p->names[k];
        if (nm && strncmp(nm, p->src + at, len) == 0 && nm[len] == '\0') {
          b_var(&p->b, (int64_t)k);
          return 0;
        }
      }
      int shown = len > NAME_IN_REASON ? NAME_IN_REASON : (int)len;
      p->status = fl__fail(p->err, FL_BAD_GRID_PROGRAM, true, "grid_expr_unknown_name:%.*s", shown, p->src + at);
      return -1;
    }
    default:
      return fail_expected(p, "expected operand");
  }
}

/* Unary signs are read in a loop rather than by recursion, so a long run of them costs no stack;
 * each minus stays a separate negation because -INT64_MIN is an overflow in between. */
static int parse_unary(parser *p) {
  size_t nneg = 0;
  while (p->tok == T_PLUS || p->tok == T_MINUS) {
    if (p->tok == T_MINUS) nneg++;
    if (next(p)) return -1;
  }
  if (parse_primary(p)) return -1;
  while (nneg--) b_neg(&p->b);
  return 0;
}

static int parse_mul(parser *p) {
  if (parse_unary(p)) return -1;
  for (;;) {
    uint32_t op;
    if (p->tok == T_STAR) op = OP_MUL;
    else if (p->tok == T_FLOORDIV) op = OP_FLOORDIV;
    else if (p->tok == T_PERCENT) op = OP_MOD;
    else return 0;
    if (next(p) || parse_unary(p)) return -1;
    b_binary(&p->b, op);
  }
}

static int parse_add(parser *p) {
  if (parse_mul(p)) return -1;
  for (;;) {
    uint32_t op;
    if (p->tok == T_PLUS) op = OP_ADD;
    else if (p->tok == T_MINUS) op = OP_SUB;
    else return 0;
    if (next(p) || parse_mul(p)) return -1;
    b_binary(&p->b, op);
  }
}

static int parse_shift(parser *p) {
  if (parse_add(p)) return -1;
  for (;;) {
    uint32_t op;
    if (p->tok == T_SHL) op = OP_SHL;
    else if (p->tok == T_SHR) op = OP_SHR;
    else return 0;
    if (next(p) || parse_add(p)) return -1;
    b_binary(&p->b, op);
  }
}

static uint32_t comparison_op(int tok) {
  switch (tok) {
    case T_EQ: return OP_EQ;
    case T_NE: return OP_NE;
    case T_LT: return OP_LT;
    case T_LE: return OP_LE;
    case T_GT: return OP_GT;
    case T_GE: return OP_GE;
    default: return 0;
  }
}

/* One comparison at most: Python reads `a < b < c` as `a < b and b < c`, which is refused rather
 * than silently computed as `(a < b) < c`. */
static int parse_comparison(parser *p) {
  if (parse_shift(p)) return -1;
  uint32_t op = comparison_op(p->tok);
  if (!op) return 0;
  if (next(p) || parse_shift(p)) return -1;
  b_binary(&p->b, op);
  if (comparison_op(p->tok)) return fail_syntax(p, p->tok_pos, "chained comparison");
  return 0;
}

static void reverse(ins *a, size_t n) {
  for (; n > 1; a++, n -= 2) {
    ins t = a[0];
    a[0] = a[n - 1];
    a[n - 1] = t;
  }
}

/* `A if C else B`, lowest in precedence and right-associative: B is itself a conditional
 * expression, A and C are comparisons. A is built before the `if` is seen, so once C is built
 * behind it the two are swapped into evaluation order. A constant condition keeps only the chosen
 * branch; the other is still parsed (for its syntax) and then dropped unevaluated, as Python never
 * evaluates it. */
static int parse_expr(parser *p) {
  builder *b = &p->b;
  if (parse_comparison(p)) return -1;
  if (p->tok != T_IF) return 0;
  size_t slot = b->ncode++; /* for the conditional jump; `if` emits no other instruction */
  if (next(p) || parse_comparison(p)) return -1;
  if (p->tok != T_ELSE) return fail_expected(p, "expected 'else'");
  if (enter(p) || next(p)) return -1;
  sym c = b->stack[--b->nstack], a = b->stack[--b->nstack];
  size_t clen = b->ncode - c.start;
  if (c.cerr || c.constant) {
    /* A condition that always fails is the result (nothing after it runs); otherwise the branch
     * that is chosen. */
    bool keep_a = !c.cerr && c.value != 0;
    if (c.cerr) {
      memmove(b->code + a.start, b->code + c.start, clen * sizeof(ins));
      b->ncode = a.start + clen;
      c.start = a.start;
      b->stack[b->nstack++] = c;
    } else if (keep_a) {
      b->ncode = slot;
      b->stack[b->nstack++] = a;
    } else {
      b->ncode = a.start;
    }
    size_t keep = b->ncode;
    if (parse_expr(p)) return -1;
    if (c.cerr || keep_a) b->nstack--, b->ncode = keep;
  } else {
    /* [A][slot][C] becomes [C][slot][A]: the whole reversed, then each part back. */
    size_t alen = slot - a.start;
    reverse(b->code + a.start, b->ncode - a.start);
    reverse(b->code + a.start, clen);
    reverse(b->code + b->ncode - alen, alen);
    c.start = a.start;
    size_t jz = a.start + clen, jmp = b->ncode++;
    if (parse_expr(p)) return -1;
    sym e = b->stack[--b->nstack];
    b_cond(b, c, jz, a, jmp, e);
  }
  p->nesting--;
  return 0;
}

fl_status fl_grid_program_compile(const char *expr, const char *const *names, size_t nnames,
                                  fl_grid_program **program, fl_error *err) {
  if (!program) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_program_null");
  *program = NULL;
  if (!expr) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_empty");
  size_t len = 0;
  while (len <= GRID_MAX_LEN && expr[len]) len++;
  if (len > GRID_MAX_LEN) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_too_long");
  size_t first = 0;
  while (first < len && is_space(expr[first])) first++;
  if (first == len) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_empty");

  /* Every token emits at most one instruction and pushes at most one operand, and there are at
   * most len tokens, so len + 1 entries bound both arrays. */
  parser p;
  memset(&p, 0, sizeof p);
  p.src = expr;
  p.len = len;
  p.names = names;
  p.nnames = names ? nnames : 0;
  p.err = err;
  p.status = FL_OK;
  p.b.code = fl__malloc((len + 1) * sizeof(ins));
  p.b.stack = fl__malloc((len + 1) * sizeof(sym));
  fl_status st;
  if (!p.b.code || !p.b.stack) {
    st = fl__fail(err, FL_NOMEM, false, "nomem:grid_program");
    goto done;
  }
  if (next(&p) || parse_expr(&p)) {
    st = p.status;
    goto done;
  }
  if (p.tok != T_END) {
    fail_expected(&p, "unexpected input");
    st = p.status;
    goto done;
  }
  st = b_finish(&p.b, program, err);
done:
  fl__free(p.b.code);
  fl__free(p.b.stack);
  return st;
}

/* Rebuilds code[from, to) through the folding builder with variable `var` read as `value`. A
 * conditional is replayed part by part, so that a condition that has become constant keeps only
 * its chosen branch; recursion follows the nesting of conditionals, which the parser bounds. */
static void replay(builder *b, const ins *code, size_t from, size_t to, size_t var, int64_t value) {
  for (size_t i = from; i < to; i++) {
    const ins *in = &code[i];
    switch (in->op) {
      case OP_CONST: b_const(b, in->arg); break;
      case OP_VAR:
        if ((size_t)in->arg == var) b_const(b, value);
        else b_var(b, in->arg);
        break;
      case OP_NEG: b_neg(b); break;
      case OP_FAIL: b_fail(b, (int)in->arg); break;
      case OP_JZ: {
        /* C was replayed; A is [i + 1, els - 1), the JMP at els - 1 ends it, B is [els, end). */
        size_t els = i + 1 + (size_t)in->arg, end = els + (size_t)code[els - 1].arg;
        sym c = b->stack[b->nstack - 1];
        if (c.cerr) {
          /* The condition never completes: it is the result. */
        } else if (c.constant) {
          b->nstack--;
          b->ncode = c.start;
          if (c.value) replay(b, code, i + 1, els - 1, var, value);
          else replay(b, code, els, end, var, value);
        } else {
          b->nstack--;
          size_t jz = b->ncode++;
          replay(b, code, i + 1, els - 1, var, value);
          sym a = b->stack[--b->nstack];
          size_t jmp = b->ncode++;
          replay(b, code, els, end, var, value);
          sym e = b->stack[--b->nstack];
          b_cond(b, c, jz, a, jmp, e);
        }
        i = end - 1;
        break;
      }
      default:
        if (in->op >= OP_K) b_const(b, in->arg), b_binary(b, in->op - OP_K);
        else b_binary(b, in->op);
        break;
    }
  }
}

fl_status fl__grid_program_substitute(fl_grid_program *program, size_t var, int64_t value, fl_error *err) {
  if (!program) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_program_null");
  if (!fl__grid_program_uses_var(program, var)) return FL_OK;
  /* The code is replayed through the folding builder; an immediate operand becomes a constant
   * push plus the stack form again, so the builder may need twice the instructions. */
  builder b = {0};
  b.code = fl__malloc(2 * program->ncode * sizeof(ins));
  b.stack = fl__malloc(2 * program->ncode * sizeof(sym));
  fl_grid_program *np = NULL;
  fl_status st;
  if (!b.code || !b.stack) {
    st = fl__fail(err, FL_NOMEM, false, "nomem:grid_program");
    goto done;
  }
  replay(&b, program->code, 0, program->ncode, var, value);
  st = b_finish(&b, &np, err);
  if (st != FL_OK) goto done;
  /* Folding never lengthens the code (each instruction replays as at most one), so the result
   * fits in place and the caller's pointer stays. */
  program->ncode = np->ncode;
  program->nvars = np->nvars;
  program->depth = np->depth;
  program->constant = np->constant;
  program->value = np->value;
  memcpy(program->code, np->code, np->ncode * sizeof(ins));
done:
  fl__free(np);
  fl__free(b.code);
  fl__free(b.stack);
  return st;
}

bool fl__grid_program_uses_var(const fl_grid_program *program, size_t var) {
  if (!program || var >= program->nvars) return false;
  for (size_t i = 0; i < program->ncode; i++)
    if (program->code[i].op == OP_VAR && (size_t)program->code[i].arg == var) return true;
  return false;
}

bool fl_grid_program_is_constant(const fl_grid_program *program) { return program && program->constant; }

size_t fl_grid_program_nvars(const fl_grid_program *program) { return program ? program->nvars : 0; }

void fl_grid_program_free(fl_grid_program *program) { fl__free(program); }

static FL__NOINLINE fl_status eval_fail(int e, fl_error *err) {
  const char *what = e == E_DIV0 ? "div_by_zero" : e == E_SHIFT ? "negative_shift" : "overflow";
  return fl__fail(err, FL_GRID_EVAL, false, "grid_%s", what);
}

/* Names the first variable the program reads that the caller did not supply. */
static FL__NOINLINE fl_status var_missing(const fl_grid_program *program, size_t nvars, fl_error *err) {
  size_t missing = program->nvars - 1;
  for (size_t i = 0; i < program->ncode; i++) {
    const ins *in = &program->code[i];
    if (in->op == OP_VAR && (size_t)in->arg >= nvars && (size_t)in->arg < missing) missing = (size_t)in->arg;
  }
  return fl__fail(err, FL_GRID_EVAL, false, "grid_var_missing:%zu", missing);
}

/* One case per operator and form, so the compiler sees each operation inline in the dispatch. */
#define BIN_CASE(OP, FN)                                                                           \
  case OP:                                                                                         \
    b = *--sp;                                                                                     \
    e = FN(sp[-1], b, &sp[-1]);                                                                    \
    if (FL__UNLIKELY(e)) goto fail;                                                                \
    break;                                                                                         \
  case OP + OP_K:                                                                                  \
    e = FN(sp[-1], ip->arg, &sp[-1]);                                                              \
    if (FL__UNLIKELY(e)) goto fail;                                                                \
    break;

static inline int ar_min(int64_t a, int64_t b, int64_t *r) {
  *r = a < b ? a : b;
  return E_NONE;
}

static inline int ar_max(int64_t a, int64_t b, int64_t *r) {
  *r = a > b ? a : b;
  return E_NONE;
}

#define CMP_FN(NAME, OPER)                                                                         \
  static inline int NAME(int64_t a, int64_t b, int64_t *r) {                                       \
    *r = a OPER b;                                                                                 \
    return E_NONE;                                                                                 \
  }
CMP_FN(ar_eq, ==)
CMP_FN(ar_ne, !=)
CMP_FN(ar_lt, <)
CMP_FN(ar_le, <=)
CMP_FN(ar_gt, >)
CMP_FN(ar_ge, >=)

fl_status fl_grid_program_eval(const fl_grid_program *program, const int64_t *vars, size_t nvars,
                               int64_t *out, fl_error *err) {
  if (FL__UNLIKELY(!program || !out)) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_program_null");
  if (program->constant) {
    *out = program->value;
    return FL_OK;
  }
  if (!vars) nvars = 0;
  if (FL__UNLIKELY(nvars < program->nvars)) return var_missing(program, nvars, err);
  /* The compiler proved that depth <= GRID_STACK, so the pushes below stay inside the array. */
  int64_t stack[GRID_STACK];
  int64_t *sp = stack, b;
  int e;
  const ins *ip = program->code, *end = ip + program->ncode;
  for (; ip < end; ip++) {
    switch (ip->op) {
      case OP_CONST: *sp++ = ip->arg; break;
      case OP_VAR: *sp++ = vars[ip->arg]; break;
      case OP_NEG:
        if (FL__UNLIKELY(sp[-1] == INT64_MIN)) {
          e = E_OVF;
          goto fail;
        }
        sp[-1] = -sp[-1];
        break;
      BIN_CASE(OP_ADD, ar_add)
      BIN_CASE(OP_SUB, ar_sub)
      BIN_CASE(OP_MUL, ar_mul)
      BIN_CASE(OP_FLOORDIV, ar_floordiv)
      BIN_CASE(OP_MOD, ar_mod)
      BIN_CASE(OP_SHL, ar_shl)
      BIN_CASE(OP_SHR, ar_shr)
      BIN_CASE(OP_MIN, ar_min)
      BIN_CASE(OP_MAX, ar_max)
      BIN_CASE(OP_CDIV, ar_cdiv)
      BIN_CASE(OP_EQ, ar_eq)
      BIN_CASE(OP_NE, ar_ne)
      BIN_CASE(OP_LT, ar_lt)
      BIN_CASE(OP_LE, ar_le)
      BIN_CASE(OP_GT, ar_gt)
      BIN_CASE(OP_GE, ar_ge)
      /* Jumps go forward only, to at most the end of the code. */
      case OP_JZ:
        if (*--sp == 0) ip += ip->arg;
        break;
      case OP_JMP: ip += ip->arg; break;
      case OP_FAIL: e = (int)ip->arg; goto fail;
      default: e = E_OVF; goto fail;
    }
  }
  *out = stack[0];
  return FL_OK;
fail:
  return eval_fail(e, err);
}
