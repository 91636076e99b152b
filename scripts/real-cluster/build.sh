#!/bin/sh
# Builds the real Kubernetes components the e2e stage runs, from Go modules, once per machine:
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl  (k8s.io/kubernetes)
#   etcd (go.etcd.io/etcd/server/v3)  containerd containerd-shim-runc-v2 ctr (containerd/v2)
#   crictl (sigs.k8s.io/cri-tools)
# into $RDP_K8S_CACHE/<k8s version>/bin, and prints the versions. A second run with the same
# versions finds bin/.complete and builds nothing. runc is Debian's (/usr/sbin/runc).
#
#   sh scripts/real-cluster/build.sh [K8S_VERSION]     (default 1.37.2; 1.34.4 is the oldest)
#
# The Go used is named by path (GO, default /usr/local/go/bin/go: Debian's golang-go may put
# Go 1.19 first on PATH). Module and build caches are Go's own (go env GOMODCACHE GOCACHE).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=${1:-${K8S_VERSION:-1.37.2}}
GO=${GO:-/usr/local/go/bin/go}
[ -x "$GO" ] || GO=$(command -v go)
case $K8S_VERSION in
1.34.*) CONTAINERD=${CONTAINERD_VERSION:-v2.2.9} CRICTL=${CRICTL_VERSION:-v1.34.0} ;;
*)      CONTAINERD=${CONTAINERD_VERSION:-v2.4.2} CRICTL=${CRICTL_VERSION:-v1.37.0} ;;
esac
ETCD=${ETCD_VERSION:-v3.6.16}
cache=${RDP_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dp/k8s}
top=$cache/v$K8S_VERSION
bin=$top/bin
stamp="k8s v$K8S_VERSION, etcd $ETCD, containerd $CONTAINERD, crictl $CRICTL, $("$GO" version | cut -d' ' -f3)"
if [ -f "$bin/.complete" ] && [ "$(cat "$bin/.complete")" = "$stamp" ]; then
	echo "real-cluster: cached in $bin ($stamp)"
	exit 0
fi
mkdir -p "$bin" "$top/k8s" "$top/etcd"
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" GOTOOLCHAIN=local
t0=$(date +%s)
step() { echo "real-cluster: $* ($(( $(date +%s) - t0 )) s)"; }

# --- Kubernetes: a wrapper module replacing each staging module by its published version.
minor=${K8S_VERSION#1.}; minor=${minor%%.*}
sver=v0.${K8S_VERSION#1.}
cd "$top/k8s"
rm -f go.mod go.sum
cp "$here/k8s/tools.go" .
printf 'module rdp.local/k8sbin\n\ngo 1.26.0\n\n' >go.mod
# The godebug line of the release's own go.mod (a dependency's is not inherited).
step "k8s.io/kubernetes@v$K8S_VERSION: module graph"
upstream=$(cd / && "$GO" mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
	sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
grep '^godebug ' "$upstream" >>go.mod || true
"$GO" mod edit -require="k8s.io/kubernetes@v$K8S_VERSION"
sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*|\1|p' "$upstream" |
while read -r m; do "$GO" mod edit -replace="$m=$m@$sver"; done
"$GO" mod tidy
ld="-s -w"
for kv in gitVersion=v$K8S_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean \
	gitCommit=0000000000000000000000000000000000000000 buildDate=1970-01-01T00:00:00Z; do
	ld="$ld -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
step "building kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
"$GO" build -p 2 -ldflags "$ld" -o "$bin/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl

# --- etcd: server/go.mod has replace lines, so `go install` is refused; a 1-file wrapper.
step "etcd $ETCD"
cd "$top/etcd"
rm -f go.mod go.sum
cp "$here/etcd/main.go" .
printf 'module rdp.local/etcdbin\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD" >go.mod
"$GO" mod tidy
"$GO" build -ldflags "-s -w" -o "$bin/etcd" .

# --- containerd (CRI and CDI built in), its runc shim, ctr; crictl. No replace lines there.
step "containerd $CONTAINERD, crictl $CRICTL"
GOBIN=$bin "$GO" install -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD" \
	-tags 'no_btrfs urfave_cli_no_docs' \
	"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD" \
	"github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD"
GOBIN=$bin "$GO" install -ldflags "-s -w" -tags 'no_grpc urfave_cli_no_docs' \
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD"
GOBIN=$bin "$GO" install -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL" \
	"sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL"
echo "$stamp" >"$bin/.complete"
step "built ($stamp); $(du -sh "$bin" | cut -f1) in $bin"
