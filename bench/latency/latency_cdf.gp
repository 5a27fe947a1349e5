# bench/latency/latency_cdf.gp -- latency CDFs of bench/latency/run.sh.
#
#   gnuplot -e "datadir='bench/latency/data'; outbase='bench/latency/latency_cdf'" latency_cdf.gp
#
# Left: pulse -> re-offer; right: enqueue -> claim.
# Each data file holds sorted latencies (ms) and their cumulative fraction.
# The x axis is logarithmic; a latency at or below 0.01 ms (the server can
# act before the causing client has read its own reply) is drawn at 0.01.

if (!exists("datadir")) datadir = "data"
if (!exists("outbase")) outbase = "latency_cdf"
if (!exists("big")) big = "100k"

lo = 0.01
clamp(x) = (x > lo ? x : lo)
f(n) = sprintf("%s/%s.dat", datadir, n)

set style line 1 lc rgb "#1b6ac9" lw 2.2 dt 1
set style line 2 lc rgb "#1b6ac9" lw 2.2 dt 2
set style line 3 lc rgb "#d9480f" lw 2.2 dt 1
set style line 4 lc rgb "#d9480f" lw 2.2 dt 2
set style line 5 lc rgb "#2b8a3e" lw 1.6 dt 1
set style line 6 lc rgb "#2b8a3e" lw 1.6 dt 2
set style line 7 lc rgb "#862e9c" lw 1.6 dt 1
set style line 8 lc rgb "#862e9c" lw 1.6 dt 2
set style line 11 lc rgb "#1b6ac9" lw 2.2 dt 1
set style line 12 lc rgb "#d9480f" lw 2.2 dt 1
set style line 13 lc rgb "#495057" lw 2.2 dt 1
set style line 20 lc rgb "#adb5bd" lw 1 dt 3

do_plot = "\
set multiplot layout 1,2 title 'aion\\_wake wake-up latency CDFs (client clock; from the commit returning to the client)' font ',13'; \
set logscale x 10; set grid xtics ytics mxtics ls 20; set yrange [0:1]; \
set ytics 0.1; set format x '%g'; set key bottom right Left reverse font ',9' spacing 1.1 box opaque; \
set xlabel 'latency (ms, log scale)'; set ylabel 'fraction of samples'; \
set xrange [lo:300]; \
set title 'pulse -> parked row back'; \
set arrow 1 from 1, graph 0 to 1, graph 1 nohead lc rgb '#868e96' dt 4; \
set label 1 'target p50 1 ms' at 1.1, graph 0.03 font ',8' tc rgb '#868e96'; \
plot f('reoffer_pulse_claim_10') u (clamp($1)):2 w l ls 1 t 'pulse() -> blocked claim, 10 parked', \
     f('reoffer_pulse_claim_big') u (clamp($1)):2 w l ls 2 t 'pulse() -> blocked claim, '.big.' parked', \
     f('reoffer_notify_claim_10') u (clamp($1)):2 w l ls 3 t 'NOTIFY -> blocked claim, 10 parked', \
     f('reoffer_notify_claim_big') u (clamp($1)):2 w l ls 4 t 'NOTIFY -> blocked claim, '.big.' parked', \
     f('reoffer_pulse_visible_10') u (clamp($1)):2 w l ls 5 t 'pulse() -> row visible (poll), 10', \
     f('reoffer_pulse_visible_big') u (clamp($1)):2 w l ls 6 t 'pulse() -> row visible (poll), '.big, \
     f('reoffer_notify_visible_10') u (clamp($1)):2 w l ls 7 t 'NOTIFY -> row visible (poll), 10', \
     f('reoffer_notify_visible_big') u (clamp($1)):2 w l ls 8 t 'NOTIFY -> row visible (poll), '.big; \
set title 'enqueue -> claimed'; set key top left; \
plot f('enqclaim_block') u (clamp($1)):2 w l ls 11 t 'claim(wait) blocked', \
     f('enqclaim_listen') u (clamp($1)):2 w l ls 12 t 'LISTEN/NOTIFY + claim', \
     f('enqclaim_poll100ms') u (clamp($1)):2 w l ls 13 t 'claim() polled every 100 ms'; \
unset arrow 1; unset label 1; \
unset multiplot"

set terminal pngcairo size 1500,620 enhanced font 'DejaVu Sans,10'
set output outbase.'.png'
eval do_plot
set terminal svg size 1500,620 enhanced font 'DejaVu Sans,10' background rgb 'white'
set output outbase.'.svg'
eval do_plot
set output
