#!/usr/bin/env bash
# Run the benchmarks: every bench/bench_*.py in turn, or only the files given.
# Each prints its own table of figures; they are never part of the test suite.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"

shopt -s nullglob
files=("$@")
(( ${#files[@]} )) || files=(bench/bench_*.py)
if (( ${#files[@]} == 0 )); then
    echo "bench: no benchmarks yet (bench/bench_*.py)" >&2
    exit 1
fi
for f in "${files[@]}"; do
    echo "== $f"
    "$root/.venv/bin/python" "$f"
done
