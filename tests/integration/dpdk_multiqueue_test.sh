#!/usr/bin/env bash
# The DPDK backend on two queue pairs and two workers (issue 25): the whole
# of dpdk_veth_test.sh (ARP, ping, verified fuzzy load, fragmented counter
# replies, a real rspamd, hostile frames) with net_af_packet's qpairs=2 and
# dpdk_rss = spread, the kernel's fanout hash spreading the client flows
# over the queues; plus every queue receiving, writes forwarded to their
# owner worker and answered from its queue, counters and rate-limit buckets
# exact across the workers. See dpdk_veth_test.sh for what it needs.
#
#   tests/integration/dpdk_multiqueue_test.sh --build BUILD_DIR [--keep]
QUEUES=2 exec bash "$(dirname "$0")/dpdk_veth_test.sh" "$@"
