//go:build tools

// Package reference pins the real etcd 3.6 that the tests compare with: scripts/reference/install.sh
// builds these main packages from the module versions in go.mod and go.sum (etcd, etcdctl, etcdutl,
// and etcd's benchmark tool). The tools build tag keeps this file out of every build; it is here
// so that go mod tidy keeps the requirements.
package reference

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
	_ "go.etcd.io/etcd/v3/tools/benchmark"
)
