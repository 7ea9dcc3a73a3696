//go:build tools

// Package reference pins the real etcd 3.7 that the tests compare with: scripts/reference/install.sh
// builds these main packages from the module versions in go.mod and go.sum (etcd, etcdctl, etcdutl;
// etcd's benchmark tool is in no 3.7 module the proxy serves: 3.6's is the one for both). The tools build tag keeps this
// file out of every build; it is here so that go mod tidy keeps the requirements.
package reference

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
