# bench/topics/topics_cdf.gp -- enqueue -> claim latency CDFs of
# bench/topics/run.sh (a): one connection waiting on n topics against n
# connections waiting on one each.
#
#   gnuplot -e "datadir='bench/topics/data'; outbase='bench/topics/topics_cdf'; n='64'" topics_cdf.gp
#
# Each data file holds sorted latencies (ms) and their cumulative fraction.
# The x axis is logarithmic; a latency at or below 0.01 ms (the server can
# wake the claimer before the enqueuing client has read its own reply) is
# drawn at 0.01.

if (!exists("datadir")) datadir = "data"
if (!exists("outbase")) outbase = "topics_cdf"
if (!exists("n")) n = "64"

f(name) = sprintf("%s/%s.dat", datadir, name)
lo = 0.01
clamp(x) = (x > lo ? x : lo)

set style line 1 lc rgb "#1b6ac9" lw 2.2 dt 1
set style line 2 lc rgb "#d9480f" lw 2.2 dt 1
set style line 20 lc rgb "#adb5bd" lw 1 dt 3

do_plot = "\
set title 'enqueue -> claimed: one connection on '.n.' topics vs '.n.' connections on one each' font ',12'; \
set logscale x 10; set grid xtics ytics mxtics ls 20; set yrange [0:1]; \
set ytics 0.1; set format x '%g'; set key bottom right Left reverse font ',10' box opaque; \
set xrange [lo:100]; set xlabel 'latency (ms, log scale; client clock, from the enqueue returning)'; set ylabel 'fraction of samples'; \
plot f('enqclaim_one') u (clamp($1)):2 w l ls 1 t '1 connection, claim(ARRAY['.n.' topics], wait)', \
     f('enqclaim_many') u (clamp($1)):2 w l ls 2 t n.' connections, claim(topic, wait) each'"

set terminal pngcairo size 900,560 enhanced font 'DejaVu Sans,10'
set output outbase.'.png'
eval do_plot
set terminal svg size 900,560 enhanced font 'DejaVu Sans,10' background rgb 'white'
set output outbase.'.svg'
eval do_plot
set output
