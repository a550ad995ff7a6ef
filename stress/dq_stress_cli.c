/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: the configuration, the command line (stress/README.md has
 * it, a contract: tools/soak relies on it) and main, which runs the
 * epochs until the duration is up or a violation stops the run.
 */
#include "stress/dq_stress.h"

/* ---- configuration ------------------------------------------------------ */

/* How long a deliverable message may wait for a consumer asleep in one
   call: a wake-up is a scheduling latency, far below this natively; under
   sanitizers and QEMU every step is 10-50 times slower. */
#if defined(DQ_STRESS_SANITIZED) || defined(__aarch64__)
#define LIVENESS_BOUND_MS_DEFAULT 1000
#else
#define LIVENESS_BOUND_MS_DEFAULT 100
#endif

config cfg = {
    .duration = 10,
    .seed = 1,
    .producers = 2,
    .removers = 1,
    .cancellers = 1,
    .barriers = 1,
    .progress_interval = 2,
    .scenario = "mixed",
    .liveness_bound_ms = LIVENESS_BOUND_MS_DEFAULT,
    .max_thread_starts = UINT64_MAX, /* resolved in parse_args */
};

enum scenario scenario;
static const char *const scenario_names[] = { "mixed",   "churn",    "order",
                                              "barrier", "liveness", "looper" };
#define N_SCENARIOS 6

char repro[1024];
static const char *argv0 = "dq_stress";

/* Whether this arm64 binary runs under a user-mode emulator (QEMU keeps
   the host's /proc/cpuinfo, which names an x86 vendor).  Then resident
   memory is the emulator's, not ours. */
static bool running_emulated(void)
{
#if defined(__aarch64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return false;
    char line[256];
    bool x86 = false;
    while (!x86 && fgets(line, sizeof line, f) != NULL)
        x86 = strncmp(line, "vendor_id", 9) == 0;
    fclose(f);
    return x86;
#else
    return false;
#endif
}

/* running_emulated(), read once by main before any other thread starts */
bool emulated;

/* resident memory after the warm-up epochs (main) */
static long rss_base;

/* ---- command line ----------------------------------------------------------- */

#define STR_(x) #x
#define STR(x)  STR_(x)

/* Every flag dq_stress takes (--NAME=VALUE), in the order usage() prints
   them.  parse_args refuses any other name, so --help lists exactly what
   the parser accepts; stress/README.md lists them too (a contract:
   tools/soak relies on it), and //stress:cli_doc_test checks that the two
   lists name the same flags. */
static const struct flag {
    const char *name;
    const char *value;
    const char *what;
} flags[] = {
    { "duration", "SECONDS", "how long the run lasts (default 10)" },
    { "seed", "N", "the seed of every random choice (default 1)" },
    { "producers", "N", "producer threads, 1 to 128 (default 2)" },
    { "removers", "N", "dq_remove/dq_has threads, 0 to 64 (default 1)" },
    { "cancellers", "N", "dq_cancel threads, 0 to 64 (default 1)" },
    { "barriers", "N",
      "barrier threads, 0 to 64 (default 1; at least 2\n"
      "in the barrier and liveness scenarios)" },
    { "json", "PATH", "also write the JSON summary to PATH" },
    { "progress-interval", "SECONDS", "a progress line every SECONDS (default 2)" },
    { "scenario", "NAME",
      "mixed (default), churn, order, barrier,\nliveness or looper" },
    { "liveness-bound-ms", "N",
      "scenario liveness: how long a deliverable\n"
      "message may wait while the consumer sleeps\n"
      "(default " STR(LIVENESS_BOUND_MS_DEFAULT) ")" },
    { "thread-churn", "0|1",
      "1: start and join the worker threads every\n"
      "epoch (default 0: they live for the run)" },
    { "max-thread-starts", "N",
      "with thread churn, start at most N threads\n"
      "(0: no bound; default 2000 under an emulator,\n"
      "else 0)" },
    { "rss-bound-after", "SECONDS",
      "resident memory at SECONDS is a base, and more\n"
      "than twice it afterwards a violation (default\n"
      "0: off)" },
};
#define N_FLAGS (sizeof flags / sizeof flags[0])

static const struct flag *flag_named(const char *name, size_t len)
{
    for (size_t i = 0; i < N_FLAGS; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

static void print_usage(FILE *f)
{
    fprintf(f, "usage: dq_stress [--NAME=VALUE]...\n");
    for (size_t i = 0; i < N_FLAGS; i++) {
        char both[64];
        snprintf(both, sizeof both, "--%s=%s", flags[i].name, flags[i].value);
        fprintf(f, "  %-27s ", both);
        const char *w = flags[i].what;
        for (const char *nl; (nl = strchr(w, '\n')) != NULL; w = nl + 1)
            fprintf(f, "%.*s\n%30s", (int)(nl - w), w, "");
        fprintf(f, "%s\n", w);
    }
    fprintf(f, "  %-27s %s\n", "--help, -h", "this text, on stdout (exit 0)");
    fprintf(f, "exit status: 0 pass, 1 violation, 2 usage error\n");
}

static void usage(const char *why)
{
    fprintf(stderr, "dq_stress: %s\n", why);
    print_usage(stderr);
    exit(2);
}

static double parse_double(const char *name, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi)) {
        char why[256];
        snprintf(why, sizeof why, "bad value for --%s: '%s'", name, v);
        usage(why);
    }
    return d;
}

static uint64_t parse_u64(const char *name, const char *v, uint64_t hi)
{
    char *end;
    errno = 0;
    if (*v == '-' || *v == 0)
        goto bad;
    unsigned long long n = strtoull(v, &end, 0);
    if (errno || *end || n > hi)
        goto bad;
    return n;
bad:;
    char why[256];
    snprintf(why, sizeof why, "bad value for --%s: '%s'", name, v);
    usage(why);
    return 0;
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_usage(stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0 || strchr(a, '=') == NULL) {
            char why[256];
            snprintf(why, sizeof why, "unexpected argument '%s'", a);
            usage(why);
        }
        const char *eq = strchr(a, '=');
        size_t nl = (size_t)(eq - a - 2);
        const char *v = eq + 1;
        if (flag_named(a + 2, nl) == NULL) {
            char why[256];
            snprintf(why, sizeof why, "unknown option '%.*s'", (int)(nl + 2), a);
            usage(why);
        }
#define IS(n) (nl == strlen(n) && strncmp(a + 2, n, nl) == 0)
        if (IS("duration"))
            cfg.duration = parse_double("duration", v, 0, 1e7);
        else if (IS("seed"))
            cfg.seed = parse_u64("seed", v, UINT64_MAX);
        else if (IS("producers"))
            cfg.producers = (int)parse_u64("producers", v, 128);
        else if (IS("removers"))
            cfg.removers = (int)parse_u64("removers", v, 64);
        else if (IS("cancellers"))
            cfg.cancellers = (int)parse_u64("cancellers", v, 64);
        else if (IS("barriers"))
            cfg.barriers = (int)parse_u64("barriers", v, 64);
        else if (IS("json"))
            cfg.json_path = v;
        else if (IS("progress-interval"))
            cfg.progress_interval = parse_double("progress-interval", v, 0.01, 1e7);
        else if (IS("scenario"))
            cfg.scenario = v;
        else if (IS("thread-churn"))
            cfg.thread_churn = (int)parse_u64("thread-churn", v, 1);
        else if (IS("rss-bound-after"))
            cfg.rss_bound_after = parse_double("rss-bound-after", v, 0, 1e7);
        else if (IS("max-thread-starts"))
            cfg.max_thread_starts = parse_u64("max-thread-starts", v, UINT64_MAX - 1);
        else if (IS("liveness-bound-ms"))
            cfg.liveness_bound_ms = (int)parse_u64("liveness-bound-ms", v, 3600000);
        else {
            char why[256];
            snprintf(why, sizeof why, "'%.*s' is in flags[] but not parsed",
                     (int)(nl + 2), a);
            usage(why);
        }
#undef IS
    }
    bool found = false;
    for (int s = 0; s < N_SCENARIOS; s++)
        if (strcmp(cfg.scenario, scenario_names[s]) == 0) {
            scenario = (enum scenario)s;
            found = true;
        }
    if (!found)
        usage("unknown --scenario (mixed, churn, order, barrier, liveness, looper)");
    if (cfg.producers < 1)
        usage("--producers must be at least 1");
    if ((scenario == SC_BARRIER || scenario == SC_LIVENESS) && cfg.barriers < 2)
        cfg.barriers = 2; /* barriers racing each other */
    if (cfg.liveness_bound_ms < 1)
        usage("--liveness-bound-ms must be at least 1");
    if (cfg.max_thread_starts == UINT64_MAX)
        cfg.max_thread_starts = emulated ? 2000 : 0;
    snprintf(repro, sizeof repro,
             "%s --duration=%g --seed=%" PRIu64 " --producers=%d --removers=%d "
             "--cancellers=%d --barriers=%d --progress-interval=%g --scenario=%s "
             "--liveness-bound-ms=%d --thread-churn=%d --max-thread-starts=%" PRIu64
             " --rss-bound-after=%g",
             argv0, cfg.duration, cfg.seed, cfg.producers, cfg.removers, cfg.cancellers,
             cfg.barriers, cfg.progress_interval, cfg.scenario, cfg.liveness_bound_ms,
             cfg.thread_churn, cfg.max_thread_starts, cfg.rss_bound_after);
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0] != NULL)
        argv0 = argv[0];
    emulated = running_emulated();
    parse_args(argc, argv);
    n_slots = cfg.producers + cfg.barriers;
    n_workers = cfg.producers + cfg.barriers + cfg.removers + cfg.cancellers + 1;
    workers = calloc((size_t)n_workers, sizeof *workers);
    if (workers == NULL) {
        fprintf(stderr, "dq_stress: out of memory\n");
        return 2;
    }
    if (n_slots > MAX_SLOTS)
        usage("too many producers + barriers");
    for (int s = 0; s < n_slots; s++) {
        slots[s].recs = calloc(RECS_PER_SLOT, sizeof(rec));
        if (slots[s].recs == NULL) {
            fprintf(stderr, "dq_stress: out of memory\n");
            return 2;
        }
    }
    /* touch every record once so that RSS starts where it stays */
    for (int s = 0; s < n_slots; s++)
        memset(slots[s].recs, 0, RECS_PER_SLOT * sizeof(rec));
    rss_start = rss_kb();
    note_rss(rss_start);
    run_start = real_now();
    atomic_store(&last_epoch_end, run_start);
    {
        int64_t e = epoch_length_ns();
        hang_limit_ns = 40 * e > 15000000000 ? 40 * e : 15000000000;
    }
    pthread_t progress;
    pthread_create(&progress, NULL, progress_main, NULL);

    uint64_t rng = cfg.seed ^ UINT64_C(0x5DEECE66D);
    int64_t epoch_ns = epoch_length_ns();
    int64_t deadline = run_start + (int64_t)(cfg.duration * 1e9);
#ifdef DQ_STRESS_SANITIZED
    const long rss_slack_kb = 512 * 1024; /* sanitizer quarantine, shadow */
#else
    const long rss_slack_kb = 96 * 1024;
#endif
    uint64_t index = 0;
    bool rss_checked = !emulated;
    do {
        run_epoch(index, &rng, epoch_ns);
        pool_check_epoch_end(index);
        atomic_store(&last_epoch_end, real_now());
        atomic_fetch_add(&epochs_done, 1);
        long rss = rss_kb();
        note_rss(rss);
        /* memory: after two warm-up epochs, RSS must stay near its level */
        if (index == 1)
            rss_base = rss;
        else if (rss_checked && index > 1 && rss > rss_base * 2 + rss_slack_kb)
            violation("resident memory grew from %ld kB to %ld kB over %" PRIu64
                      " epochs",
                      rss_base, rss, index - 1);
        index++;
    } while (real_now() < deadline && !atomic_load(&run_stop));

    workers_stop();
    double duration = (double)(real_now() - run_start) / 1e9;
    atomic_store(&progress_done, true);
    pthread_join(progress, NULL);
    long rss_end = rss_kb();
    note_rss(rss_end);
    if (atomic_load(&n_violations) == 0 &&
        atomic_load(&n_accepted) !=
            atomic_load(&n_delivered) + atomic_load(&n_discarded))
        violation("accepted %" PRIu64 " != delivered %" PRIu64 " + discarded %" PRIu64,
                  atomic_load(&n_accepted), atomic_load(&n_delivered),
                  atomic_load(&n_discarded));
    if (scenario == SC_LOOPER)
        looper_report();
    bool pass = atomic_load(&n_violations) == 0;
    char *j = summary_json(duration, rss_end, pass);
    fprintf(stderr, "dq_stress: %" PRIu64 " epochs, %" PRIu64 " liveness probes, %s\n",
            index, atomic_load(&n_probes), pass ? "pass" : "FAIL");
    printf("%s\n", j);
    fflush(stdout);
    if (cfg.json_path != NULL) {
        FILE *f = fopen(cfg.json_path, "w");
        if (f == NULL || fprintf(f, "%s\n", j) < 0 || fclose(f) != 0)
            fprintf(stderr, "dq_stress: cannot write %s: %s\n", cfg.json_path,
                    strerror(errno));
    }
    free(j);
    for (int s = 0; s < n_slots; s++)
        free(slots[s].recs);
    return pass ? 0 : 1;
}
