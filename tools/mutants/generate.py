"""Generated mutants of the library's sources.

Scanned: every C source and header of the library under deliqueue/ and
arch/ (not tests, not the legacy model, not probes).  Generated:

  memory orders  every memory_order_* argument weakened one step as its
                 operation allows: a load seq_cst -> acquire -> relaxed; a
                 store seq_cst -> release -> relaxed; a read-modify-write or
                 a CAS's success order seq_cst -> acq_rel -> acquire and
                 release -> relaxed (a CAS's failure order follows it down
                 when it would be stronger); a CAS's failure order as a load;
                 an order passed to the library's own function or defined
                 as a macro, seq_cst -> acquire -> relaxed, release ->
                 relaxed
  fences         every atomic_thread_fence / atomic_signal_fence removed
  atomicity      every CAS made a plain load, compare and store, every
                 exchange and fetch_op a load and a store (the orders split:
                 acquire on the load, release on the store), a CAS or
                 fetch_op yielding the CPU between them (SPLIT_WINDOW)
  operators      in the heap (heap.h), the sweep (functions of looper*.c
                 whose name holds "sweep") and the pool (pool.c, pool.h):
                 each < <= > >= moved across its boundary, each logical !
                 dropped, each "+ 1" and "- 1" dropped (off by one)

A mutant's name is "<function>: <rewrite> (<operation> <object>)", with
" #k" for the k-th of the same name: it does not change when code moves
between files or lines, so hand-written reasons stay attached to it.
"""

import os
import re

import mutlib

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<num>\.?\d(?:[\w.]|[eEpP][+-])*)
  | (?P<op><<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\#\#|[-+*/%&|^~!<>=?:;,.(){}\[\]\#\\])
""", re.S | re.X)

ORDERS = ["relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst"]
LOAD = {"seq_cst": ["acquire"], "acquire": ["relaxed"], "consume": ["relaxed"]}
STORE = {"seq_cst": ["release"], "release": ["relaxed"]}
RMW = {"seq_cst": ["acq_rel"], "acq_rel": ["acquire", "release"],
       "acquire": ["relaxed"], "release": ["relaxed"], "consume": ["relaxed"]}
OTHER = {"seq_cst": ["acquire"], "acq_rel": ["acquire"], "acquire": ["relaxed"],
         "release": ["relaxed"], "consume": ["relaxed"]}
STRENGTH = {"relaxed": 0, "consume": 1, "acquire": 1, "release": 1, "acq_rel": 2, "seq_cst": 3}
# the strongest failure order a success order allows
FAIL_CAP = {"relaxed": "relaxed", "consume": "consume", "acquire": "acquire",
            "release": "relaxed", "acq_rel": "acquire", "seq_cst": "seq_cst"}
# A split read-modify-write gives the CPU away between its load and its
# store: a schedule the split allows anyway (a thread can be preempted at
# any instruction), made likely, so that a racing thread's write lands in
# the window and is lost, as it would be on a loaded machine.  Declared at
# block scope so that the rewrite needs no include.  Not in an exchange's
# split: its store does not depend on its load, and a yield there lets a
# racing thread finish before the store, which hides the store-then-load
# reordering a Dekker pair's exchange guards against (looper_publish_sleep).
# (parenthesised: the model build defines sched_yield() as a macro)
SPLIT_WINDOW = "{ extern int (sched_yield)(void); (sched_yield)(); }"
# a read-modify-write's order split into its load's and its store's
SPLIT = {"seq_cst": ("seq_cst", "seq_cst"), "acq_rel": ("acquire", "release"),
         "acquire": ("acquire", "relaxed"), "consume": ("acquire", "relaxed"),
         "release": ("relaxed", "release"), "relaxed": ("relaxed", "relaxed")}
FETCH_OPS = {"add": "+", "sub": "-", "or": "|", "and": "&", "xor": "^"}
RMW_FUNCS = {"atomic_exchange_explicit"} | {"atomic_fetch_%s_explicit" % o for o in FETCH_OPS}
CAS_FUNCS = {"atomic_compare_exchange_weak_explicit", "atomic_compare_exchange_strong_explicit"}
FENCES = {"atomic_thread_fence", "atomic_signal_fence"}
# words after which "- 1" is a negative number, not a subtraction
C_WORDS = {"return", "case", "sizeof", "else", "do", "goto"}


def library_file(path):
    parts = path.split("/")
    base = parts[-1]
    return not ("test" in parts or "legacy" in parts or "dispatch" in parts
                or base.endswith("_test.c") or "probe" in base or base == "testing.h")


def operator_scope(path):
    base = os.path.basename(path)
    if base in ("heap.h", "pool.c", "pool.h"):
        return "all"
    if re.match(r"looper.*\.c$", base):
        return "sweep"
    return None


def tokenize(text):
    """C tokens (kind, text, start, end), comments and whitespace dropped.
    Preprocessor lines other than #define bodies are skipped."""
    toks, pos, line_start = [], 0, True
    n = len(text)
    while pos < n:
        if line_start:
            m = re.compile(r"[ \t]*#[ \t]*(\w*)").match(text, pos)
            if m and m.group(1) != "define":
                # skip the directive with its continuations
                end = pos
                while True:
                    nl = text.find("\n", end)
                    if nl < 0:
                        end = n
                        break
                    if text[nl - 1] == "\\":
                        end = nl + 1
                        continue
                    end = nl
                    break
                pos = end
                continue
        m = TOKEN.match(text, pos)
        if not m:
            pos += 1
            line_start = False
            continue
        kind = m.lastgroup
        if kind == "ws":
            line_start = line_start or "\n" in m.group()
        elif kind != "comment":
            toks.append((kind, m.group(), m.start(), m.end()))
            line_start = False
        pos = m.end()
    return toks


def function_at(text, offset):
    """The function (or macro) whose body holds offset: inside a multi-line
    #define, the last "name(...) {" of the macro before offset, else the
    macro's name; elsewhere the last definition at column 0."""
    line = text.rfind("\n", 0, offset) + 1
    first = line
    while first > 0 and text[first - 2:first] == "\\\n":
        first = text.rfind("\n", 0, first - 2) + 1
    dm = re.match(r"[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", text[first:])
    if dm:
        inner = re.findall(r"static[^;{}()]*?\b([A-Za-z_][\w#]*)\s*\(", text[first:offset])
        return inner[-1] if inner else dm.group(1)
    head = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", "", text[:offset])
    # a return type spelled _Atomic(T) is a type, not the function
    head = re.sub(r"\b_Atomic\s*\(([^()]*)\)", r"_Atomic \1", head)
    defs = re.findall(r"(?m)^(?![#\s])(?:[A-Za-z_][\w \t\*]*?[\s\*])?([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{",
                      head)
    return defs[-1] if defs else "file scope"


def parens(toks):
    """For each token index, the index of the innermost '(' holding it."""
    stack, owner, match = [], [], {}
    for i, t in enumerate(toks):
        owner.append(stack[-1] if stack else None)
        if t[1] == "(":
            stack.append(i)
        elif t[1] == ")" and stack:
            match[stack.pop()] = i
    return owner, match


def call_args(toks, open_i, close_i):
    """[(first token index, last token index)] of the call's arguments."""
    args, depth, start = [], 0, open_i + 1
    for i in range(open_i + 1, close_i):
        t = toks[i][1]
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif t == "," and depth == 0:
            args.append((start, i - 1))
            start = i + 1
    args.append((start, close_i - 1))
    return args


def span(text, toks, a):
    return text[toks[a[0]][2]:toks[a[1]][3]]


def order_macros(toks):
    """Object-like macros defined as one memory order: name -> order."""
    out = {}
    for i in range(len(toks) - 2):
        if toks[i][1] == "define" and toks[i + 2][1].startswith("memory_order_"):
            out[toks[i + 1][1]] = toks[i + 2][1][len("memory_order_"):]
    return out


def order_of(text, toks, a, macros):
    s = span(text, toks, a)
    if s.startswith("memory_order_") and s[len("memory_order_"):] in ORDERS:
        return s[len("memory_order_"):]
    return macros.get(s)


class Gen:
    def __init__(self):
        self.out = []
        self.seen = {}

    def add(self, path, text, func, rewrite, what, start, end, repl, token):
        name = "%s: %s (%s)" % (func, rewrite, " ".join(what.split()))
        k = self.seen.get(name, 0) + 1
        self.seen[name] = k
        if k > 1:
            name += " #%d" % k
        site = "%s:%d %s" % (path, mutlib.line_of(text, start), token)
        self.out.append(mutlib.Mutant(name, site, rewrite,
                                      [mutlib.Change(path, start, end, repl)]))


def gen_file(g, path, text):
    toks = tokenize(text)
    owner, match = parens(toks)
    macros = order_macros(toks)
    scope = operator_scope(path)
    for i, (kind, tok, s, e) in enumerate(toks):
        # -- memory orders --------------------------------------------------
        if kind == "ident" and tok.startswith("memory_order_") and tok[13:] in ORDERS:
            order = tok[13:]
            p = owner[i]
            callee = toks[p - 1][1] if p is not None and p > 0 else None
            func = function_at(text, s)
            args = call_args(toks, p, match[p]) if p is not None and p in match else []
            idx = next((k for k, a in enumerate(args) if a[0] <= i <= a[1]), None)
            obj = span(text, toks, args[0]) if args else ""
            alone = idx is not None and args[idx][0] == args[idx][1]
            if callee in FENCES:
                continue  # removed below
            if callee == "atomic_load_explicit" and alone:
                ladder, what = LOAD, "load " + obj
            elif callee == "atomic_store_explicit" and alone:
                ladder, what = STORE, "store " + obj
            elif callee in RMW_FUNCS and alone:
                ladder, what = RMW, callee[7:-9] + " " + obj
            elif callee in CAS_FUNCS and alone and idx == 3:
                ladder, what = RMW, "CAS success " + obj
                fail = args[4] if len(args) > 4 else None
                fo = order_of(text, toks, fail, macros) if fail else None
                for new in ladder.get(order, []):
                    cap = FAIL_CAP[new]
                    if fo is not None and STRENGTH[fo] > STRENGTH[cap]:
                        fs, fe = toks[fail[0]][2], toks[fail[1]][3]
                        repl = "memory_order_%s, memory_order_%s" % (new, cap)
                        g.add(path, text, func, "memory_order_%s -> memory_order_%s" % (order, new),
                              what + ", failure " + cap, s, fe, repl, tok)
                    else:
                        g.add(path, text, func, "memory_order_%s -> memory_order_%s" % (order, new),
                              what, s, e, "memory_order_" + new, tok)
                continue
            elif callee in CAS_FUNCS and alone and idx == 4:
                ladder, what = LOAD, "CAS failure " + obj
            elif i >= 2 and toks[i - 2][1] == "define":
                ladder, what = OTHER, "#define " + toks[i - 1][1]
            elif callee is not None:
                ladder, what = OTHER, "argument of " + callee
            else:
                ladder, what = OTHER, "expression"
            for new in ladder.get(order, []):
                g.add(path, text, func, "memory_order_%s -> memory_order_%s" % (order, new),
                      what, s, e, "memory_order_" + new, tok)
            continue
        # -- fences, CAS and RMW atomicity ---------------------------------
        if kind == "ident" and i + 1 < len(toks) and toks[i + 1][1] == "(" and \
                (tok in FENCES or tok in CAS_FUNCS or tok in RMW_FUNCS):
            op = i + 1
            if op not in match:
                continue
            args = call_args(toks, op, match[op])
            end = toks[match[op]][3]
            func = function_at(text, s)
            a = [span(text, toks, x) for x in args]
            if tok in FENCES:
                g.add(path, text, func, "fence %s removed" % a[0], tok, s, end, "((void)0)", tok)
            elif tok in CAS_FUNCS and len(a) == 5:
                so = order_of(text, toks, args[3], macros) or "seq_cst"
                lo, sto = SPLIT[so]
                repl = ("({ __auto_type dq_mut_p = (%s); __auto_type dq_mut_e = (%s);"
                        " __auto_type dq_mut_v = atomic_load_explicit(dq_mut_p, memory_order_%s);"
                        " _Bool dq_mut_ok = dq_mut_v == *dq_mut_e;"
                        " if (dq_mut_ok) { %s atomic_store_explicit(dq_mut_p, (%s), memory_order_%s); }"
                        " else *dq_mut_e = dq_mut_v; dq_mut_ok; })"
                        % (a[0], a[1], lo, SPLIT_WINDOW, a[2], sto))
                g.add(path, text, func, "CAS -> load+store", a[0], s, end, repl, tok)
            elif tok in RMW_FUNCS and len(a) == 3:
                so = order_of(text, toks, args[2], macros) or "seq_cst"
                lo, sto = SPLIT[so]
                verb = tok[7:-9]
                new = "(%s)" % a[1] if verb == "exchange" else \
                    "dq_mut_v %s (%s)" % (FETCH_OPS[verb[6:]], a[1])
                window = "" if verb == "exchange" else SPLIT_WINDOW
                repl = ("({ __auto_type dq_mut_p = (%s);"
                        " __auto_type dq_mut_v = atomic_load_explicit(dq_mut_p, memory_order_%s);"
                        " %s atomic_store_explicit(dq_mut_p, %s, memory_order_%s); dq_mut_v; })"
                        % (a[0], lo, window, new, sto))
                g.add(path, text, func, "%s -> load+store" % verb, a[0], s, end, repl, tok)
            continue
        # -- operators (heap, sweep, pool) ---------------------------------
        if scope is None or kind != "op":
            continue
        func = None
        if scope == "sweep":
            func = function_at(text, s)
            if "sweep" not in func:
                continue
        if tok in ("<", "<=", ">", ">="):
            new = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}[tok]
            ctx = context(text, toks, i)
            g.add(path, text, func or function_at(text, s), "%s -> %s" % (tok, new),
                  ctx, s, e, new, tok)
        elif tok == "!":
            ctx = context(text, toks, i)
            g.add(path, text, func or function_at(text, s), "! dropped", ctx, s, e, "", tok)
        elif tok in ("+", "-") and i + 1 < len(toks) and toks[i + 1][1] == "1" \
                and i > 0 and ((toks[i - 1][0] == "ident" and toks[i - 1][1] not in C_WORDS)
                               or toks[i - 1][0] == "num" or toks[i - 1][1] in (")", "]")):
            ctx = context(text, toks, i)
            g.add(path, text, func or function_at(text, s), "%s 1 dropped" % tok, ctx,
                  s, toks[i + 1][3], "", tok + " 1")


def context(text, toks, i):
    """A few tokens around token i, to tell sites of one function apart."""
    lo, hi = max(0, i - 3), min(len(toks) - 1, i + 3)
    return " ".join(text[toks[lo][2]:toks[hi][3]].replace("\\\n", " ").split())


def mutants(root, files, texts):
    g = Gen()
    for path in files:
        if library_file(path):
            gen_file(g, path, texts[path])
    return g.out
