#!/usr/bin/env bash
# The rebalance, then four recovery ops per PG 20 s into it (after the lever's entry holds).
set -e
cd /work/main
scripts/ceph-lab rebalance-start 3 0.2
setsid bash -c 'sleep 20; ceph config set osd osd_recovery_max_single_start 4; echo "$(date +%T) single_start 4" >> /tmp/lab/ss4.log' </dev/null >/dev/null 2>&1 &
