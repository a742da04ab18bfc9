#!/usr/bin/env bash
# Prepare a machine to run raygroups: check Python 3.11 and Java 17, create .venv,
# and install the project (editable, with dev tools) when pyproject.toml changed.
# Idempotent: a second run with nothing changed takes about a second.
#   RAYGROUPS_INSTALL_JAVA=1  install Java 17 and promtool with apt-get when missing (CI does this).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.raygroups-install-stamp"

die() { echo "setup: $*" >&2; exit 1; }

# Serialise concurrent runs (make demo and make test at once) so pip never races itself.
exec 9<"$root/scripts"
flock 9

command -v python3.11 >/dev/null 2>&1 \
    || die "Python 3.11 is required (python3.11 not found on PATH)."

java_major() {
    # `java -version` prints e.g. 'openjdk version "17.0.15"' or '"1.8.0_392"' on stderr.
    local v
    v="$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
    v="${v#1.}"
    echo "${v%%[.+-]*}"
}

java_ok() {
    command -v java >/dev/null 2>&1 || return 1
    local major
    major="$(java_major)"
    [[ "$major" =~ ^[0-9]+$ ]] && (( major >= 17 ))
}

if ! java_ok && [[ "${RAYGROUPS_INSTALL_JAVA:-0}" == 1 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Java 17 (openjdk-17-jre-headless) with apt-get"
    sudo_cmd=""
    [[ "$(id -u)" -ne 0 ]] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
# promtool (Debian's `prometheus` package) checks the shipped alert rules in the tests.
if ! command -v promtool >/dev/null 2>&1 && [[ "${RAYGROUPS_INSTALL_JAVA:-0}" == 1 ]] \
        && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing promtool (prometheus) with apt-get"
    sudo_cmd=""
    [[ "$(id -u)" -ne 0 ]] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq || true
    $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
        >/dev/null || echo "setup: promtool did not install; the alert rules are checked by the parser only"
fi
java_ok || die "Java 17 is required for Spark (RayDP); install e.g. \`apt-get install openjdk-17-jre-headless\`$(
    command -v java >/dev/null 2>&1 && echo " (found Java $(java_major))")."

# A venv copied from another path or built by another Python has a dead interpreter: rebuild it.
if [[ -d "$venv" ]] && ! "$venv/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
    echo "setup: .venv is unusable here, recreating it"
    rm -rf "$venv"
fi
if [[ ! -d "$venv" ]]; then
    echo "setup: creating .venv with python3.11"
    python3.11 -m venv "$venv"
fi

# The editable install points at this checkout: a moved repo must reinstall too.
want="$( { cat "$root/pyproject.toml"; echo "$root"; } | sha256sum | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
if [[ "$want" != "$have" ]]; then
    echo "setup: installing raygroups and its dependencies into .venv (a few minutes on a fresh machine)"
    started=$SECONDS
    # The stamp goes only after a successful install, so a failed one is retried next time.
    rm -f "$stamp"
    # pip's full output goes to a log, shown only when the install fails.
    pip_log="$venv/pip-install.log"
    if ! "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
        -e "${root}[dev]" >"$pip_log" 2>&1; then
        tail -n 40 "$pip_log" >&2
        die "pip install failed; full log: $pip_log"
    fi
    echo "$want" >"$stamp"
    echo "setup: installed in $((SECONDS - started)) s"
fi
