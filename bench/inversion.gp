# SPDX-License-Identifier: Apache-2.0
# Frame lateness under priority inversion, per contender: the fraction of
# frames delivered at most x ms after their vsync tick, all repetitions,
# from inversion --plot-data (cold start, left; --warm, right).
# usage: gnuplot -e "cold='results/inversion.dat'; warm='results/inversion_warm.dat'; out='results/inversion.png'" inversion.gp
if (!exists("cold")) cold = "results/inversion.dat"
if (!exists("warm")) warm = "results/inversion_warm.dat"
if (!exists("out")) out = "results/inversion.png"
if (!exists("subtitle")) subtitle = ""
set terminal pngcairo size 1200,520 font "sans,10" noenhanced
set output out
set logscale x
set xlabel "frame lateness: delivery minus vsync tick (ms, log scale)"
set ylabel "fraction of frames at most this late"
set yrange [0:1.02]
set xrange [0.01:10000]
set grid xtics ytics mxtics
set key bottom right
set arrow from 16, graph 0 to 16, graph 1 nohead dt 2 lc rgb "gray30"
set label "16 ms" at 16, graph 0.04 offset 0.5,0 tc rgb "gray30"
set multiplot layout 1,2 title "Priority inversion: 4 ms vsync, SCHED_IDLE posters, nice-10 hogs on every CPU. ".subtitle
set title "cold start (every thread's first post inside the run)"
plot for [i=0:5] cold index i using 1:2 with steps lw 2 title columnheader(1)
set title "warm start (each poster posted once before the first tick)"
plot for [i=0:5] warm index i using 1:2 with steps lw 2 title columnheader(1)
unset multiplot
