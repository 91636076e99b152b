#!/bin/sh
# Builds tests/tools/cdi-validate-current (main.go) into OUT in module mode against the current
# reference CDI library (tags.cncf.io/container-device-interface, pinned in go.mod + go.sum),
# fetched from the Go module proxy. The module cache and the Go build cache live under OUT's
# directory (cdi-validate-current-go/), so a rebuild is offline and fast. Go is the machine's
# /usr/local/go (GO_CURRENT overrides; go.mod needs 1.23 or later). Exit status 3 (nothing built)
# when that Go is missing; a failed download (no proxy) is exit status 1 with go's message.
#   tests/tools/cdi-validate-current/build.sh OUT
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT}
GO=${GO_CURRENT:-/usr/local/go/bin/go}
if [ ! -x "$GO" ]; then
	echo "cdi-validate-current: no $GO (the current Go toolchain, scripts/install-deps.sh)" >&2
	exit 3
fi
work=$(cd "$(dirname "$out")" && pwd)/cdi-validate-current-go
mkdir -p "$work/src"
cp "$here/main.go" "$here/go.mod" "$here/go.sum" "$work/src/"
export GO111MODULE=on GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod" \
	GOCACHE="$work/cache" GOFLAGS="-mod=readonly -modcacherw" GOTOOLCHAIN=local CGO_ENABLED=0 \
	GOPROXY=${GOPROXY:-https://proxy.golang.org} GONOSUMDB= GOSUMDB=${GOSUMDB:-sum.golang.org}
cd "$work/src"
"$GO" build -trimpath -o "$out" .
