/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The A/A band (stats_noise_band): the interval in which noise alone puts
 * the median of a run's per-repetition ratios, learnt from a twin column
 * (the same code as column 0).  queue_bench calls a missed parity target a
 * tie when the opponent's ratio falls inside, so the band must be centred
 * on 1, widen with the twin's noise, and leave a real difference outside.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "bench/stats.h"

enum { BASE = 0, TWIN = 1, OTHER = 2 };

static stats results; /* ~600 KiB: not on the stack */

#define assert_near(x, want, eps)                                                     \
    cr_assert(fabs((x) - (want)) <= (eps), "%s = %.12g, want %.12g", #x, (double)(x), \
              (double)(want))

/* A metric whose column 0 is 100 in every repetition and whose twin is
   100 * twin_ratio[r]; nreps repetitions. */
static stats_metric *metric_with_twin(const char *name, const double *twin_ratio,
                                      int nreps)
{
    stats_metric *m =
        stats_metric_get(&results, "queues", "test", name, "ns", false, 0, 0);
    cr_assert_not_null(m);
    for (int r = 0; r < nreps; r++) {
        stats_put(m, BASE, r, 100.0);
        stats_put(m, TWIN, r, 100.0 * twin_ratio[r]);
    }
    return m;
}

Test(noise_band, identical_twin_gives_a_band_of_exactly_one)
{
    const double same[7] = { 1, 1, 1, 1, 1, 1, 1 };
    double lo, hi;
    cr_assert(stats_noise_band(metric_with_twin("same", same, 7), TWIN, &lo, &hi));
    assert_near(lo, 1.0, 1e-12);
    assert_near(hi, 1.0, 1e-12);
}

Test(noise_band, centred_on_one_even_when_the_twin_drew_one_side)
{
    /* the twin was 10% faster in every repetition: by exchangeability the
       same code may as well have been 10% slower */
    const double skewed[7] = { 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9 };
    double lo, hi;
    cr_assert(stats_noise_band(metric_with_twin("skewed", skewed, 7), TWIN, &lo, &hi));
    assert_near(lo, 0.9, 1e-9);
    assert_near(hi, 1 / 0.9, 1e-9);
}

Test(noise_band, a_real_difference_lies_outside_and_noise_makes_a_tie)
{
    const double quiet[7] = { 0.98, 1.02, 0.99, 1.01, 1.0, 0.97, 1.03 };
    const double noisy[7] = { 0.8, 1.25, 0.85, 1.2, 1.0, 0.9, 1.15 };
    double qlo, qhi, nlo, nhi;
    cr_assert(stats_noise_band(metric_with_twin("quiet", quiet, 7), TWIN, &qlo, &qhi));
    cr_assert(stats_noise_band(metric_with_twin("noisy", noisy, 7), TWIN, &nlo, &nhi));
    cr_assert(qlo < 1 && qhi > 1, "band %g-%g", qlo, qhi);
    cr_assert(qlo >= 0.97 && qhi <= 1 / 0.97, "band %g-%g wider than the twin's noise",
              qlo, qhi);
    /* 13% slower (the branchy comparator on tied keys): outside the quiet
       band, inside the noisy one */
    cr_assert(qhi < 1.13 && 1 / qlo < 1.13);
    cr_assert(nhi > 1.13 && 1 / nlo > 1.13, "band %g-%g", nlo, nhi);
}

Test(noise_band, opponent_ratio_is_tested_as_the_tables_pair_it)
{
    const double quiet[7] = { 0.98, 1.02, 0.99, 1.01, 1.0, 0.97, 1.03 };
    stats_metric *m = metric_with_twin("paired", quiet, 7);
    for (int r = 0; r < 7; r++)
        stats_put(m, OTHER, r, 113.0);
    double lo, hi;
    cr_assert(stats_noise_band(m, TWIN, &lo, &hi));
    double other = stats_ratio(m, OTHER);
    assert_near(other, 1.13, 1e-9);
    cr_assert(other > hi);
}

Test(noise_band, fewer_than_three_paired_repetitions_give_no_band)
{
    const double two[2] = { 0.9, 1.1 };
    stats_metric *m = metric_with_twin("two", two, 2);
    double lo = -1, hi = -1;
    cr_assert_not(stats_noise_band(m, TWIN, &lo, &hi));
    cr_assert(lo == -1 && hi == -1, "band left unset");
    /* a repetition without column 0 does not pair */
    stats_put(m, TWIN, 2, 100.0);
    cr_assert_not(stats_noise_band(m, TWIN, &lo, &hi));
}

Test(noise_band, the_same_samples_give_the_same_band)
{
    const double noisy[7] = { 0.8, 1.25, 0.85, 1.2, 1.0, 0.9, 1.15 };
    double lo1, hi1, lo2, hi2;
    cr_assert(stats_noise_band(metric_with_twin("again1", noisy, 7), TWIN, &lo1, &hi1));
    cr_assert(stats_noise_band(metric_with_twin("again2", noisy, 7), TWIN, &lo2, &hi2));
    cr_assert(lo1 == lo2 && hi1 == hi2);
}
