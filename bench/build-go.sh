#!/bin/sh
# Builds the two Go programs of the benchmark into OUT (default build/bench/bin), offline, in
# GOPATH mode against Debian's packaged sources (/usr/share/gocode): golang-go,
# golang-google-grpc-dev, golang-google-protobuf-dev + protoc-gen-go (scripts/install-deps.sh bench).
# The Go messages are generated from the project's own src/rpc/proto/deviceplugin.proto (the
# go_package is given with protoc-gen-go's M option, so src/rpc/proto stays untouched).
#   bench/build-go.sh [OUT]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${1:-$repo/build/bench/bin}
work=$(dirname "$out")/go
mkdir -p "$out"
rm -rf "$work/src"
mkdir -p "$work/src/rdpbench/v1beta1" "$work/src/rdpbench/go-floor" "$work/src/rdpbench/go-kubelet"
protoc --go_out="$work/src/rdpbench/v1beta1" --go_opt=paths=source_relative \
	--go_opt=Mdeviceplugin.proto=rdpbench/v1beta1 -I "$repo/src/rpc/proto" "$repo/src/rpc/proto/deviceplugin.proto"
cp "$here/go-proto/"*.go "$work/src/rdpbench/v1beta1/"
cp "$here/go-floor/"*.go "$work/src/rdpbench/go-floor/"
cp "$here/go-kubelet/"*.go "$work/src/rdpbench/go-kubelet/"
# Debian's own Go (golang-go: 1.19), named by path: the machine's newer Go may come first on PATH.
GO=${GO_DEBIAN:-/usr/lib/go-1.19/bin/go}
[ -x "$GO" ] || GO=go
export GO111MODULE=off GOPATH="$work:/usr/share/gocode" GOCACHE="$work/cache" GOPROXY=off \
	GOFLAGS= CGO_ENABLED=0
# Static, stripped (-s -w), as a Go plugin's release binary is built.
cd "$work/src/rdpbench"
"$GO" build -trimpath -ldflags="-s -w" -o "$out/go-floor" ./go-floor
"$GO" build -trimpath -o "$out/go-kubelet" ./go-kubelet
