/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inversion: priority inversion, measured.  A UI-like consumer must
 * deliver a frame message every 4 ms while background threads at the
 * lowest priority post into the same queue and medium-priority hogs keep
 * every CPU busy.  A queue whose post takes a lock lets a background
 * poster be preempted while it holds it; the consumer (and the frame
 * poster) then wait for as long as the hogs keep the poster off the CPU.
 *
 * Threads of one run (one contender, --seconds long):
 *   vsync       normal priority: posts a due-now frame message on every
 *               4 ms tick (absolute ticks: a late post does not move the
 *               next one); the message carries its tick time
 *   consumer    normal priority: delivers; a frame's lateness is its
 *               delivery time minus its tick time, so time the vsync
 *               thread spent blocked in its post counts; after each frame
 *               it trims the background with remove by criteria, so the
 *               queue stays bounded
 *   background  one per CPU, SCHED_IDLE (nice 19 where that is refused):
 *               post messages due 1 s later, continuously
 *   hogs        one pinned to each CPU, nice 10: spin
 *
 * Every contender that has a consumer runs once per repetition, in an
 * order rotated each repetition (as queue_bench interleaves), so slow
 * drift of a shared machine hits all of them alike.  Reported per
 * contender, medians over repetitions: frames delivered, frames later
 * than 16 ms ("jank"), lateness p50 / p99 / max, the part of it from the
 * start of the frame's post to its delivery (the rest is the scheduler
 * waking the vsync thread late), background posts accepted, and what
 * they cost the consumer: messages trimmed, the most one trim took and
 * the longest it took (a backlog the consumer works through before the
 * next frame) and its CPU
 * time (every accepted background post is work the consumer must do
 * between two frames).  deliqueue_twin is the A/A control: the same code as
 * deliqueue, measured as a contender of its own.
 *
 * With --trace, each run also writes atrace markers of its own (the
 * frame posts and the background posts as slices, each frame's lateness
 * as a counter) to tracefs trace_marker, beside those of the library
 * when DQ_TRACE is set: what tools/trace records.
 *
 * --warm: every poster (vsync and background) makes one untimed post, and
 * waits for the others to have made theirs, before the first tick.  A
 * thread's first post is where a queue may take a lock that later posts
 * do not, and where a pool grows; cold, the default, starts every thread
 * at once, so a background poster can be preempted inside such a lock
 * while the vsync thread waits for it (deliqueue registers the thread's
 * node cache and grows its pool there without one).
 *
 * Usage: inversion [--quick] [--reps N] [--seconds S] [--contenders LIST]
 *                  [--json PATH] [--plot-data PATH] [--warm] [--trace]
 * Exit 0; 2 on bad usage or when a contender fails an operation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench/contender.h"
#include "bench/machine.h"

#define FRAME_NS            4000000LL  /* the vsync period */
#define JANK_NS             16000000LL /* a frame later than this is jank */
#define BACKGROUND_DELAY_NS 1000000000LL
#define HOG_NICE            10
#define MAX_CPUS            64
#define MAX_REPS            64

static const bench_contender *const contenders[] = {
    &bench_deliqueue,  &bench_legacy,       &bench_mutex_heap,
    &bench_ck_handoff, &bench_urcu_handoff, &bench_deliqueue_twin,
};
#define NCONTENDERS ((int)(sizeof(contenders) / sizeof(contenders[0])))

static char frame_target, background_target, stop_target;

static void die(const char *what, const bench_contender *c, int err)
{
    fprintf(stderr, "inversion: %s failed for %s: %s\n", what, c ? c->name : "-",
            strerror(err < 0 ? -err : err));
    exit(2);
}

/* ---- markers of the scenario itself (--trace) -------------------------- */

static int marker_fd = -1;

static void marker(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void marker(const char *fmt, ...)
{
    if (marker_fd < 0)
        return;
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(line))
        (void)!write(marker_fd, line, (size_t)n);
}

/* ---- priorities --------------------------------------------------------- */

static pid_t gettid_(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* The lowest priority Linux offers the calling thread: SCHED_IDLE, or nice
   19 where that is refused.  Returns which. */
static const char *lowest_priority(void)
{
    struct sched_param p = { 0 };
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &p) == 0)
        return "SCHED_IDLE";
    if (setpriority(PRIO_PROCESS, (id_t)gettid_(), 19) == 0)
        return "nice 19";
    return "unchanged (both refused)";
}

static _Atomic(const char *) background_priority;

static int online_cpus(cpu_set_t *set)
{
    if (sched_getaffinity(0, sizeof(*set), set) != 0)
        return 1;
    return CPU_COUNT(set);
}

/* ---- one run ------------------------------------------------------------ */

typedef struct run {
    const bench_contender *c;
    void *q;
    int64_t seconds_ns;
    _Atomic int stop;   /* hogs and background posters */
    bool warm;          /* --warm: every poster posts once first */
    int posters;        /* background posters and vsync */
    _Atomic int warmed; /* posters past their first post */
    _Atomic long background_posts;
    int64_t *lateness;   /* consumer only until joined */
    int64_t *queue_part; /* each frame's delivery minus its post's start */
    long frames, capacity;
    long removed;        /* background trimmed by the consumer */
    long trim_max;       /* the most one trim removed */
    int64_t trim_ns_max; /* the longest one trim took */
    int64_t consumer_cpu_ns;
    int err;
    const char *failed; /* which operation failed */
} run;

typedef struct hog_arg {
    run *r;
    int cpu;
} hog_arg;

static void *hog_main(void *arg)
{
    hog_arg *h = arg;
    (void)setpriority(PRIO_PROCESS, (id_t)gettid_(), HOG_NICE);
    volatile unsigned long spin = 0;
    /* relaxed: only the end of the run, which nothing else waits on */
    while (!atomic_load_explicit(&h->r->stop, memory_order_relaxed))
        spin++;
    return NULL;
}

/* --warm: this poster made its first post; wait for the others. */
static void warm_wait(run *r)
{
    atomic_fetch_add(&r->warmed, 1);
    struct timespec ms = { 0, 1000000 };
    while (atomic_load(&r->warmed) < r->posters && !atomic_load(&r->stop))
        nanosleep(&ms, NULL);
}

static void *background_main(void *arg)
{
    run *r = arg;
    atomic_store_explicit(&background_priority, lowest_priority(),
                          memory_order_relaxed);
    dq_msg m;
    memset(&m, 0, sizeof(m));
    m.target = &background_target;
    long posts = 0;
    if (r->warm) {
        int err = r->c->post_at(r->q, &m, bench_now() + BACKGROUND_DELAY_NS, NULL);
        if (err) {
            r->err = err;
            r->failed = "background post";
            atomic_fetch_add(&r->warmed, 1);
            return NULL;
        }
        posts++;
        warm_wait(r);
    }
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        if (marker_fd >= 0)
            marker("B|%d|background post\n", getpid());
        int err = r->c->post_at(r->q, &m, bench_now() + BACKGROUND_DELAY_NS, NULL);
        if (marker_fd >= 0)
            marker("E|%d\n", getpid());
        if (err) {
            r->err = err;
            r->failed = "background post";
            break;
        }
        posts++;
    }
    atomic_fetch_add_explicit(&r->background_posts, posts, memory_order_relaxed);
    return NULL;
}

static void *vsync_main(void *arg)
{
    run *r = arg;
    dq_msg m;
    memset(&m, 0, sizeof(m));
    m.target = &frame_target;
    if (r->warm) {
        /* a frame that is not timed: delivered, not recorded (what -1) */
        m.what = -1;
        int err = r->c->post_at(r->q, &m, bench_now(), NULL);
        if (err) {
            r->err = err;
            r->failed = "frame post";
            atomic_fetch_add(&r->warmed, 1);
            return NULL;
        }
        warm_wait(r);
    }
    int64_t start = bench_now() + FRAME_NS;
    long ticks = r->seconds_ns / FRAME_NS;
    for (long k = 0; k < ticks; k++) {
        int64_t tick = start + k * FRAME_NS;
        struct timespec ts = { tick / 1000000000, tick % 1000000000 };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        /* the tick time in arg1:arg2 (low, high), and in obj how late the
           post started: the scheduler's part of the frame's lateness */
        m.what = (int32_t)k;
        m.obj = (void *)(uintptr_t)(bench_now() - tick);
        m.arg1 = (int32_t)(uint32_t)tick;
        m.arg2 = (int32_t)(uint32_t)((uint64_t)tick >> 32);
        if (marker_fd >= 0)
            marker("B|%d|vsync post frame %ld\n", getpid(), k);
        int err = r->c->post_at(r->q, &m, tick, NULL);
        if (marker_fd >= 0)
            marker("E|%d\n", getpid());
        if (err) {
            r->err = err;
            r->failed = "frame post";
            return NULL;
        }
    }
    dq_msg stop;
    memset(&stop, 0, sizeof(stop));
    stop.target = &stop_target;
    int err = r->c->post_at(r->q, &stop, bench_now(), NULL);
    if (err) {
        r->err = err;
        r->failed = "stop post";
    }
    return NULL;
}

/* The consumer gives up on a run that shows no progress for this long. */
#define CONSUMER_STALL_NS (30 * 1000000000LL)

static void *consumer_main(void *arg)
{
    run *r = arg;
    const dq_match trim = { .target = &background_target };
    int64_t last = bench_now(), cpu0 = bench_thread_cpu_ns();
    for (;;) {
        dq_msg out;
        int err = r->c->next_until(r->q, &out, bench_now() + 100000000);
        int64_t now = bench_now();
        if (err == -ETIMEDOUT) {
            if (now - last > CONSUMER_STALL_NS) {
                r->err = err;
                r->failed = "consumer (no stop message)";
                return NULL;
            }
            continue;
        }
        if (err) {
            r->err = err;
            r->failed = "next_until";
            return NULL;
        }
        last = now;
        if (out.target == &stop_target) {
            r->consumer_cpu_ns = bench_thread_cpu_ns() - cpu0;
            return NULL;
        }
        if (out.target != &frame_target || out.what < 0)
            continue; /* a background message the trims missed fell due,
                         or the untimed frame of --warm */
        int64_t tick =
            (int64_t)((uint64_t)(uint32_t)out.arg2 << 32 | (uint32_t)out.arg1);
        if (r->frames < r->capacity) {
            r->queue_part[r->frames] = now - tick - (int64_t)(uintptr_t)out.obj;
            r->lateness[r->frames++] = now - tick;
        }
        if (marker_fd >= 0)
            marker("C|%d|frame lateness us|%lld\n", getpid(),
                   (long long)((now - tick) / 1000));
        int64_t t0 = bench_now();
        long removed = (long)r->c->remove(r->q, &trim);
        int64_t took = bench_now() - t0;
        r->removed += removed;
        if (removed > r->trim_max)
            r->trim_max = removed;
        if (took > r->trim_ns_max)
            r->trim_ns_max = took;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double percentile_us(const int64_t *sorted, long n, double p)
{
    if (n == 0)
        return NAN;
    long i = (long)ceil(p * (double)n) - 1;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return (double)sorted[i] / 1e3;
}

/* One repetition's numbers for one contender. */
typedef struct sample {
    double frames, jank, p50, p99, max, queue_p99, queue_max, background, trimmed,
        trim_max, trim_ms_max, consumer_cpu_ms;
} sample;

typedef struct results {
    sample s[NCONTENDERS][MAX_REPS];
    bool have[NCONTENDERS][MAX_REPS];
    int64_t *all[NCONTENDERS]; /* every frame's lateness, all reps */
    long nall[NCONTENDERS], capall[NCONTENDERS];
} results;

static results res;

static void run_one(int col, int rep, int64_t seconds_ns, int ncpus,
                    const cpu_set_t *cpus, bool warm)
{
    const bench_contender *c = contenders[col];
    run r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.seconds_ns = seconds_ns;
    r.warm = warm;
    r.posters = (ncpus < MAX_CPUS ? ncpus : MAX_CPUS) + 1;
    r.capacity = seconds_ns / FRAME_NS + 16;
    r.lateness = malloc((size_t)r.capacity * sizeof(int64_t));
    r.queue_part = malloc((size_t)r.capacity * sizeof(int64_t));
    r.q = c->create();
    if (r.q == NULL || r.lateness == NULL || r.queue_part == NULL)
        die("create", c, ENOMEM);
    if (marker_fd >= 0)
        marker("B|%d|inversion run: %s\n", getpid(), c->name);

    pthread_t consumer, vsync, hogs[MAX_CPUS], background[MAX_CPUS];
    hog_arg ha[MAX_CPUS];
    /* The consumer first, so that its first call makes it the consumer
       before anything is posted. */
    if (pthread_create(&consumer, NULL, consumer_main, &r))
        die("pthread_create", c, errno);
    int nhogs = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && nhogs < ncpus && nhogs < MAX_CPUS; cpu++) {
        if (!CPU_ISSET(cpu, cpus))
            continue;
        pthread_attr_t attr;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
        ha[nhogs] = (hog_arg){ &r, cpu };
        int err = pthread_create(&hogs[nhogs], &attr, hog_main, &ha[nhogs]);
        pthread_attr_destroy(&attr);
        if (err)
            die("pthread_create", c, err);
        nhogs++;
    }
    int nbackground = ncpus < MAX_CPUS ? ncpus : MAX_CPUS;
    for (int i = 0; i < nbackground; i++)
        if (pthread_create(&background[i], NULL, background_main, &r))
            die("pthread_create", c, errno);
    if (pthread_create(&vsync, NULL, vsync_main, &r))
        die("pthread_create", c, errno);

    pthread_join(vsync, NULL);
    pthread_join(consumer, NULL);
    atomic_store_explicit(&r.stop, 1, memory_order_relaxed);
    for (int i = 0; i < nbackground; i++)
        pthread_join(background[i], NULL);
    for (int i = 0; i < nhogs; i++)
        pthread_join(hogs[i], NULL);
    if (marker_fd >= 0)
        marker("E|%d\n", getpid());
    if (r.err)
        die(r.failed, c, r.err);
    c->destroy(r.q);

    qsort(r.lateness, (size_t)r.frames, sizeof(int64_t), cmp_i64);
    qsort(r.queue_part, (size_t)r.frames, sizeof(int64_t), cmp_i64);
    long jank = 0;
    for (long i = 0; i < r.frames; i++)
        jank += r.lateness[i] > JANK_NS;
    res.s[col][rep] = (sample){
        .frames = (double)r.frames,
        .jank = (double)jank,
        .p50 = percentile_us(r.lateness, r.frames, 0.5),
        .p99 = percentile_us(r.lateness, r.frames, 0.99),
        .max = r.frames ? (double)r.lateness[r.frames - 1] / 1e3 : NAN,
        .queue_p99 = percentile_us(r.queue_part, r.frames, 0.99),
        .queue_max = r.frames ? (double)r.queue_part[r.frames - 1] / 1e3 : NAN,
        .background = (double)atomic_load(&r.background_posts),
        .trimmed = (double)r.removed,
        .trim_max = (double)r.trim_max,
        .trim_ms_max = (double)r.trim_ns_max / 1e6,
        .consumer_cpu_ms = (double)r.consumer_cpu_ns / 1e6,
    };
    res.have[col][rep] = true;
    if (res.nall[col] + r.frames > res.capall[col]) {
        long cap = (res.nall[col] + r.frames) * 2;
        int64_t *p = realloc(res.all[col], (size_t)cap * sizeof(int64_t));
        if (p == NULL)
            die("realloc", c, ENOMEM);
        res.all[col] = p;
        res.capall[col] = cap;
    }
    memcpy(res.all[col] + res.nall[col], r.lateness,
           (size_t)r.frames * sizeof(int64_t));
    res.nall[col] += r.frames;
    free(r.lateness);
    free(r.queue_part);
}

/* ---- reporting ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(int col, int reps, size_t field)
{
    double v[MAX_REPS];
    int n = 0;
    for (int r = 0; r < reps; r++)
        if (res.have[col][r])
            v[n++] = *(const double *)((const char *)&res.s[col][r] + field);
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct field {
    const char *json, *title, *fmt;
    size_t offset;
} field;

static const field fields[] = {
    { "frames", "frames", "%.0f", offsetof(sample, frames) },
    { "jank_frames", "jank (> 16 ms)", "%.0f", offsetof(sample, jank) },
    { "lat_p50_us", "lateness p50 (us)", "%.1f", offsetof(sample, p50) },
    { "lat_p99_us", "lateness p99 (us)", "%.1f", offsetof(sample, p99) },
    { "lat_max_us", "lateness max (us)", "%.1f", offsetof(sample, max) },
    { "lat_after_post_p99_us", "post-to-delivery p99 (us)", "%.1f",
      offsetof(sample, queue_p99) },
    { "lat_after_post_max_us", "post-to-delivery max (us)", "%.1f",
      offsetof(sample, queue_max) },
    { "background_posts", "background posts", "%.0f", offsetof(sample, background) },
    { "trimmed", "trimmed by the consumer", "%.0f", offsetof(sample, trimmed) },
    { "trim_max", "largest trim", "%.0f", offsetof(sample, trim_max) },
    { "trim_ms_max", "longest trim (ms)", "%.2f", offsetof(sample, trim_ms_max) },
    { "consumer_cpu_ms", "consumer CPU (ms)", "%.1f",
      offsetof(sample, consumer_cpu_ms) },
};
#define NFIELDS ((int)(sizeof(fields) / sizeof(fields[0])))

static void json_number(FILE *f, double v, const char *fmt)
{
    if (isnan(v))
        fputs("null", f);
    else
        fprintf(f, fmt, v);
}

static int write_json(const char *path, const bool *on, int reps)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -errno;
    fputs("{\n", f);
    bool first = true;
    for (int c = 0; c < NCONTENDERS; c++) {
        if (!on[c])
            continue;
        fprintf(f, "%s  \"%s\": {\n", first ? "" : ",\n", contenders[c]->name);
        first = false;
        for (int k = 0; k < NFIELDS; k++) {
            fprintf(f, "    \"%s\": ", fields[k].json);
            json_number(f, median_of(c, reps, fields[k].offset), fields[k].fmt);
            fputs(",\n", f);
        }
        fputs("    \"per_repetition\": {", f);
        for (int k = 0; k < NFIELDS; k++) {
            fprintf(f, "%s\"%s\": [", k ? ", " : "", fields[k].json);
            for (int r = 0; r < reps; r++) {
                if (r)
                    fputs(", ", f);
                json_number(f,
                            res.have[c][r]
                                ? *(const double *)((const char *)&res.s[c][r] +
                                                    fields[k].offset)
                                : NAN,
                            fields[k].fmt);
            }
            fputs("]", f);
        }
        fputs("}\n  }", f);
    }
    fputs("\n}\n", f);
    return fclose(f) == 0 ? 0 : -errno;
}

/* gnuplot data: one block per contender (a header line with its name),
   each frame's lateness in ms against the fraction of frames at most that
   late, all repetitions together. */
static int write_plot_data(const char *path, const bool *on)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -errno;
    for (int c = 0; c < NCONTENDERS; c++) {
        if (!on[c])
            continue;
        qsort(res.all[c], (size_t)res.nall[c], sizeof(int64_t), cmp_i64);
        fprintf(f, "\"%s\"\n", contenders[c]->name);
        for (long i = 0; i < res.nall[c]; i++)
            fprintf(f, "%.4f %.6f\n", (double)res.all[c][i] / 1e6,
                    (double)(i + 1) / (double)res.nall[c]);
        fputs("\n\n", f);
    }
    return fclose(f) == 0 ? 0 : -errno;
}

/* The goal, per repetition: deliqueue has no jank frame and the lowest
   max lateness of all contenders but its A/A twin. */
static void print_goal(const bool *on, int reps)
{
    int dq = 0, twin = NCONTENDERS - 1, held = 0, zero_jank = 0, lowest = 0;
    for (int r = 0; r < reps; r++) {
        if (!res.have[dq][r])
            continue;
        bool z = res.s[dq][r].jank == 0, low = true;
        for (int c = 1; c < twin; c++)
            if (on[c] && res.have[c][r] && res.s[c][r].max <= res.s[dq][r].max)
                low = false;
        zero_jank += z;
        lowest += low;
        held += z && low;
    }
    printf(
        "\n- goal (deliqueue: 0 jank frames and the lowest max lateness, twin aside): "
        "%d of %d repetitions (0 jank in %d, lowest max in %d)\n",
        held, reps, zero_jank, lowest);
    if (on[twin]) {
        int twin_zero = 0;
        for (int r = 0; r < reps; r++)
            twin_zero += res.have[twin][r] && res.s[twin][r].jank == 0;
        printf(
            "- A/A control: deliqueue_twin had 0 jank frames in %d of %d repetitions\n",
            twin_zero, reps);
    }
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--quick] [--reps N (1-%d)] [--seconds S] [--contenders LIST]\n"
            "          [--json PATH] [--plot-data PATH] [--warm] [--trace]\n",
            argv0, MAX_REPS);
    return 2;
}

int main(int argc, char **argv)
{
    int reps = 5;
    double seconds = 3;
    const char *json_path = NULL, *plot_path = NULL, *list = NULL;
    bool trace = false, warm = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            reps = 1;
            seconds = 0.2;
        } else if (strcmp(a, "--warm") == 0) {
            warm = true;
        } else if (strcmp(a, "--trace") == 0) {
            trace = true;
        } else if (strcmp(a, "--reps") == 0 && v) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > MAX_REPS)
                return usage(argv[0]);
            reps = (int)n;
            i++;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            char *end;
            seconds = strtod(v, &end);
            if (*end || !(seconds >= 0.02 && seconds <= 3600))
                return usage(argv[0]);
            i++;
        } else if (strcmp(a, "--contenders") == 0 && v) {
            list = v;
            i++;
        } else if (strcmp(a, "--json") == 0 && v) {
            json_path = v;
            i++;
        } else if (strcmp(a, "--plot-data") == 0 && v) {
            plot_path = v;
            i++;
        } else {
            return usage(argv[0]);
        }
    }
    bool on[NCONTENDERS];
    for (int c = 0; c < NCONTENDERS; c++)
        on[c] = list == NULL;
    if (list != NULL) {
        char *copy = strdup(list), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int c = 0;
            while (c < NCONTENDERS && strcmp(contenders[c]->name, t) != 0)
                c++;
            if (c == NCONTENDERS) {
                fprintf(stderr, "inversion: unknown contender '%s'\n", t);
                free(copy);
                return usage(argv[0]);
            }
            on[c] = true;
        }
        free(copy);
    }
    if (trace) {
        marker_fd = open("/sys/kernel/tracing/trace_marker", O_WRONLY | O_CLOEXEC);
        if (marker_fd < 0)
            marker_fd =
                open("/sys/kernel/debug/tracing/trace_marker", O_WRONLY | O_CLOEXEC);
        if (marker_fd < 0) {
            fprintf(stderr,
                    "inversion: --trace: cannot open tracefs trace_marker: %s\n",
                    strerror(errno));
            return 2;
        }
    }

    cpu_set_t cpus;
    int ncpus = online_cpus(&cpus);
    int64_t seconds_ns = (int64_t)(seconds * 1e9);
    char model[256];
    bench_cpu_model(model, sizeof(model));
    struct utsname u;
    uname(&u);
    printf("# inversion\n\n");
    printf("- machine: %s, %d CPUs this process may use, %s %s, load average %.2f\n",
           model, ncpus, u.sysname, u.release, bench_loadavg());
    printf("- run: %d repetitions of %.2f s per contender, interleaved; vsync every "
           "%lld ms; "
           "jank above %lld ms; %d background posters, %d hogs (nice %d); %s start\n",
           reps, seconds, FRAME_NS / 1000000, JANK_NS / 1000000, ncpus, ncpus, HOG_NICE,
           warm ? "warm (every poster posted once first)" : "cold");
    fflush(stdout);

    for (int rep = 0; rep < reps; rep++)
        for (int i = 0; i < NCONTENDERS; i++) {
            int col = (i + rep) % NCONTENDERS;
            if (on[col])
                run_one(col, rep, seconds_ns, ncpus, &cpus, warm);
        }

    const char *prio = atomic_load_explicit(&background_priority, memory_order_relaxed);
    printf("- background posters ran at: %s\n\n", prio ? prio : "(none ran)");
    printf("| contender |");
    for (int k = 0; k < NFIELDS; k++)
        printf(" %s |", fields[k].title);
    printf("\n|---|");
    for (int k = 0; k < NFIELDS; k++)
        printf("---:|");
    printf("\n");
    for (int c = 0; c < NCONTENDERS; c++) {
        if (!on[c])
            continue;
        printf("| %s |", contenders[c]->name);
        for (int k = 0; k < NFIELDS; k++) {
            printf(" ");
            printf(fields[k].fmt, median_of(c, reps, fields[k].offset));
            printf(" |");
        }
        printf("\n");
    }
    printf("\nMedians over repetitions.  Per repetition, jank frames / max lateness "
           "(ms) / largest trim (messages one remove by criteria took) / longest "
           "trim (ms):\n\n");
    for (int c = 0; c < NCONTENDERS; c++) {
        if (!on[c])
            continue;
        printf("- %s:", contenders[c]->name);
        for (int r = 0; r < reps; r++)
            if (res.have[c][r])
                printf(" %.0f/%.2f/%.0f/%.2f", res.s[c][r].jank, res.s[c][r].max / 1e3,
                       res.s[c][r].trim_max, res.s[c][r].trim_ms_max);
        printf("\n");
    }
    if (on[0])
        print_goal(on, reps);
    if (json_path != NULL) {
        int err = write_json(json_path, on, reps);
        if (err)
            die("writing the JSON", NULL, err);
    }
    if (plot_path != NULL) {
        int err = write_plot_data(plot_path, on);
        if (err)
            die("writing the plot data", NULL, err);
    }
    return 0;
}
