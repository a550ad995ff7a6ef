# SPDX-License-Identifier: Apache-2.0
# Insert cost into a busy queue against queue depth, per contender, from
# queue_bench --plot-data PREFIX (PREFIX1.dat: 1 producer, PREFIX2.dat: 2).
# usage: gnuplot -e "prefix='results/insert'; out='results/insert_cost.png'" plot.gp
if (!exists("prefix")) prefix = "results/insert"
if (!exists("out")) out = "results/insert_cost.png"
if (!exists("subtitle")) subtitle = ""
set terminal pngcairo size 1200,520 font "sans,10" noenhanced
set output out
set datafile missing "NaN"
set logscale xy
set xlabel "pending messages (queue depth)"
set ylabel "CPU ns per insert, per producer (median)"
set grid xtics ytics mytics
set key top left
set xtics ("1k" 1000, "10k" 10000, "100k" 100000)
set xrange [700:140000]
set multiplot layout 1,2 title "Insert into a busy queue (random delays up to 5 s), ".subtitle
do for [p=1:2] {
    set title sprintf("%d producer%s", p, p > 1 ? "s" : "")
    f = sprintf("%s%d.dat", prefix, p)
    plot for [c=2:7] f using 1:c with linespoints lw 2 pt (c+3) title columnhead(c)
}
unset multiplot
