#!/usr/bin/env bash
# Lint: ruff over the whole repo; mypy (strict) over coordinator/ and log/.
#   --ruff-only  skip mypy
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"

"$root/.venv/bin/ruff" check .
if [[ "${1:-}" != "--ruff-only" ]]; then
    # Paths come from [tool.mypy] files in pyproject.toml.
    "$root/.venv/bin/mypy"
fi
