# Images/s against the number of ranks, one panel per model, one line per launcher, and the
# 1 process x all cores level for reference. Called by scripts/bench.sh as
#   gnuplot -e "dir='bench-results'; term='pngcairo'; models='lenet resnet18'" bench/scripts/throughput.gp
# reading dir/throughput-MODEL.dat (k, nano mpi, nano subprocess, PyTorch DDP, 1 x all,
# physical cores x per-core base).
if (!exists("dir")) dir = "bench-results"
if (!exists("term")) term = "pngcairo"
if (term eq "pngcairo") set terminal pngcairo size 1200,500 enhanced font ",10"; else set terminal png size 1200,500
set output dir."/throughput.png"
set datafile missing "NaN"
if (!exists("models")) models = "lenet resnet18"
set multiplot layout 1,words(models) title "Training throughput, batch 64 per rank"
set logscale x 2
set xlabel "ranks (processes)"
set ylabel "images/s"
set yrange [0:*]
set grid
set offsets graph 0.03, graph 0.03, 0, 0
set key below
set pointsize 1.2
title_of(m) = m eq "lenet" ? "LeNet / Fashion-MNIST" : m eq "resnet18" ? "ResNet-18 / 3x32x32" : m
do for [i=1:words(models)] {
  f = dir."/throughput-".word(models, i).".dat"
  set title title_of(word(models, i))
  plot f using 1:2 with linespoints lw 2 pt 7 title "nano-run mpi", \
       f using 1:3 with linespoints lw 2 pt 5 title "nano-run subprocess", \
       f using 1:4 with linespoints lw 2 pt 9 title "stock PyTorch DDP", \
       f using 1:5 with lines lw 1 dt 2 lc rgb "gray40" title "1 process x all cores", \
       f using 1:6 with lines lw 1 dt 3 lc rgb "red" title "all cores x per-core base (ideal)"
}
unset multiplot
