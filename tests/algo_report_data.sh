#!/usr/bin/env bash
# The committed algorithm-sweep data recomputes to its committed report with
# the one command results/README.md gives (results/scripts/algo_report.py DIR): checks
# every run directory under results/ that has a report.md and its measured.csv.
#   tests/algo_report_data.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v python3 >/dev/null || { echo "algo_report_data: SKIPPED: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for dir in "$root"/results/*/; do
  [ -f "$dir/report.md" ] && [ -f "$dir/measured.csv" ] || continue
  name=$(basename "$dir")
  cp -r "$dir" "$tmp/$name"  # the report may write a plot beside the data
  python3 "$root/results/scripts/algo_report.py" "$tmp/$name" > "$tmp/$name.md"
  diff -u "$dir/report.md" "$tmp/$name.md" || { echo "algo_report_data: results/$name/report.md differs from its data"; exit 1; }
  grep -q '|' "$tmp/$name.md" || { echo "algo_report_data: results/$name gives no table"; exit 1; }
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "algo_report_data: no sweep data under results/"; exit 1; }
echo "algo_report_data: $n director(y/ies) recomputed to their report"
