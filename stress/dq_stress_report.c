/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: what a run reports.  The progress thread (a line every
 * --progress-interval seconds, the memory samples and their checks, the
 * watchdog that ends a hung run), the check at each epoch's end that its
 * nodes came back, and the JSON summary.
 */
#include "stress/dq_stress.h"

/* ---- progress, summary -------------------------------------------------------- */

#define MAX_SAMPLES 4096
static double sample_t[MAX_SAMPLES], sample_rate[MAX_SAMPLES];
static struct dq_pool_stats sample_pool[MAX_SAMPLES];

/* Resident memory in kB (0 when /proc cannot say). */
long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The library's memory.  Limbo may hold every node of an epoch at once (a
   quit_safely trim or a wide dq_remove retires thousands in one looper
   step, freed two grace periods later), never more: more means grace
   periods stopped ending and retired nodes pile up across epochs. */
static uint64_t limbo_bound(void)
{
    return (uint64_t)n_slots * RECS_PER_SLOT;
}
static uint64_t pool_peak_reserved, pool_peak_in_use, pool_peak_limbo;
static pthread_mutex_t pool_peak_lock = PTHREAD_MUTEX_INITIALIZER;

/* The most the workload can hold at once, in bytes of the pool: every
   record of an epoch posted (in use or retired), a barrier per barrier
   thread, every thread's cache (a magazine and a stash of whole words),
   and a slab of rounding. */
static uint64_t pool_reserved_bound(void)
{
    uint64_t nodes = (uint64_t)n_slots * RECS_PER_SLOT + (uint64_t)cfg.barriers +
                     (uint64_t)(n_workers + 2) * (64 + 32 * 64);
    return nodes * 128 + nodes * 128 / 64 + (UINT64_C(4) << 20);
}

/* Read the pool's counts, keep the peaks, and check what holds at every
   moment.  Any thread. */
static void pool_sample(struct dq_pool_stats *ps)
{
    if (dq_pool_stats(ps) != 0) {
        violation("dq_pool_stats failed");
        return;
    }
    pthread_mutex_lock(&pool_peak_lock);
    if (ps->reserved_bytes > pool_peak_reserved)
        pool_peak_reserved = ps->reserved_bytes;
    if (ps->nodes_in_use > pool_peak_in_use)
        pool_peak_in_use = ps->nodes_in_use;
    if (ps->nodes_limbo > pool_peak_limbo)
        pool_peak_limbo = ps->nodes_limbo;
    pthread_mutex_unlock(&pool_peak_lock);
    if (ps->nodes_limbo > limbo_bound())
        violation("memory: %" PRIu64 " retired nodes wait in limbo, more than an epoch "
                  "ever posts (%" PRIu64 "): grace periods are not ending",
                  ps->nodes_limbo, limbo_bound());
    if (ps->reserved_bytes > pool_reserved_bound())
        violation("memory: the pool reserved %" PRIu64
                  " KiB, more than the workload can "
                  "ever hold (%" PRIu64 " KiB): nodes are not coming back",
                  ps->reserved_bytes / 1024, pool_reserved_bound() / 1024);
}

/* At an epoch's end its queue is torn down and every worker idle: every
   node must be back in the pool or in a thread's cache. */
void pool_check_epoch_end(uint64_t index)
{
    struct dq_pool_stats ps;
    pool_sample(&ps);
    if (ps.queues != 0 || ps.nodes_in_use != 0 || ps.nodes_limbo != 0)
        violation(
            "memory: after epoch %" PRIu64 " (%s) tore its queue down, %" PRIu64
            " nodes are still in use and %" PRIu64 " in limbo (%" PRIu64 " queues "
            "live): nodes are leaking",
            index, end_names[ep.mode], ps.nodes_in_use, ps.nodes_limbo, ps.queues);
}
static int n_samples;
long rss_start;
static long rss_bound_base; /* --rss-bound-after's base (progress thread) */
static _Atomic long rss_peak;

void note_rss(long rss)
{
    long old = atomic_load(&rss_peak);
    while (rss > old && !atomic_compare_exchange_weak(&rss_peak, &old, rss))
        ;
}
_Atomic bool progress_done;
int64_t run_start;
_Atomic int64_t last_epoch_end; /* real_now() when an epoch last ended */
_Atomic uint64_t epochs_done;
int64_t hang_limit_ns;

/* An epoch that does not end is a hang (deadlock, lost wake-up, a walker
   looping in a cycle): report it as a violation and leave at once. */
static void watchdog_check(int64_t now)
{
    int64_t since = now - atomic_load(&last_epoch_end);
    if (since <= hang_limit_ns)
        return;
    violation("epoch %" PRIu64 " has not ended after %.1f s: hang (deadlock, lost "
              "wake-up or a cycle)",
              atomic_load(&epochs_done), (double)since / 1e9);
    char *j = summary_json((double)(now - run_start) / 1e9, rss_kb(), false);
    printf("%s\n", j);
    fflush(stdout);
    if (cfg.json_path != NULL) {
        FILE *f = fopen(cfg.json_path, "w");
        if (f != NULL) {
            fprintf(f, "%s\n", j);
            fclose(f);
        }
    }
    _exit(1);
}

void *progress_main(void *arg)
{
    (void)arg;
    int64_t interval = (int64_t)(cfg.progress_interval * 1e9);
    int64_t next = run_start + interval;
    uint64_t last_ops = 0;
    int64_t last_t = run_start;
    while (!atomic_load(&progress_done)) {
        int64_t now = real_now();
        watchdog_check(now);
        if (scenario == SC_LIVENESS)
            liveness_check(now);
        if (now < next) {
            int64_t nap = next - now;
            sleep_ns(nap < 50000000 ? nap : 50000000);
            continue;
        }
        next += interval;
        uint64_t ops = atomic_load(&n_ops);
        long rss = rss_kb();
        note_rss(rss);
        double at = (double)(now - run_start) / 1e9;
        if (cfg.rss_bound_after > 0 && at >= cfg.rss_bound_after) {
            if (rss_bound_base == 0)
                rss_bound_base = rss;
            else if (rss > 2 * rss_bound_base)
                violation(
                    "resident memory grew from %ld kB at %.0f s to %ld kB at %.0f s "
                    "(more than twice)",
                    rss_bound_base, cfg.rss_bound_after, rss, at);
        }
        struct dq_pool_stats ps;
        pool_sample(&ps);
        double el = (double)(now - run_start) / 1e9;
        if (n_samples < MAX_SAMPLES) {
            sample_t[n_samples] = el;
            sample_rate[n_samples] =
                (double)(ops - last_ops) / ((double)(now - last_t) / 1e9);
            sample_pool[n_samples] = ps;
            n_samples++;
        }
        last_ops = ops;
        last_t = now;
        fprintf(stderr,
                "progress elapsed=%.1f ops=%" PRIu64 " delivered=%" PRIu64
                " discarded=%" PRIu64 " violations=%" PRIu64 " rss_kb=%ld"
                " pool_reserved_kb=%" PRIu64 " nodes_in_use=%" PRIu64
                " nodes_limbo=%" PRIu64 " nodes_cached=%" PRIu64 "\n",
                el, ops, atomic_load(&n_delivered), atomic_load(&n_discarded),
                atomic_load(&n_violations), rss, ps.reserved_bytes / 1024,
                ps.nodes_in_use, ps.nodes_limbo, ps.nodes_cached);
        fflush(stderr);
    }
    return NULL;
}

static void json_escape(char *out, size_t cap, const char *in)
{
    size_t o = 0;
    for (; *in && o + 7 < cap; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = 0;
}

char *summary_json(double duration, long rss_end, bool pass)
{
    size_t cap = 65536 + (size_t)n_samples * 160;
    char *j = malloc(cap);
    char rep[2048], atom[128];
    json_escape(rep, sizeof rep, repro);
    json_escape(atom, sizeof atom, dq_atomics());
    size_t o = (size_t)snprintf(
        j, cap,
        "{\"binary\":\"dq_stress\",\"atomics\":\"%s\",\"seed\":%" PRIu64
        ",\"duration_s\":%.3f,\"ops\":%" PRIu64 ",\"accepted\":%" PRIu64
        ",\"delivered\":%" PRIu64 ",\"discarded\":%" PRIu64 ",\"violations\":%" PRIu64
        ",\"liveness_probes\":%" PRIu64
        ",\"rss_start_kb\":%ld,\"rss_end_kb\":%ld,\"peak_rss_kb\":%ld"
        ",\"rss_check\":\"%s\",\"pool_peak_reserved_kb\":%" PRIu64
        ",\"pool_peak_in_use\":%" PRIu64 ",\"pool_peak_limbo\":%" PRIu64
        ",\"thread_starts\":%" PRIu64 ",\"throughput\":[",
        atom, cfg.seed, duration, atomic_load(&n_ops), atomic_load(&n_accepted),
        atomic_load(&n_delivered), atomic_load(&n_discarded),
        atomic_load(&n_violations), atomic_load(&n_probes), rss_start, rss_end,
        atomic_load(&rss_peak),
        emulated ? "off: emulated, resident memory is the emulator's" : "native",
        pool_peak_reserved / 1024, pool_peak_in_use, pool_peak_limbo, thread_starts);
    for (int i = 0; i < n_samples; i++)
        o += (size_t)snprintf(j + o, cap - o, "%s[%.1f,%.0f]", i ? "," : "",
                              sample_t[i], sample_rate[i]);
    /* the library's counts over time: [elapsed, reserved KiB, in use,
       limbo, cached] */
    o += (size_t)snprintf(j + o, cap - o, "],\"pool\":[");
    for (int i = 0; i < n_samples; i++)
        o += (size_t)snprintf(
            j + o, cap - o, "%s[%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
            i ? "," : "", sample_t[i], sample_pool[i].reserved_bytes / 1024,
            sample_pool[i].nodes_in_use, sample_pool[i].nodes_limbo,
            sample_pool[i].nodes_cached);
    snprintf(j + o, cap - o, "],\"repro\":\"%s\",\"result\":\"%s\"}", rep,
             pass ? "pass" : "fail");
    return j;
}
