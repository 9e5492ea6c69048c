/* grid.c: grid programs: Python-style integer expressions compiled to stack bytecode and evaluated. */
#include "fl_internal.h"

#include <string.h>

/* Limits. The evaluation stack is a fixed array, so its depth is checked at compile time; the
 * nesting limit keeps the recursive-descent parser's own recursion small. */
#define GRID_MAX_LEN 4096
#define GRID_STACK 64
#define GRID_MAX_NESTING 200
#define GRID_MAX_VAR INT32_MAX

/* Opcodes. CONST and VAR push their argument or variable. A conditional `A if C else B` is laid
 * out as  C, JZ, A, JMP, B  with forward jumps relative to the next instruction, so only the chosen
 * branch runs. Every other opcode is an operator: it replaces the top of the stack a by a op b,
 * where b is popped, or is the instruction's argument when OP_K is added (the common shape
 * `x // -128` after folding). Negation and next_power_of_2 ignore b and are always emitted with
 * OP_K, so they pop nothing. Comparisons give 1 or 0, as Python's True and False are 1 and 0 in arithmetic. */
enum {
  OP_CONST, OP_VAR, OP_JZ, OP_JMP,
  OP_NEG, OP_ADD, OP_SUB, OP_MUL, OP_FLOORDIV, OP_MOD, OP_CDIV, OP_SHL, OP_SHR, OP_MIN, OP_MAX,
  OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_NPOW2,
  OP_K = 32
};

/* Outcomes of an operation, and the words that name them in reasons. */
enum { E_NONE, E_DIV0, E_OVF, E_SHIFT };
static const char *const e_names[] = {"", "div_by_zero", "overflow", "negative_shift"};

typedef struct ins {
  int64_t arg; /* constant, variable index, jump distance or right-hand operand */
  uint32_t op;
} ins;

/* A program that reads no variable is a single OP_CONST (see b_finish). */
struct fl_grid_program {
  size_t ncode;
  size_t nvars; /* largest variable index read, plus one */
  bool shaped;  /* one of fl__grid_shape's shapes: evaluated without the interpreter */
  fl__grid_shape shape;
  ins code[];
};

/* An operator's two forms share one case, entered at the stack form to pop b first; one jump
 * dispatches either, and then a is the top of the stack, which the result replaces. */
#define OPERATOR(OP)                                                                               \
  case OP:                                                                                         \
    b = *--sp;                                                                                     \
    __attribute__((fallthrough));                                                                  \
  case OP + OP_K:                                                                                  \
    a = sp[-1];

/* Runs code and returns an E_ code. This is the one operator table, with Python's semantics on
 * int64: it evaluates programs, and the folder runs it to fold constants. The compiler proved
 * that the code needs at most GRID_STACK slots, jumps only forward within it and leaves one value;
 * the caller checked that every variable it reads is supplied. It is forced inline because in
 * fl_grid_program_eval, on every launch, a call costs a nanosecond of the five a ceil-div takes. */
__attribute__((always_inline)) static inline int run(const ins *ip, size_t n, const int64_t *vars, int64_t *out) {
  int64_t stack[GRID_STACK], *sp = stack;
  for (const ins *end = ip + n; ip < end; ip++) {
    int64_t b = ip->arg, a;
    switch (ip->op) {
      case OP_CONST: *sp++ = b; continue;
      case OP_VAR: *sp++ = vars[b]; continue;
      case OP_JZ:
        if (*--sp == 0) ip += b;
        continue;
      case OP_JMP: ip += b; continue;
      OPERATOR(OP_NEG)
        if (a == INT64_MIN) return E_OVF;
        sp[-1] = -a;
        continue;
      OPERATOR(OP_ADD) if (__builtin_add_overflow(a, b, &sp[-1])) return E_OVF; continue;
      OPERATOR(OP_SUB) if (__builtin_sub_overflow(a, b, &sp[-1])) return E_OVF; continue;
      OPERATOR(OP_MUL) if (__builtin_mul_overflow(a, b, &sp[-1])) return E_OVF; continue;
      /* Python's a // b and cdiv(a, b): fl__div_floor and fl__div_ceil; a % b takes the divisor's
       * sign. b == -1 is split off because INT64_MIN / -1 and INT64_MIN % -1 are undefined in C. */
      OPERATOR(OP_FLOORDIV)
        if (b == 0) return E_DIV0;
        if (b == -1 && a == INT64_MIN) return E_OVF;
        sp[-1] = b == -1 ? -a : fl__div_floor(a, b);
        continue;
      OPERATOR(OP_CDIV)
        if (b == 0) return E_DIV0;
        if (b == -1 && a == INT64_MIN) return E_OVF;
        sp[-1] = b == -1 ? -a : fl__div_ceil(a, b);
        continue;
      OPERATOR(OP_MOD)
        if (b == 0) return E_DIV0;
        sp[-1] = b == -1 ? 0 : a % b + (a % b != 0 && (a % b < 0) != (b < 0) ? b : 0);
        continue;
      /* a << b fits exactly when a lies in [INT64_MIN >> b, INT64_MAX >> b]; the shift itself is
       * done on the unsigned value because left-shifting a negative int is undefined in C. Python
       * shifts zero by any count to zero. */
      OPERATOR(OP_SHL)
        if (b < 0) return E_SHIFT;
        if (a != 0 && (b >= 64 || a > INT64_MAX >> b || a < -(INT64_MAX >> b) - 1)) return E_OVF;
        sp[-1] = a == 0 ? 0 : (int64_t)((uint64_t)a << b);
        continue;
      /* The arithmetic right shift is written on non-negative values only, so that it does not
       * depend on how the compiler shifts negative numbers; a count past 63 gives what 63 gives. */
      OPERATOR(OP_SHR)
        if (b < 0) return E_SHIFT;
        if (b > 63) b = 63;
        sp[-1] = a >= 0 ? a >> b : ~(~a >> b);
        continue;
      OPERATOR(OP_MIN) sp[-1] = a < b ? a : b; continue;
      OPERATOR(OP_MAX) sp[-1] = a > b ? a : b; continue;
      OPERATOR(OP_EQ) sp[-1] = a == b; continue;
      OPERATOR(OP_NE) sp[-1] = a != b; continue;
      OPERATOR(OP_LT) sp[-1] = a < b; continue;
      OPERATOR(OP_LE) sp[-1] = a <= b; continue;
      OPERATOR(OP_GT) sp[-1] = a > b; continue;
      OPERATOR(OP_GE) sp[-1] = a >= b; continue;
      /* Triton's next_power_of_2: n - 1, its bits below the highest set one set, plus 1 (0 for
       * n <= 0, as Python computes it); on int64 only n - 1 and the final + 1 can overflow. */
      OPERATOR(OP_NPOW2) {
        (void)b;
        if (a == INT64_MIN) return E_OVF;
        int64_t m = a - 1;
        for (int s = 1; s <= 32; s <<= 1) m |= m >= 0 ? m >> s : ~(~m >> s);
        if (m == INT64_MAX) return E_OVF;
        sp[-1] = m + 1;
        continue;
      }
      default: return E_OVF; /* not an opcode: the compiler never emits one */
    }
  }
  *out = stack[0];
  return E_NONE;
}

/* ---- the folding code builder ---- */

/* One operand while code is built: its code runs from `start` to the end of the code so far and
 * needs `depth` stack slots. A constant is exactly one OP_CONST at `start`, so folding rewrites it
 * in place. As in Lua's constant folding, an operation on constants is folded only when it
 * succeeds: one that would fail is emitted as it is and fails if and when it runs, so a failure in
 * a branch that is never chosen never shows. */
typedef struct sym {
  int64_t value;
  size_t start;
  uint32_t depth;
  bool constant;
} sym;

/* The code so far and the stack of operands it computes. */
typedef struct builder {
  ins *code;
  sym *stack;
  size_t ncode, nstack;
} builder;

/* Room for n instructions and n operands, in one allocation. */
static bool b_init(builder *b, size_t n) {
  b->ncode = b->nstack = 0;
  b->code = fl__malloc(n * (sizeof(ins) + sizeof(sym)));
  b->stack = b->code ? (sym *)(b->code + n) : NULL;
  return b->code != NULL;
}

static void b_push(builder *b, uint32_t op, int64_t arg) {
  b->stack[b->nstack++] = (sym){op == OP_CONST ? arg : 0, b->ncode, 1, op == OP_CONST};
  b->code[b->ncode++] = (ins){arg, op};
}

/* Applies operator op to the top two operands. A constant right operand becomes the immediate. */
static void b_binary(builder *b, uint32_t op) {
  sym r = b->stack[--b->nstack], *l = &b->stack[b->nstack - 1];
  if (r.constant) b->ncode = r.start, op += OP_K;
  else if (r.depth + 1 > l->depth) l->depth = r.depth + 1;
  b->code[b->ncode++] = (ins){r.constant ? r.value : 0, op};
  /* Two constants are now [CONST a][op b]: that code is folded into one constant by running it,
   * unless it fails, and then it stays, to fail when it runs. */
  if (l->constant && r.constant && run(b->code + l->start, 2, NULL, &l->value) == E_NONE) {
    b->code[l->start].arg = l->value;
    b->ncode = l->start + 1;
    return;
  }
  l->constant = false;
}

/* Completes `C JZ A JMP B` once all three are built (and popped) and pushes the result. Each part
 * starts from the same stack height, so the depth is the largest of the three. */
static void b_cond(builder *b, sym c, size_t jz, sym a, size_t jmp, sym e) {
  b->code[jz] = (ins){(int64_t)(jmp - jz), OP_JZ};
  b->code[jmp] = (ins){(int64_t)(b->ncode - jmp - 1), OP_JMP};
  uint32_t depth = c.depth > a.depth ? c.depth : a.depth;
  b->stack[b->nstack++] = (sym){0, c.start, depth > e.depth ? depth : e.depth, false};
}

/* Checks the finished code (one operand left) and stores it as a program: over *dst, or in a new
 * allocation when *dst is NULL. Code that reads no variable is run once here, and refused when it
 * fails. Otherwise it has been folded to one OP_CONST: an operation on constants that is not
 * folded, and so every operation that depends on it, fails whenever it runs, and with no variable
 * such code runs unless a constant condition dropped it. A refusal stores nothing, so that a
 * refused substitution leaves its program as it was. */
static fl_status b_finish(const builder *b, fl_grid_program **dst, fl_error *err) {
  if (b->stack[0].depth > GRID_STACK) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_too_deep");
  fl_grid_program h = {.ncode = b->ncode};
  for (size_t i = 0; i < b->ncode; i++)
    if (b->code[i].op == OP_VAR && (size_t)b->code[i].arg >= h.nvars) h.nvars = (size_t)b->code[i].arg + 1;
  int64_t value;
  int e = h.nvars == 0 ? run(b->code, b->ncode, NULL, &value) : E_NONE;
  if (e != E_NONE) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_const_%s", e_names[e]);
  if (!*dst && !(*dst = fl__malloc(sizeof h + h.ncode * sizeof(ins))))
    return fl__fail(err, FL_NOMEM, false, "nomem:grid_program");
  **dst = h;
  memcpy((*dst)->code, b->code, h.ncode * sizeof(ins));
  (*dst)->shaped = fl__grid_program_shape(*dst, &(*dst)->shape);
  return FL_OK;
}

/* ---- the parser ---- */

enum { T_END, T_NUM, T_VAR, T_NAME, T_OP, T_LP, T_RP, T_COMMA, T_SLASH, T_IF, T_ELSE, T_BAD };

/* Binary operators, each two-character spelling before its one-character prefix, with Python's
 * binding strength: comparisons 1, shifts 2, + - 3, * // % 4 (unary signs bind at 5). */
static const struct {
  char text[3];
  uint8_t op, level;
} operators[] = {
    {"//", OP_FLOORDIV, 4}, {"<<", OP_SHL, 2}, {">>", OP_SHR, 2}, {"<=", OP_LE, 1}, {">=", OP_GE, 1},
    {"==", OP_EQ, 1},       {"!=", OP_NE, 1},  {"+", OP_ADD, 3},  {"-", OP_SUB, 3}, {"*", OP_MUL, 4},
    {"%", OP_MOD, 4},       {"<", OP_LT, 1},   {">", OP_GT, 1},
};

typedef struct parser {
  const char *src;
  size_t len, pos;
  int tok, level; /* the current token, and its binding strength when it is an operator */
  size_t tok_pos, tok_len;
  int64_t tok_val; /* a number's value, a variable's index or an operator's opcode */
  const char *const *names;
  size_t nnames;
  int nesting;
  builder b;
  fl_error *err;
  fl_status status;
} parser;

/* Records why the expression is refused and gives -1, which every parse function passes up. */
#define REFUSE(p, ...) ((p)->status = fl__fail((p)->err, FL_BAD_GRID_PROGRAM, true, __VA_ARGS__), -1)

/* Names are cut to 100 characters in reasons, which have a fixed size. */
static int shown(size_t len) { return len > 100 ? 100 : (int)len; }

static int fail_syntax(parser *p, size_t at, const char *what) {
  return REFUSE(p, "grid_expr_syntax:%zu:%s", at, what);
}

/* A syntax error at the current token; a stray character or a true division says so instead of
 * the generic expectation, since that is the actual mistake. */
static int fail_expected(parser *p, const char *what) {
  if (p->tok == T_BAD) return fail_syntax(p, p->tok_pos, "unexpected character");
  if (p->tok == T_SLASH) return fail_syntax(p, p->tok_pos, "true division '/' is not supported");
  return fail_syntax(p, p->tok_pos, what);
}

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

/* Reads the next token. Returns -1 (with the error recorded) only for a malformed literal or
 * variable number. */
static int next(parser *p) {
  const char *s = p->src;
  size_t i = p->pos, n = 1;
  while (i < p->len && is_space(s[i])) i++;
  p->tok_pos = i;
  p->tok = T_BAD;
  char c = i < p->len ? s[i] : '\0';
  if (i >= p->len) {
    p->tok = T_END, n = 0;
  } else if (is_digit(c)) {
    uint64_t v = 0;
    bool nonzero = false;
    for (n = 0; i + n < p->len && is_digit(s[i + n]); n++) {
      unsigned d = (unsigned)(s[i + n] - '0');
      nonzero = nonzero || d;
      if (v > ((uint64_t)INT64_MAX - d) / 10) return REFUSE(p, "grid_expr_literal_overflow:%zu", i);
      v = v * 10 + d;
    }
    /* Python refuses 007 but accepts 000. */
    if (c == '0' && n > 1 && nonzero) return fail_syntax(p, i, "leading zeros are not allowed");
    p->tok = T_NUM, p->tok_val = (int64_t)v;
  } else if (c == '$') {
    if (i + 1 >= p->len || !is_digit(s[i + 1])) return fail_syntax(p, i, "expected variable number");
    uint64_t v = 0;
    for (; i + n < p->len && is_digit(s[i + n]); n++)
      if ((v = v * 10 + (unsigned)(s[i + n] - '0')) > GRID_MAX_VAR) return fail_syntax(p, i, "variable index too large");
    p->tok = T_VAR, p->tok_val = (int64_t)v;
  } else if (is_name_start(c)) {
    while (i + n < p->len && (is_name_start(s[i + n]) || is_digit(s[i + n]))) n++;
    /* The keywords are never names: `if` in an operand's place is a syntax error. */
    if (n == 2 && memcmp(s + i, "if", 2) == 0) p->tok = T_IF;
    else if (n == 4 && memcmp(s + i, "else", 4) == 0) p->tok = T_ELSE;
    else p->tok = T_NAME;
  } else if (c == '(' || c == ')' || c == ',') {
    p->tok = c == '(' ? T_LP : c == ')' ? T_RP : T_COMMA;
  } else {
    for (size_t k = 0; k < sizeof operators / sizeof operators[0] && p->tok == T_BAD; k++) {
      size_t m = strlen(operators[k].text);
      if (m <= p->len - i && memcmp(s + i, operators[k].text, m) == 0)
        p->tok = T_OP, p->tok_val = operators[k].op, p->level = operators[k].level, n = m;
    }
    if (p->tok == T_BAD && c == '/') p->tok = T_SLASH; /* Python's true division */
  }
  p->tok_len = n;
  p->pos = i + n;
  return 0;
}

static int parse_expr(parser *p);

static int enter(parser *p) { return ++p->nesting > GRID_MAX_NESTING ? REFUSE(p, "grid_expr_too_deep") : 0; }

/* min(...) and max(...) take one argument or more, cdiv and ceildiv exactly two, next_power_of_2
 * exactly one; each argument after the first is combined with the ones before, left to right. */
static int parse_call(parser *p, size_t name_pos, size_t name_len) {
  const char *name = p->src + name_pos;
  uint32_t op;
  if (name_len == 3 && memcmp(name, "min", 3) == 0) op = OP_MIN;
  else if (name_len == 3 && memcmp(name, "max", 3) == 0) op = OP_MAX;
  else if ((name_len == 4 && memcmp(name, "cdiv", 4) == 0) || (name_len == 7 && memcmp(name, "ceildiv", 7) == 0))
    op = OP_CDIV;
  else if (name_len == 15 && memcmp(name, "next_power_of_2", 15) == 0) op = OP_NPOW2;
  else return REFUSE(p, "grid_expr_unknown_function:%.*s", shown(name_len), name);
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
  if (op == OP_CDIV ? nargs != 2 : op == OP_NPOW2 ? nargs != 1 : nargs < 1)
    return REFUSE(p, "grid_expr_bad_arity:%.*s", shown(name_len), name);
  if (op == OP_NPOW2) b_push(&p->b, OP_CONST, 0), b_binary(&p->b, OP_NPOW2);
  p->nesting--;
  return next(p);
}

static int parse_primary(parser *p) {
  switch (p->tok) {
    case T_NUM:
    case T_VAR:
      b_push(&p->b, p->tok == T_NUM ? OP_CONST : OP_VAR, p->tok_val);
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
          b_push(&p->b, OP_VAR, (int64_t)k);
          return 0;
        }
      }
      return REFUSE(p, "grid_expr_unknown_name:%.*s", shown(len), p->src + at);
    }
    default: return fail_expected(p, "expected operand");
  }
}

/* Unary signs are read in a loop rather than by recursion, so a long run of them costs no stack;
 * each minus stays a separate negation because -INT64_MIN is an overflow in between. */
static int parse_unary(parser *p) {
  size_t nneg = 0;
  while (p->tok == T_OP && (p->tok_val == OP_ADD || p->tok_val == OP_SUB)) {
    nneg += p->tok_val == OP_SUB;
    if (next(p)) return -1;
  }
  if (parse_primary(p)) return -1;
  for (; nneg > 0; nneg--) b_push(&p->b, OP_CONST, 0), b_binary(&p->b, OP_NEG);
  return 0;
}

/* The left-associative binary operators of binding strength `level` and above. Comparisons take
 * one operator at most: Python reads `a < b < c` as `a < b and b < c`, which is refused rather than
 * silently computed as `(a < b) < c`. */
static int parse_binary(parser *p, int level) {
  if (level > 4) return parse_unary(p);
  if (parse_binary(p, level + 1)) return -1;
  while (p->tok == T_OP && p->level == level) {
    uint32_t op = (uint32_t)p->tok_val;
    if (next(p) || parse_binary(p, level + 1)) return -1;
    b_binary(&p->b, op);
    if (level == 1 && p->tok == T_OP && p->level == 1) return fail_syntax(p, p->tok_pos, "chained comparison");
  }
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
  if (parse_binary(p, 1)) return -1;
  if (p->tok != T_IF) return 0;
  size_t slot = b->ncode++; /* for the conditional jump; `if` emits no other instruction */
  if (next(p) || parse_binary(p, 1)) return -1;
  if (p->tok != T_ELSE) return fail_expected(p, "expected 'else'");
  if (enter(p) || next(p)) return -1;
  sym c = b->stack[--b->nstack], a = b->stack[--b->nstack];
  if (c.constant) {
    b->ncode = c.value ? slot : a.start;
    if (c.value) b->stack[b->nstack++] = a;
    size_t keep = b->ncode;
    if (parse_expr(p)) return -1;
    if (c.value) b->nstack--, b->ncode = keep;
  } else {
    /* [A][slot][C] becomes [C][slot][A]: the whole reversed, then each part back. */
    size_t clen = b->ncode - c.start, alen = slot - a.start;
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
  parser p = {.src = expr, .len = len, .names = names, .nnames = names ? nnames : 0, .err = err, .status = FL_OK};
  if (next(&p)) return p.status;
  if (p.tok == T_END) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_expr_empty");
  /* Every token emits at most one instruction and pushes at most one operand, and there are at
   * most len tokens, so len + 1 entries bound both arrays. */
  if (!b_init(&p.b, len + 1)) return fl__fail(err, FL_NOMEM, false, "nomem:grid_program");
  fl_status st;
  if (parse_expr(&p) || (p.tok != T_END && fail_expected(&p, "unexpected input"))) st = p.status;
  else st = b_finish(&p.b, program, err);
  fl__free(p.b.code);
  return st;
}

/* Rebuilds code[from, to) through the builder with variable `var` read as `value`. A conditional
 * is replayed part by part, so that a condition that has become constant keeps only its chosen
 * branch; recursion follows the nesting of conditionals, which the parser bounds. */
static void replay(builder *b, const ins *code, size_t from, size_t to, size_t var, int64_t value) {
  for (size_t i = from; i < to; i++) {
    const ins *in = &code[i];
    if (in->op == OP_JZ) {
      /* C was replayed; A is [i + 1, els - 1), the JMP at els - 1 ends it, B is [els, end). */
      size_t els = i + 1 + (size_t)in->arg, end = els + (size_t)code[els - 1].arg;
      sym c = b->stack[--b->nstack];
      if (c.constant) {
        b->ncode = c.start;
        if (c.value) replay(b, code, i + 1, els - 1, var, value);
        else replay(b, code, els, end, var, value);
      } else {
        size_t jz = b->ncode++;
        replay(b, code, i + 1, els - 1, var, value);
        sym a = b->stack[--b->nstack];
        size_t jmp = b->ncode++;
        replay(b, code, els, end, var, value);
        sym e = b->stack[--b->nstack];
        b_cond(b, c, jz, a, jmp, e);
      }
      i = end - 1;
    } else if (in->op == OP_VAR && (size_t)in->arg == var) {
      b_push(b, OP_CONST, value);
    } else if (in->op == OP_CONST || in->op == OP_VAR) {
      b_push(b, in->op, in->arg);
    } else {
      if (in->op >= OP_K) b_push(b, OP_CONST, in->arg);
      b_binary(b, in->op % OP_K);
    }
  }
}

fl_status fl__grid_program_substitute(fl_grid_program *program, size_t var, int64_t value, fl_error *err) {
  if (!program) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_program_null");
  if (!fl__grid_program_uses_var(program, var)) return FL_OK;
  /* An immediate operand replays as a push and then its operator, one instruction more for a
   * moment; otherwise each instruction replays as at most one. */
  builder b;
  if (!b_init(&b, program->ncode + 1)) return fl__fail(err, FL_NOMEM, false, "nomem:grid_program");
  replay(&b, program->code, 0, program->ncode, var, value);
  /* Folding never lengthens the code, so the result fits in place and the caller's pointer stays. */
  fl_status st = b_finish(&b, &program, err);
  fl__free(b.code);
  return st;
}

bool fl__grid_program_uses_var(const fl_grid_program *program, size_t var) {
  if (!program || var >= program->nvars) return false;
  for (size_t i = 0; i < program->ncode; i++)
    if (program->code[i].op == OP_VAR && (size_t)program->code[i].arg == var) return true;
  return false;
}

bool fl__grid_program_shape(const fl_grid_program *program, fl__grid_shape *shape) {
  if (!program || program->ncode == 0 || program->ncode > 5 || program->code[0].op != OP_VAR ||
      program->code[0].arg < 0 || program->code[0].arg > GRID_MAX_VAR)
    return false;
  const ins *c = program->code;
  size_t n = program->ncode;
  fl__grid_shape sh = {.var = (uint32_t)c[0].arg, .div = 1, .hi = INT64_MAX, .shift = 0, .ceil = true};
  if (n == 2 && c[1].op == OP_CDIV + OP_K && c[1].arg >= 1) {
    sh.div = c[1].arg; /* cdiv(x, d), d > 0: rounds up */
  } else if (n == 3 && c[1].op == OP_FLOORDIV + OP_K && c[1].arg <= -2 && c[2].op == OP_NEG + OP_K) {
    /* -(x // -d) = ceil(x / d); with d >= 2 the floor division never yields INT64_MIN, so the
     * negation cannot overflow (d = 1 is left to the interpreter: -(INT64_MIN // -1) overflows). */
    sh.div = -c[1].arg;
  } else if (n > 1) {
    /* x, then additions and subtractions of constants, then at most one floor division by a
     * positive constant. Each running offset stays >= 0, so no step can pass INT64_MIN; no step
     * passes INT64_MAX while x <= INT64_MAX - (the largest offset). */
    int64_t off = 0, top = 0;
    size_t i = 1;
    for (; i < n && (c[i].op == OP_ADD + OP_K || c[i].op == OP_SUB + OP_K); i++) {
      int64_t k = c[i].arg;
      if (c[i].op == OP_SUB + OP_K ? __builtin_sub_overflow(off, k, &off) : __builtin_add_overflow(off, k, &off))
        return false;
      if (off < 0) return false;
      if (off > top) top = off;
    }
    if (i < n && c[i].op == OP_FLOORDIV + OP_K && c[i].arg >= 1) sh.div = c[i++].arg;
    if (i != n) return false;
    sh.add = off;
    sh.hi = INT64_MAX - top;
    sh.ceil = false;
  }
  sh.shift = (int8_t)((sh.div & (sh.div - 1)) == 0 ? __builtin_ctzll((unsigned long long)sh.div) : -1);
  *shape = sh;
  return true;
}

bool fl_grid_program_is_constant(const fl_grid_program *program) { return program && program->nvars == 0; }
size_t fl_grid_program_nvars(const fl_grid_program *program) { return program ? program->nvars : 0; }
void fl_grid_program_free(fl_grid_program *program) { fl__free(program); }

/* Names the first variable the program reads that the caller did not supply. */
static FL__NOINLINE fl_status var_missing(const fl_grid_program *program, size_t nvars, fl_error *err) {
  size_t missing = program->nvars - 1;
  for (size_t i = 0; i < program->ncode; i++) {
    const ins *in = &program->code[i];
    if (in->op == OP_VAR && (size_t)in->arg >= nvars && (size_t)in->arg < missing) missing = (size_t)in->arg;
  }
  return fl__fail(err, FL_GRID_EVAL, false, "grid_var_missing:%zu", missing);
}

/* Out of line, so that the evaluator's hot loop carries nothing for the call that formats a reason. */
static FL__NOINLINE fl_status eval_fail(int e, fl_error *err) {
  return fl__fail(err, FL_GRID_EVAL, false, "grid_%s", e_names[e]);
}

fl_status fl_grid_program_eval(const fl_grid_program *program, const int64_t *vars, size_t nvars,
                               int64_t *out, fl_error *err) {
  if (FL__UNLIKELY(!program || !out)) return fl__fail(err, FL_BAD_GRID_PROGRAM, true, "grid_program_null");
  if (!vars) nvars = 0;
  if (FL__UNLIKELY(nvars < program->nvars)) return var_missing(program, nvars, err);
  /* A constant dimension (Inductor's "1" for y and z) is one CONST: read it without the loop. */
  if (program->ncode == 1 && program->code[0].op == OP_CONST) {
    *out = program->code[0].arg;
    return FL_OK;
  }
  /* A recognised shape within its range: the one formula, no interpreter. */
  if (program->shaped && vars[program->shape.var] <= program->shape.hi) {
    *out = fl__grid_shape_apply(&program->shape, vars[program->shape.var]);
    return FL_OK;
  }
  int e = run(program->code, program->ncode, vars, out);
  return FL__UNLIKELY(e != E_NONE) ? eval_fail(e, err) : FL_OK;
}
