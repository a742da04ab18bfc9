#!/usr/bin/env bash
# Run the benchmarks: every bench module in turn (`python -m bench.<name>`),
# or only the names given (e.g. `bash scripts/bench.sh core load`).
# Each prints its own table of figures; they are never part of the test suite.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"

names=("$@")
if (( ${#names[@]} == 0 )); then
    for f in bench/*.py; do
        name="$(basename "$f" .py)"
        [[ "$name" == __init__ || "$name" == table || "$name" == embedded || "$name" == driver_log ]] || names+=("$name")
    done
fi
for name in "${names[@]}"; do
    echo "== bench.$name"
    "$root/.venv/bin/python" -m "bench.$name"
done
