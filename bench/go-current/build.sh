#!/bin/sh
# Builds the benchmark's two Go programs (bench/go-kubelet, bench/go-floor) in module mode against
# the current grpc-go and protobuf-go (pinned in bench/go-current/go.mod + go.sum, fetched from
# the Go module proxy), beside bench/build-go.sh's build against Debian's older packages, which
# stays the compatibility floor. The messages are generated from src/rpc/proto/deviceplugin.proto
# by protoc with the protoc-gen-go of that same protobuf-go module. The module and build caches
# live under OUT's directory (go-current/), so a rebuild is offline and fast. Go is the machine's
# /usr/local/go (GO_CURRENT overrides). Exit status 3 (nothing built) when that Go is missing; a
# failed download (no proxy) is exit status 1 with go's message.
#   bench/go-current/build.sh OUT
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench=$(dirname "$here")
repo=$(dirname "$bench")
out=${1:?usage: build.sh OUT}
GO=${GO_CURRENT:-/usr/local/go/bin/go}
if [ ! -x "$GO" ]; then
	echo "go-current: no $GO (the current Go toolchain, scripts/install-deps.sh)" >&2
	exit 3
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(dirname "$out")/go-current
src=$work/src
rm -rf "$src"
mkdir -p "$src/v1beta1" "$src/go-floor" "$src/go-kubelet" "$work/bin"
cp "$here/go.mod" "$here/go.sum" "$src/"
export GO111MODULE=on GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod" \
	GOCACHE="$work/cache" GOFLAGS="-mod=readonly -modcacherw" GOTOOLCHAIN=local CGO_ENABLED=0 \
	GOPROXY=${GOPROXY:-https://proxy.golang.org} GONOSUMDB= GOSUMDB=${GOSUMDB:-sum.golang.org}
cd "$src"
"$GO" build -trimpath -o "$work/bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
protoc --plugin=protoc-gen-go="$work/bin/protoc-gen-go" --go_out="$src/v1beta1" \
	--go_opt=paths=source_relative --go_opt=Mdeviceplugin.proto=rdpbench/v1beta1 \
	-I "$repo/src/rpc/proto" "$repo/src/rpc/proto/deviceplugin.proto"
cp "$bench/go-proto/"*.go "$src/v1beta1/"
cp "$bench/go-floor/"*.go "$src/go-floor/"
cp "$bench/go-kubelet/"*.go "$src/go-kubelet/"
"$GO" build -trimpath -ldflags="-s -w" -o "$out/go-floor" ./go-floor
"$GO" build -trimpath -o "$out/go-kubelet" ./go-kubelet
"$GO" version -m "$out/go-kubelet" | awk '$1 == "dep" && $2 ~ /^google.golang.org\// { printf "go-current: %s %s\n", $2, $3 }'
