#!/bin/sh
# Plots the output of `gpured-kernels --sweep` (the TSV it prints, or the
# JSON of --json / --json-out) as GB/s against n, into PREFIX.png and
# PREFIX.svg.  Needs gnuplot (Debian: gnuplot-nox); jq for JSON input.
#
# usage: plot.sh SWEEP.tsv|SWEEP.json [PREFIX] [TITLE]
set -eu
in=${1:?usage: plot.sh SWEEP.tsv|SWEEP.json [PREFIX] [TITLE]}
prefix=${2:-kernels-sweep}
title=${3:-}
tsv=$(mktemp)
trap 'rm -f "$tsv"' EXIT

case $in in
*.json)
	# Columns: log2n, n, then GB/s of each kernel in the order of the file.
	jq -r '(.points[0] | keys_unsorted | map(select(. != "log2n" and . != "n"))) as $k
	       | (["log2n", "n"] + $k | @tsv),
	         (.points[] | . as $p | [$p.log2n, $p.n] + ($k | map($p[.].gbps)) | @tsv)' \
		"$in" >"$tsv"
	if [ -z "$title" ]; then
		title=$(jq -r '"sum of \(.dtype): \(.device.name)"' "$in")
	fi
	;;
*)
	# Drop comments and any "(FAIL)" marks, which gnuplot cannot read.
	grep -v '^#' "$in" | sed 's/(FAIL)//g' >"$tsv"
	;;
esac
cols=$(head -n 1 "$tsv" | awk -F '\t' '{ print NF }')

for term in png svg; do
	if [ $term = png ]; then
		setterm="set terminal pngcairo size 1500,620 font 'sans,11'"
	else
		setterm="set terminal svg size 1500,620 dynamic font 'sans,11'"
	fi
	gnuplot <<EOF
$setterm
set output '$prefix.$term'
set datafile separator "\t"
set multiplot layout 1,2 title "$title"
set key left top autotitle columnhead noenhanced
set logscale x 2
set format x "2^{%L}"
set xlabel "n (elements)"
set ylabel "GB/s (n elements read once)"
set grid
# Left: linear GB/s, where the large sizes differ; right: logarithmic,
# where the small, latency-bound sizes can be told apart.
set yrange [0:*]
plot '$tsv' using 2:3 with lines lw 2 dt 2 lc rgb 'black', \\
	for [i=4:$cols] '$tsv' using 2:i with linespoints lw 2 pt 7 ps 0.5
set logscale y 10
set yrange [*:*]
set key right bottom
plot '$tsv' using 2:3 with lines lw 2 dt 2 lc rgb 'black', \\
	for [i=4:$cols] '$tsv' using 2:i with linespoints lw 2 pt 7 ps 0.5
unset multiplot
EOF
done
echo "$prefix.png $prefix.svg"
