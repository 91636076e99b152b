#!/bin/sh
# Builds tests/tools/cdi-validate (main.go) into OUT, offline, in GOPATH mode against Debian's
# packaged sources (/usr/share/gocode): golang-go and
# golang-github-container-orchestrated-devices-container-device-interface-dev (the reference CDI
# library v0.5.2 with its JSON schema; scripts/install-deps.sh). Exit status 3 (nothing built)
# when go or the package is missing, with the reason on stderr.
#   tests/tools/cdi-validate/build.sh OUT
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT}
gocode=/usr/share/gocode
lib=$gocode/src/github.com/container-orchestrated-devices/container-device-interface
# Debian's own Go (golang-go: 1.19), named by path: a newer Go first on PATH (the machine's
# /usr/local/go) is not the one Debian's packaged sources are kept for.
GO=${GO_DEBIAN:-/usr/lib/go-1.19/bin/go}
[ -x "$GO" ] || GO=$(command -v go || true)
if [ -z "$GO" ]; then
	echo "cdi-validate: no go (Debian package golang-go)" >&2
	exit 3
fi
if [ ! -f "$lib/pkg/cdi/spec.go" ] || [ ! -f "$lib/schema/schema.json" ]; then
	echo "cdi-validate: no $lib (Debian package" \
		"golang-github-container-orchestrated-devices-container-device-interface-dev)" >&2
	exit 3
fi
work=$(dirname "$out")/cdi-validate-go
rm -rf "$work/src"
mkdir -p "$work/src/cdi-validate" "$(dirname "$out")"
cp "$here/main.go" "$work/src/cdi-validate/"
export GO111MODULE=off GOPATH="$work:$gocode" GOCACHE="$work/cache" GOPROXY=off GOFLAGS= \
	CGO_ENABLED=0
cd "$work/src/cdi-validate"
"$GO" build -trimpath -o "$out" .
