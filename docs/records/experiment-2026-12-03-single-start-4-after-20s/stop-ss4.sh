#!/usr/bin/env bash
cd /work/main
ceph config rm osd osd_recovery_max_single_start || true
echo "$(date +%T) single_start removed" >> /tmp/lab/ss4.log
scripts/ceph-lab rebalance-stop
