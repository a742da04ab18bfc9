#!/usr/bin/env bash
# Run the whole test suite (or pytest with the given arguments) in the project's venv.
# Exits with pytest's code; "no tests collected" (5) is a failure too, never a pass.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
# Tests start throwaway local Ray clusters: no token file needed or written.
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"

rc=0
"$root/.venv/bin/python" -m pytest -q "$@" || rc=$?
if (( rc == 5 )); then
    echo "test: pytest collected no tests: failing" >&2
fi
exit "$rc"
