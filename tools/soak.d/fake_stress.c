/* fake_stress: a stand-in for //stress:dq_stress that honours the same CLI
 * and output contract, used by the soak launcher's self-test (and before the
 * real binary exists).  It burns CPU in a counting loop instead of driving a
 * queue.  Scenarios that make it misbehave on purpose:
 *
 *   --scenario=fake-violation      report a violation half-way, exit 1
 *   --scenario=fake-violation-odd  the same, but only for an odd --seed
 *   --scenario=fake-crash          SIGSEGV half-way (no JSON)
 *   --scenario=fake-hang           ignore --duration, keep running
 *   --scenario=fake-nojson         exit 0 without the JSON summary
 *
 * Any other scenario name runs normally and passes.
 * Build: cc -O2 -o fake_stress fake_stress.c
 *        aarch64-linux-gnu-gcc -O2 -static -o fake_stress.arm64 fake_stress.c
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(FAKE_ATOMICS)
#define ATOMICS FAKE_ATOMICS
#elif defined(__aarch64__) && defined(__ARM_FEATURE_ATOMICS)
#define ATOMICS "arm64-lse"
#elif defined(__aarch64__)
#define ATOMICS "arm64-llsc"
#else
#define ATOMICS "x86_64"
#endif

#define MAX_SAMPLES 100000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

static int usage(const char *why)
{
    fprintf(stderr,
            "fake_stress: %s\n"
            "usage: dq_stress --duration=SECONDS --seed=N --producers=N --removers=N "
            "--cancellers=N --barriers=N [--json=PATH] [--progress-interval=SECONDS] "
            "[--scenario=NAME]\n",
            why);
    return 2;
}

int main(int argc, char **argv)
{
    double duration = -1, interval = 2;
    unsigned long long seed = 0;
    int have_seed = 0;
    long producers = 1, removers = 1, cancellers = 1, barriers = 0;
    const char *json_path = NULL, *scenario = "mixed";

    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *v = strchr(a, '=');
        if (strncmp(a, "--", 2) != 0 || !v)
            return usage("arguments must be --name=value");
        *v++ = '\0';
        if (!strcmp(a, "--duration"))
            duration = atof(v);
        else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, NULL, 10);
            have_seed = 1;
        } else if (!strcmp(a, "--producers"))
            producers = atol(v);
        else if (!strcmp(a, "--removers"))
            removers = atol(v);
        else if (!strcmp(a, "--cancellers"))
            cancellers = atol(v);
        else if (!strcmp(a, "--barriers"))
            barriers = atol(v);
        else if (!strcmp(a, "--json"))
            json_path = v;
        else if (!strcmp(a, "--progress-interval"))
            interval = atof(v);
        else if (!strcmp(a, "--scenario"))
            scenario = v;
        else
            return usage("unknown flag");
    }
    if (duration < 0 || !have_seed)
        return usage("--duration and --seed are required");
    if (interval <= 0)
        interval = 1;

    int violate = !strcmp(scenario, "fake-violation") ||
                  (!strcmp(scenario, "fake-violation-odd") && (seed & 1));
    int crash = !strcmp(scenario, "fake-crash");
    int hang = !strcmp(scenario, "fake-hang");
    int nojson = !strcmp(scenario, "fake-nojson");

    char repro[1024];
    snprintf(repro, sizeof repro,
             "dq_stress --duration=%g --seed=%llu --producers=%ld --removers=%ld "
             "--cancellers=%ld --barriers=%ld --scenario=%s",
             duration, seed, producers, removers, cancellers, barriers, scenario);

    static double samples[MAX_SAMPLES][2];
    int nsamples = 0;
    long rss_start = rss_kb(), peak = rss_start;
    unsigned long long ops = 0, violations = 0, x = seed | 1;
    double t0 = now_s(), last = t0;
    unsigned long long last_ops = 0;

    for (;;) {
        /* ~a few ms of work per chunk */
        for (int k = 0; k < 200000; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ops++;
        }
        double t = now_s(), el = t - t0;
        if (t - last >= interval) {
            long r = rss_kb();
            if (r > peak)
                peak = r;
            if (nsamples < MAX_SAMPLES) {
                samples[nsamples][0] = el;
                samples[nsamples][1] = (double)(ops - last_ops) / (t - last);
                nsamples++;
            }
            last = t;
            last_ops = ops;
            fprintf(stderr,
                    "progress elapsed=%.1f ops=%llu delivered=%llu discarded=%llu "
                    "violations=%llu rss_kb=%ld\n",
                    el, ops, ops - ops / 10, ops / 10, violations, r);
        }
        if ((violate || crash) && el >= duration / 2) {
            if (crash) {
                fprintf(stderr, "fake_stress: crashing on purpose (seed %llu)\n", seed);
                raise(SIGSEGV);
            }
            violations = 1;
            fprintf(stderr, "VIOLATION: fake: message delivered twice (seed %llu)\n",
                    seed);
            fprintf(stderr, "repro: %s\n", repro);
            break;
        }
        if (!hang && el >= duration)
            break;
    }
    if (x == 42) /* keep the loop */
        fputc(' ', stderr);
    if (nojson)
        return 0;

    double el = now_s() - t0;
    char *buf = malloc(64 * (size_t)nsamples + 2048);
    size_t n = 0;
    n += sprintf(buf + n,
                 "{\"binary\":\"dq_stress\",\"atomics\":\"%s\",\"seed\":%llu,"
                 "\"duration_s\":%.3f,"
                 "\"ops\":%llu,\"accepted\":%llu,\"delivered\":%llu,\"discarded\":%llu,"
                 "\"violations\":%llu,\"rss_start_kb\":%ld,\"rss_end_kb\":%ld,\"peak_"
                 "rss_kb\":%ld,"
                 "\"throughput\":[",
                 ATOMICS, seed, el, ops, ops, ops - ops / 10, ops / 10, violations,
                 rss_start, rss_kb(), peak);
    for (int i = 0; i < nsamples; i++)
        n += sprintf(buf + n, "%s[%.1f,%.0f]", i ? "," : "", samples[i][0],
                     samples[i][1]);
    n += sprintf(buf + n, "],\"repro\":\"%s\",\"result\":\"%s\"}\n", repro,
                 violations ? "fail" : "pass");
    fputs(buf, stdout);
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (!f || fputs(buf, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "fake_stress: cannot write %s\n", json_path);
            return 2;
        }
    }
    free(buf);
    return violations ? 1 : 0;
}
