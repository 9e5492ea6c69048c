/* test_grid_random.c: grid programs checked against an independent __int128 reference of Python
 * semantics on random expression trees, and what one evaluation costs. */
#include "fastlaunch.h"
#include "fl_internal.h"

#include <time.h>

#define FL_TESTS(X)                                                                                \
  X(random_against_reference)                                                                      \
  X(eval_timing)
#define FL_TEST_MAIN
#include "fl_test.h"

/* ---- the independent reference: expression trees evaluated with __int128 ---- */

typedef __int128 i128;

enum { R_OK, R_DIV0, R_OVF, R_SHIFT };
static const char *const eval_reasons[] = {"", "grid_div_by_zero", "grid_overflow", "grid_negative_shift"};
static const char *const const_reasons[] = {"", "grid_expr_const_div_by_zero", "grid_expr_const_overflow",
                                            "grid_expr_const_negative_shift"};

/* N_COND's kids are the condition, the value when true and the value when false. */
enum { N_LIT, N_VAR, N_NEG, N_POS, N_BIN, N_MIN, N_MAX, N_CDIV, N_COND };
enum { B_ADD, B_SUB, B_MUL, B_FLOORDIV, B_MOD, B_SHL, B_SHR, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_COUNT };
#define B_FIRST_CMP B_EQ
static const char *const bin_text[] = {"+", "-", "*", "//", "%", "<<", ">>", "==", "!=", "<", "<=", ">", ">="};
/* Python's binding strength: conditional 0, comparisons 1, shifts 2, + - 3, * // % 4, unary 5,
 * atoms 6. */
static const int bin_level[] = {3, 3, 4, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1};

#define MAX_NODES 6000
#define TEXT_MAX (MAX_NODES * 64)
#define MAX_KIDS 4
#define NVARS 6

typedef struct node {
  int kind, op, nkids, style;
  int64_t value;
  int kids[MAX_KIDS];
} node;

typedef struct tree {
  node n[MAX_NODES];
  int count;
} tree;

typedef struct res {
  int err;
  int64_t v;
} res;

static uint64_t rng_state;
static uint64_t rnd(void) {
  /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int rint_(int n) { return (int)(rnd() % (uint64_t)n); }

static res fit(i128 x) {
  res r = {R_OK, 0};
  if (x > INT64_MAX || x < INT64_MIN) r.err = R_OVF;
  else r.v = (int64_t)x;
  return r;
}

static i128 floordiv128(i128 a, i128 b) {
  i128 q = a / b, m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) q -= 1;
  return q;
}

static res ref_binary(int op, int64_t a, int64_t b) {
  res r = {R_OK, 0};
  switch (op) {
    case B_ADD: return fit((i128)a + b);
    case B_SUB: return fit((i128)a - b);
    case B_MUL: return fit((i128)a * b);
    case B_FLOORDIV:
      if (b == 0) return (res){R_DIV0, 0};
      return fit(floordiv128(a, b));
    case B_MOD:
      if (b == 0) return (res){R_DIV0, 0};
      return fit((i128)a - floordiv128(a, b) * b);
    case B_SHL:
      if (b < 0) return (res){R_SHIFT, 0};
      if (a == 0) return r;
      if (b >= 64) return (res){R_OVF, 0};
      return fit((i128)a * ((i128)1 << b));
    case B_SHR:
      if (b < 0) return (res){R_SHIFT, 0};
      if (b >= 64) return (res){R_OK, a < 0 ? -1 : 0};
      return fit(floordiv128(a, (i128)1 << b));
    case B_EQ: return (res){R_OK, a == b};
    case B_NE: return (res){R_OK, a != b};
    case B_LT: return (res){R_OK, a < b};
    case B_LE: return (res){R_OK, a <= b};
    case B_GT: return (res){R_OK, a > b};
    case B_GE: return (res){R_OK, a >= b};
  }
  return (res){-1, 0};
}

static res ref_eval(const tree *t, int i, const int64_t *vars) {
  const node *nd = &t->n[i];
  if (nd->kind == N_COND) {
    /* Python evaluates the condition, then only the branch it chooses. */
    res c = ref_eval(t, nd->kids[0], vars);
    if (c.err) return c;
    return ref_eval(t, nd->kids[c.v ? 1 : 2], vars);
  }
  res k[MAX_KIDS];
  for (int c = 0; c < nd->nkids; c++) {
    k[c] = ref_eval(t, nd->kids[c], vars);
    if (k[c].err) return k[c];
  }
  switch (nd->kind) {
    case N_LIT: return (res){R_OK, nd->value};
    case N_VAR: return (res){R_OK, vars[nd->value]};
    case N_NEG: return fit(-(i128)k[0].v);
    case N_POS: return k[0];
    case N_BIN: return ref_binary(nd->op, k[0].v, k[1].v);
    case N_MIN:
    case N_MAX: {
      int64_t v = k[0].v;
      for (int c = 1; c < nd->nkids; c++)
        if (nd->kind == N_MIN ? k[c].v < v : k[c].v > v) v = k[c].v;
      return (res){R_OK, v};
    }
    case N_CDIV:
      if (k[1].v == 0) return (res){R_DIV0, 0};
      return fit(-floordiv128(k[0].v, -(i128)k[1].v));
  }
  return (res){-1, 0};
}

/* The variables a compiled subtree reads (a bit each), written from Python's rules rather than
 * from the compiler's. A condition without variables that evaluates chooses its branch at compile
 * time and the other is dropped; any other condition keeps both, since an operation on constants
 * that fails is not folded but left to fail when it runs. */
static unsigned reads(const tree *t, int i) {
  const node *nd = &t->n[i];
  if (nd->kind == N_VAR) return 1u << nd->value;
  if (nd->kind == N_COND && !reads(t, nd->kids[0])) {
    res c = ref_eval(t, nd->kids[0], NULL);
    if (!c.err) return reads(t, nd->kids[c.v ? 1 : 2]);
  }
  unsigned vars = 0;
  for (int c = 0; c < nd->nkids; c++) vars |= reads(t, nd->kids[c]);
  return vars;
}

/* What the compiler must make of a tree: `vars`, the variables the program reads, and `err`, the
 * compile error: a program that reads no variable is evaluated, and refused when that fails. */
typedef struct stat {
  unsigned vars;
  int err;
} stat;

static stat analyze(const tree *t, int i) {
  unsigned vars = reads(t, i);
  return (stat){vars, vars ? R_OK : ref_eval(t, i, NULL).err};
}

static bool has_var(const tree *t, int i) {
  if (t->n[i].kind == N_VAR) return true;
  for (int c = 0; c < t->n[i].nkids; c++)
    if (has_var(t, t->n[i].kids[c])) return true;
  return false;
}

/* A constant subtree that always fails, anywhere: compiled programs that hold one show that the
 * compiler refuses only programs without variables. */
static bool has_failing_constant(const tree *t) {
  for (int i = 0; i < t->count; i++)
    if (!has_var(t, i) && ref_eval(t, i, NULL).err) return true;
  return false;
}

static int max_var(unsigned vars) {
  int m = -1;
  for (int v = 0; v < 32; v++)
    if (vars & (1u << v)) m = v;
  return m;
}

static int64_t random_value(void) {
  switch (rint_(10)) {
    case 0: return (int64_t)rnd();
    case 1: return INT64_MAX - rint_(3);
    case 2: return INT64_MIN + rint_(3);
    /* One draw per statement, so that a seed gives the same values with any compiler. */
    case 3: {
      int64_t p = (int64_t)1 << rint_(63);
      return p - 1 + rint_(3);
    }
    case 4: {
      int64_t p = (int64_t)1 << rint_(63);
      return -p + rint_(3);
    }
    case 5: return rint_(130) - 65;
    case 6: return rint_(2000000) - 1000000;
    default: return rint_(21) - 10;
  }
}

/* Literal values: never INT64_MIN, which has no literal spelling. */
static int64_t random_literal(void) {
  int64_t v = random_value();
  return v == INT64_MIN ? INT64_MIN + 1 : v;
}

static int gen(tree *t, int depth, bool vars) {
  int i = t->count++;
  node *nd = &t->n[i];
  memset(nd, 0, sizeof *nd);
  if (depth == 0 || rint_(10) < 3) {
    if (vars && rint_(2)) {
      nd->kind = N_VAR;
      nd->value = rint_(NVARS);
      nd->style = rint_(2);
    } else {
      nd->kind = N_LIT;
      nd->value = random_literal();
    }
    return i;
  }
  int r = rint_(100);
  int kids;
  if (r < 8) nd->kind = N_NEG, kids = 1;
  else if (r < 12) nd->kind = N_POS, kids = 1;
  else if (r < 62) nd->kind = N_BIN, nd->op = rint_(B_FIRST_CMP), kids = 2;
  else if (r < 70) nd->kind = N_BIN, nd->op = B_FIRST_CMP + rint_(B_COUNT - B_FIRST_CMP), kids = 2;
  else if (r < 80) nd->kind = N_COND, kids = 3;
  else if (r < 90) nd->kind = rint_(2) ? N_MIN : N_MAX, kids = 1 + rint_(MAX_KIDS);
  else nd->kind = N_CDIV, nd->style = rint_(2), kids = 2;
  for (int c = 0; c < kids; c++) {
    int k = gen(t, depth - 1, vars);
    t->n[i].kids[c] = k;
  }
  t->n[i].nkids = kids;
  return i;
}

static const char *const var_names[] = {"xnumel", "ynumel", "XBLOCK", "r0_numel"};

typedef struct text {
  char s[TEXT_MAX];
  size_t n;
} text;

static void put(text *x, const char *s) {
  size_t k = strlen(s);
  memcpy(x->s + x->n, s, k);
  x->n += k;
  x->s[x->n] = '\0';
}
static void space(text *x) {
  if (rint_(4) == 0) put(x, rint_(4) ? " " : "  ");
}

/* Python's binding strength of a node as written (see bin_level). */
static int level(const tree *t, int i) {
  const node *nd = &t->n[i];
  switch (nd->kind) {
    case N_LIT: return nd->value < 0 ? 5 : 6;
    case N_NEG:
    case N_POS: return 5;
    case N_BIN: return bin_level[nd->op];
    case N_COND: return 0;
    default: return 6;
  }
}

static void render(const tree *t, int i, text *x);

static void render_child(const tree *t, int i, text *x, bool parens) {
  parens = parens || rint_(8) == 0;
  if (parens) put(x, "("), space(x);
  render(t, i, x);
  if (parens) space(x), put(x, ")");
}

/* Writes the tree with the fewest parentheses Python needs, plus random extra ones and spaces, so
 * that precedence and associativity are exercised. */
static void render(const tree *t, int i, text *x) {
  const node *nd = &t->n[i];
  char buf[32];
  switch (nd->kind) {
    case N_LIT:
      snprintf(buf, sizeof buf, "%" PRId64, nd->value);
      put(x, buf);
      break;
    case N_VAR:
      if (nd->style && nd->value < 4) put(x, var_names[nd->value]);
      else snprintf(buf, sizeof buf, "$%d", (int)nd->value), put(x, buf);
      break;
    case N_NEG:
    case N_POS:
      put(x, nd->kind == N_NEG ? "-" : "+");
      space(x);
      render_child(t, nd->kids[0], x, level(t, nd->kids[0]) < 5);
      break;
    case N_BIN: {
      /* Comparisons do not chain (a < b < c is refused), so each side of one binds tighter. */
      int lv = bin_level[nd->op];
      render_child(t, nd->kids[0], x, level(t, nd->kids[0]) < lv + (lv == 1));
      space(x);
      put(x, bin_text[nd->op]);
      space(x);
      render_child(t, nd->kids[1], x, level(t, nd->kids[1]) <= lv);
      break;
    }
    case N_COND:
      /* `A if C else B`: A and C are comparisons at most, B may be another conditional. The
       * keywords always get spaces, so that a name never runs into them. */
      render_child(t, nd->kids[1], x, level(t, nd->kids[1]) < 1);
      put(x, " if "), space(x);
      render_child(t, nd->kids[0], x, level(t, nd->kids[0]) < 1);
      put(x, " else "), space(x);
      render_child(t, nd->kids[2], x, false);
      break;
    default:
      put(x, nd->kind == N_MIN ? "min(" : nd->kind == N_MAX ? "max(" : nd->style ? "ceildiv(" : "cdiv(");
      for (int c = 0; c < nd->nkids; c++) {
        if (c) put(x, ","), space(x);
        render_child(t, nd->kids[c], x, false);
      }
      put(x, ")");
      break;
  }
}

/* Checks a compiled program against the reference on several inputs; prints the first mismatch. */
static bool check_evals(const tree *t, const fl_grid_program *p, const char *what, int64_t inputs[][NVARS],
                        int ninputs) {
  for (int k = 0; k < ninputs; k++) {
    res want = ref_eval(t, 0, inputs[k]);
    fl_error err;
    int64_t out = 0;
    int st = fl_grid_program_eval(p, inputs[k], NVARS, &out, &err);
    bool ok = want.err ? (st == FL_GRID_EVAL && strcmp(err.reason, eval_reasons[want.err]) == 0 && !err.stable)
                       : (st == FL_OK && out == want.v);
    if (!ok) {
      fprintf(stderr, "mismatch: %s\n  vars:", what);
      for (int v = 0; v < NVARS; v++) fprintf(stderr, " %" PRId64, inputs[k][v]);
      fprintf(stderr, "\n  want %s %" PRId64 ", got %s %s %" PRId64 "\n", eval_reasons[want.err], want.v,
              fl_status_name(st), st ? err.reason : "", out);
      return false;
    }
  }
  return true;
}

static bool check_compile(int want, int st, const fl_error *err, const char *what) {
  bool ok = want ? (st == FL_BAD_GRID_PROGRAM && strcmp(err->reason, const_reasons[want]) == 0 && err->stable)
                 : st == FL_OK;
  if (!ok)
    fprintf(stderr, "compile mismatch: %s\n  want %s, got %s %s\n", what, want ? const_reasons[want] : "ok",
            fl_status_name(st), st ? err->reason : "");
  return ok;
}

static void random_against_reference(void) {
  const char *seed_env = getenv("FL_GRID_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240611;
  rng_state = seed;
  int nexpr = 100000, ninputs = 8;
  long counts[4] = {0}, evals_ok = 0, evals_err = 0, const_errs = 0, substitutions = 0, conditionals = 0,
       kept_failing = 0;
  static tree t, t2;
  for (int e = 0; e < nexpr; e++) {
    t.count = 0;
    gen(&t, 1 + rint_(6), rint_(5) != 0);
    static text x;
    x.n = 0;
    x.s[0] = '\0';
    space(&x);
    render(&t, 0, &x);
    space(&x);
    /* Rare wide trees render past the length limit, which is tested on its own. */
    if (x.n > 4096) {
      e--;
      continue;
    }

    fl_error err;
    fl_grid_program *p = NULL;
    int st = fl_grid_program_compile(x.s, var_names, 4, &p, &err);
    stat an = analyze(&t, 0);
    int want = an.err;
    if (!check_compile(want, st, &err, x.s)) {
      fl_grid_program_free(p);
      FL_FAIL_AT("seed %" PRIu64 ", expression %d", seed, e);
    }
    if (want) {
      const_errs++;
      continue;
    }
    int64_t inputs[8][NVARS];
    for (int k = 0; k < ninputs; k++)
      for (int v = 0; v < NVARS; v++) inputs[k][v] = random_value();
    bool ok = check_evals(&t, p, x.s, inputs, ninputs);
    ok = ok && fl_grid_program_is_constant(p) == !an.vars;
    ok = ok && fl_grid_program_nvars(p) == (size_t)(max_var(an.vars) + 1);
    for (int v = 0; ok && v < NVARS; v++) ok = fl__grid_program_uses_var(p, (size_t)v) == !!(an.vars & (1u << v));
    if (!ok) {
      fl_grid_program_free(p);
      FL_FAIL_AT("seed %" PRIu64 ", expression %d: %s", seed, e, x.s);
    }
    for (int i = 0; i < t.count; i++) conditionals += t.n[i].kind == N_COND;
    kept_failing += has_failing_constant(&t);
    for (int k = 0; k < ninputs; k++) {
      res r = ref_eval(&t, 0, inputs[k]);
      counts[r.err]++;
      if (r.err) evals_err++;
      else evals_ok++;
    }

    /* Substitution: the same tree with one variable turned into a literal is the reference. */
    if (an.vars && rint_(2)) {
      int var = 0;
      for (int tries = 0; tries < 8; tries++) {
        var = rint_(NVARS);
        if (fl__grid_program_uses_var(p, (size_t)var)) break;
      }
      int64_t value = random_value();
      t2.count = t.count;
      memcpy(t2.n, t.n, (size_t)t.count * sizeof(node));
      for (int i = 0; i < t2.count; i++)
        if (t2.n[i].kind == N_VAR && t2.n[i].value == var) t2.n[i].kind = N_LIT, t2.n[i].value = value;
      substitutions++;
      st = fl__grid_program_substitute(p, (size_t)var, value, &err);
      static char what[4200];
      snprintf(what, sizeof what, "%.4100s with $%d = %" PRId64, x.s, var, value);
      stat an2 = analyze(&t2, 0);
      int want2 = an2.err;
      if (!check_compile(want2, st, &err, what)) {
        fl_grid_program_free(p);
        FL_FAIL_AT("seed %" PRIu64 ", expression %d (substitute)", seed, e);
      }
      /* A refused substitution leaves the program as it was. */
      const tree *ref = want2 ? &t : &t2;
      unsigned ref_vars = want2 ? an.vars : an2.vars;
      ok = check_evals(ref, p, what, inputs, ninputs) && fl_grid_program_is_constant(p) == !ref_vars &&
           fl_grid_program_nvars(p) == (size_t)(max_var(ref_vars) + 1);
      if (!ok) {
        fl_grid_program_free(p);
        FL_FAIL_AT("seed %" PRIu64 ", expression %d (substitute)", seed, e);
      }
    }
    fl_grid_program_free(p);
  }
  printf("     %d expressions (seed %" PRIu64 "): %ld const errors at compile, %ld evals ok, %ld eval errors "
         "(div0 %ld, overflow %ld, shift %ld), %ld substitutions; %ld conditionals, %ld compiled with a failing "
         "constant part\n",
         nexpr, seed, const_errs, evals_ok, evals_err, counts[R_DIV0], counts[R_OVF], counts[R_SHIFT],
         substitutions, conditionals, kept_failing);
  /* The generator must reach every outcome, or the comparison proves little. */
  ASSERT_TRUE(const_errs > 1000);
  ASSERT_TRUE(evals_ok > 50000);
  ASSERT_TRUE(counts[R_DIV0] > 100 && counts[R_OVF] > 100 && counts[R_SHIFT] > 100);
  ASSERT_TRUE(conditionals > 10000 && kept_failing > 1000);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Not an assertion: prints what one ceil-div costs, so that a slow interpreter is noticed. */
static void eval_timing(void) {
  const char *names[] = {"xnumel", "XBLOCK"};
  fl_error err;
  fl_grid_program *p = NULL;
  for (int form = 0; form < 2; form++) {
    ASSERT_OK(fl_grid_program_compile("-((xnumel) // -(XBLOCK))", names, 2, &p, &err), &err);
    if (form) ASSERT_OK(fl__grid_program_substitute(p, 1, 128, &err), &err);
    int64_t vars[2] = {0, 128}, sum = 0, out = 0;
    const int n = 2000000;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      double t0 = now_ns();
      for (int i = 0; i < n; i++) {
        vars[0] = i;
        if (fl_grid_program_eval(p, vars, 2, &out, &err) != FL_OK) break;
        sum += out;
      }
      double dt = (now_ns() - t0) / n;
      if (dt < best) best = dt;
    }
    int64_t expect = 0;
    for (int64_t i = 0; i < n; i++) expect += (i + 127) / 128;
    fl_grid_program_free(p);
    ASSERT_EQ(sum, expect * 5);
    printf("     ceil-div eval (%s): %.1f ns\n", form ? "XBLOCK folded" : "two variables", best);
  }
  /* Inductor's y split for grids past 65535 in y: a comparison, a conditional and six divisions. */
  const char *ysplit = "(0 if (-((-((ynumel) // -(32))) // -(65535))) == 0 else -(((-((ynumel) // -(32)))) // "
                       "-((-((-((ynumel) // -(32))) // -(65535))))))";
  ASSERT_OK(fl_grid_program_compile(ysplit, (const char *const[]){"ynumel"}, 1, &p, &err), &err);
  int64_t var = 0, sum = 0, out = 0, expect = 0;
  const int n = 1000000;
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now_ns();
    for (int i = 0; i < n; i++) {
      var = (int64_t)i * 4099;
      if (fl_grid_program_eval(p, &var, 1, &out, &err) != FL_OK) break;
      sum += out;
    }
    double dt = (now_ns() - t0) / n;
    if (dt < best) best = dt;
  }
  fl_grid_program_free(p);
  for (int64_t i = 0; i < n; i++) {
    int64_t y = (i * 4099 + 31) / 32, z = (y + 65534) / 65535;
    expect += z ? (y + z - 1) / z : 0;
  }
  ASSERT_EQ(sum, expect * 5);
  printf("     y-split eval: %.1f ns\n", best);
}
