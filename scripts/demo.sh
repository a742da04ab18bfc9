#!/usr/bin/env bash
# Run the main job: `raygroups demo`, after making sure the environment is installed.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
exec "$root/.venv/bin/raygroups" demo "$@"
