// etcd's own server command, built from go.etcd.io/etcd/server/v3 at a pinned version
// (scripts/real-cluster/build.sh): that module's go.mod has replace lines, so it cannot be
// built with `go install pkg@version`.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
