/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every harness of model/relacy shares: a Relacy test suite around
 * one queue made in before() and dropped in after(), the bookkeeping of
 * what was delivered and discarded, and main(): the runs a harness makes
 * by default and the flags that replace them.
 *
 *   harness                               # its default runs (see each file)
 *   harness --sched=bound --bound=2       # context-bounded, to completion
 *   harness --sched=bound --iterations=N  # ... its first N iterations
 *   harness --sched=random --iterations=N # N random schedules (100000)
 *   harness --sched=full                  # every schedule (small harnesses)
 *   harness --coverage [flags]            # the runs, then one line per
 *                                         # function whose atomics they
 *                                         # reached: "covers\tFILE\tFUNCTION"
 *
 * One summary line per run: "NAME: SCHED: N iterations [(complete) | (the
 * search's first)] in S s: ok|FAILED"; before a failure's, the result,
 * its iteration and that iteration's history.  Exit status: 0 if every
 * run passed, 1 if one failed, 2 on bad usage.
 */
#ifndef DQ_RELACY_HARNESS_H
#define DQ_RELACY_HARNESS_H

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "dq_relacy.h"

#include <deliqueue/deliqueue.h>

namespace harness
{

/* The queue of an iteration, and what became of each message (by what,
   1 .. MAX_WHAT - 1): delivered, or reported to on_discard. */
inline constexpr int MAX_WHAT = 8;
inline const char target[] = "harness";

/* Iterations begun in this run, and where a systematic search stops. */
inline rl::iteration_t iterations_done, iteration_limit;

template <typename Derived, rl::thread_id_t threads>
struct test : rl::test_suite<Derived, threads> {
    dq_queue *q;
    /* Set by a harness whose threads drop every reference themselves:
       after() then leaves q alone (it is freed). */
    bool last_ref_in_threads;
    int delivered[MAX_WHAT];
    int discarded[MAX_WHAT];

    static void on_discard(const dq_msg *m, void *ctx)
    {
        test *t = static_cast<test *>(ctx);
        RL_ASSERT(m->what > 0 && m->what < MAX_WHAT);
        t->discarded[m->what]++;
    }

    /* A queue whose consumer never polls before it sleeps: every idle
       transition goes to the futex, where a lost wake-up is a deadlock. */
    void before()
    {
        /* a search cut short (spec.iterations) ends here, not as a
           failure: run() tells the two apart */
        if (++iterations_done > iteration_limit)
            rl::ctx().rl_until("the search's first iterations are done", $);
        dq_rl::iteration_begin();
        last_ref_in_threads = false;
        memset(delivered, 0, sizeof(delivered));
        memset(discarded, 0, sizeof(discarded));
        dq_options o = {};
        o.on_discard = on_discard;
        o.ctx = this;
        o.idle_spin_ns = -1;
        static_cast<Derived *>(this)->options(o);
        q = dq_create(&o);
        RL_ASSERT(q != NULL);
        static_cast<Derived *>(this)->setup();
        dq_rl::threads_running = true;
    }
    void thread(unsigned index)
    {
        static_cast<Derived *>(this)->run(index);
        dq_rl::thread_exit();
    }
    /* The last reference goes first: its teardown reports what is still
       pending, so the checks see every message's one report. */
    void after()
    {
        dq_rl::threads_running = false;
        if (!last_ref_in_threads)
            dq_unref(q);
        static_cast<Derived *>(this)->check();
        dq_rl::iteration_end();
    }
    void setup()
    {
    }
    /* A harness's own options for the iteration's queue (before dq_create). */
    void options(dq_options &o)
    {
        (void)o;
    }

    static dq_msg message(int what)
    {
        dq_msg m = {};
        m.target = target;
        m.what = what;
        m.arg1 = what * 10;
        return m;
    }
    /* Post message what, due at once; it must be accepted. */
    void post(int what, dq_token *tok = NULL)
    {
        dq_msg m = message(what);
        RL_ASSERT(dq_post(q, &m, tok) == 0);
    }
    /* dq_remove of this harness's messages numbered what: how many. */
    size_t remove(int what)
    {
        dq_match match = {};
        match.target = target;
        match.fields = DQ_MATCH_WHAT;
        match.what = what;
        return dq_remove(q, &match);
    }
    /* The consumer got m: once, and intact. */
    void got(const dq_msg &m)
    {
        RL_ASSERT(m.target == target);
        RL_ASSERT(m.what > 0 && m.what < MAX_WHAT);
        RL_ASSERT(m.arg1 == m.what * 10);
        delivered[m.what]++;
    }
    /* Message what was accepted: reported exactly once, one way or the
       other. */
    void once(int what)
    {
        RL_ASSERT(delivered[what] + discarded[what] == 1);
    }
};

/* A run: the scheduler, its context bound (sched_bound), and how many
   iterations: a random search's length; for a systematic one (bound,
   full) 0 searches to completion, N stops after the first N. */
struct spec {
    rl::scheduler_type_e sched;
    unsigned bound;
    rl::iteration_t iterations;
};

inline const char *sched_name(rl::scheduler_type_e s)
{
    return s == rl::sched_bound    ? "context bound"
           : s == rl::sched_random ? "random"
                                   : "full";
}

/* Relacy's report of a failed run, cut to what explains it: the result
   and iteration, then the history of the failing iteration only (after a
   context-bounded search Relacy replays the iterations before it into
   the same history, which runs to megabytes). */
inline void print_failure(const std::string &report)
{
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < report.size()) {
        size_t end = report.find('\n', start);
        if (end == std::string::npos)
            end = report.size();
        lines.push_back(report.substr(start, end - start));
        start = end + 1;
    }
    size_t history = lines.size(), last = lines.size(), end = lines.size();
    for (size_t i = 0; i < lines.size(); i++) {
        if (history == lines.size() && lines[i].rfind("execution history", 0) == 0)
            history = i;
        else if (history < i && end == lines.size() &&
                 lines[i].rfind("thread 0:", 0) == 0)
            end = i;
        if (history < i && end == lines.size() &&
            lines[i].find("[CTOR BEGIN]") != std::string::npos)
            last = i;
    }
    for (size_t i = 0; i < history && i < lines.size(); i++)
        if (lines[i].find("% (") == std::string::npos) /* progress */
            printf("%s\n", lines[i].c_str());
    if (history < lines.size())
        printf("execution history of the failing iteration:\n");
    for (size_t i = last; i < end; i++)
        printf("%s\n", lines[i].c_str());
}

template <typename Test> bool run(const char *name, const spec &s)
{
    /* Relacy writes while its context is live, when operator new is its
       own: a stream on the C library's heap */
    std::basic_ostringstream<char, std::char_traits<char>, dq_rl::raw_allocator<char>>
        report;
    bool systematic = s.sched != rl::sched_random;
    rl::test_params p;
    p.output_stream = &report;
    p.progress_stream = &report;
    p.progress_output_period = 1000000; /* no progress lines */
    p.search_type = s.sched;
    p.context_bound = s.bound;
    p.iteration_count = s.iterations;
    p.execution_depth_limit = 100000;
    p.collect_history = getenv("DQ_RELACY_HISTORY") != NULL;
    iterations_done = 0;
    iteration_limit =
        systematic && s.iterations != 0 ? s.iterations : ~(rl::iteration_t)0;
    auto start = std::chrono::steady_clock::now();
    bool ok = rl::simulate<Test>(p);
    double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool cut = p.test_result == rl::test_result_until_condition_hit;
    ok = ok || cut;
    if (!ok)
        print_failure(std::string(report.str().c_str()));
    char how[64], what[64];
    if (s.sched == rl::sched_bound)
        snprintf(how, sizeof(how), "context bound %u", s.bound);
    else
        snprintf(how, sizeof(how), "%s", sched_name(s.sched));
    rl::iteration_t done = cut ? s.iterations : p.stop_iteration;
    snprintf(what, sizeof(what), "%s",
             !ok || !systematic ? ""
             : cut              ? " (the search's first)"
                                : " (complete)");
    printf("%s: %s: %llu iterations%s in %.2f s: %s%s%s\n", name, how,
           (unsigned long long)done, what, secs, ok ? "ok" : "FAILED (",
           ok ? "" : rl::test_result_str(p.test_result), ok ? "" : ")");
    fflush(stdout);
    return ok;
}

/* Parse the flags (or take the defaults) and make the runs. */
template <typename Test>
int main(const char *name, int argc, char **argv, std::initializer_list<spec> defaults)
{
    dq_rl::install_crash_handlers();
    unsetenv("DQ_TRACE");
    spec one = { rl::sched_bound, 2, 0 };
    bool flags = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--coverage") == 0) {
            dq_rl::covering = true;
            continue;
        }
        if (strcmp(a, "--sched=bound") == 0)
            one.sched = rl::sched_bound;
        else if (strcmp(a, "--sched=random") == 0)
            one.sched = rl::sched_random;
        else if (strcmp(a, "--sched=full") == 0)
            one.sched = rl::sched_full;
        else if (strncmp(a, "--bound=", 8) == 0)
            one.bound = (unsigned)atoi(a + 8);
        else if (strncmp(a, "--iterations=", 13) == 0)
            one.iterations = (rl::iteration_t)atoll(a + 13);
        else {
            fprintf(stderr,
                    "usage: %s [--coverage] [--sched=bound|random|full] [--bound=N] "
                    "[--iterations=N]\n",
                    argv[0]);
            return 2;
        }
        flags = true;
    }
    if (one.iterations == 0 && one.sched == rl::sched_random)
        one.iterations = 100000;
    bool ok = true;
    if (flags)
        ok = run<Test>(name, one);
    else
        for (const spec &s : defaults)
            ok = run<Test>(name, s) && ok;
    if (dq_rl::covering)
        dq_rl::print_coverage(stdout);
    return ok ? 0 : 1;
}

} // namespace harness

#endif /* DQ_RELACY_HARNESS_H */
