# shellcheck shell=bash
# lab_test RELEASE TEST [NAME...]: the lab tests of tests/TEST.rs against the running lab of
# RELEASE (pacific, reef, tentacle), the named ones by exact name (all of the file when none is
# named); the output is also kept in target/lab-RELEASE-TEST.log. Sourced by scripts/test and
# scripts/lab-long; messages start with "$PROG: ".
lab_test() {
    local release=$1 test=$2 log
    shift 2
    mkdir -p target
    log=target/lab-$release-$test.log
    CEPH_LAB_RELEASE=$release CRB_LAB=1 cargo test --features librados --test "$test" -- \
        --include-ignored --test-threads=1 --nocapture --exact "$@" 2>&1 | tee "$log"
    # A renamed test matches nothing, and `--exact` then runs none without failing: count them.
    if (($# > 0)) && ! grep -Eq "^running $# tests?$" "$log"; then
        echo "${PROG:-${0##*/}}: expected $# test(s) of tests/$test.rs on $release ($*); see $log" >&2
        exit 1
    fi
}
