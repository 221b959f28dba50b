#!/usr/bin/env bash
# The peer tools Debian ships, installed by name (needs root): likwid-bench
# for peak flop/s and STREAM-style kernels. Peers Debian does not ship
# (reference stream.c, lmbench's lat_mem_rd, core-to-core-latency) are built
# by hand outside this repository and passed to the scripts by path.
set -eu
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq likwid
