#!/bin/sh
# SPDX-License-Identifier: MIT
# Screenshots of the dashboard's graphs in Prometheus' own web UI, taken with Debian's headless
# Chromium (Grafana is not packaged here): docs/images/dashboard-{throughput,congestion,errors,
# plugin}.png. Needs Debian's `prometheus` and `chromium` packages and a build with fixtures.
#   scripts/dashboard-screenshot.sh                    # build/rdma-dp, build/fixtures
#   RDMA_DP=build-check/rdma-dp RDP_FIXTURES=build-check/fixtures SECONDS_RUN=60 \
#     scripts/dashboard-screenshot.sh [extra options of dashboard-screenshot.py]
# Takes about SECONDS_RUN (default 60) + 30 seconds.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
RDMA_DP=${RDMA_DP:-$repo/build/rdma-dp}
RDP_FIXTURES=${RDP_FIXTURES:-$repo/build/fixtures}
SECONDS_RUN=${SECONDS_RUN:-60}
for f in "$RDMA_DP" "$RDP_FIXTURES/dgx-h100/sys" /usr/bin/prometheus /usr/bin/chromium; do
	if [ ! -e "$f" ]; then
		echo "dashboard-screenshot: $f not found (build first; apt-get install prometheus chromium)" >&2
		exit 1
	fi
done
exec /usr/bin/python3 "$here/dashboard-screenshot.py" --rdma-dp "$RDMA_DP" \
	--fixtures "$RDP_FIXTURES" --seconds "$SECONDS_RUN" --out "$repo/docs/images" "$@"
