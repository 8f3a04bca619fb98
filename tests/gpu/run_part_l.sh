#!/usr/bin/env bash
# GPU verification, part L: the final measurement of the stream-ordered
# pair's overhead, parts J (like-for-like against processes without the
# collector, 16 rounds, 8 in-process runs) and K (the census of the machine's
# states, 60 processes per configuration) in one call. Results in
# $OUT/results-j.tar.gz and $OUT/results-k.tar.gz.
set -u
here=$(dirname "$0")
bash "$here/run_part_j.sh" > /dev/null 2>&1
bash "$here/run_part_k.sh" > /dev/null 2>&1
