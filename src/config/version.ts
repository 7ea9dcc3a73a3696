// The etcd release this server presents itself as. kube-apiserver and clients gate features
// on it (kube-apiserver needs >= 3.5.13), so it follows the newest 3.6 patch release.

/** etcd 3.6.14 is the newest 3.6.x release tag in etcd-io/etcd (July 2026). */
export const ETCD_VERSION = '3.6.14';
/** Cluster version as etcd reports it: major.minor.0. */
export const ETCD_CLUSTER_VERSION = '3.6.0';
/** Storage schema version etcd 3.6 writes into its backend ("3.6.0"). */
export const ETCD_STORAGE_VERSION = '3.6.0';
export const ETCD_MIN_CLUSTER_VERSION = '3.0.0';
export const ETCD_API_VERSION = '3.6';
/** We are not a build of etcd's tree; say so where etcd prints its commit. */
export const GIT_SHA = 'Not provided (etcd-ts)';

const GO_ARCH: Readonly<Record<string, string>> = { x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x' };

/** `etcd --version` output (4 lines). The "Go Version" line names the Node runtime instead. */
export function versionText(): string {
  const arch = GO_ARCH[process.arch] ?? process.arch;
  return (
    `etcd Version: ${ETCD_VERSION}\n` +
    `Git SHA: ${GIT_SHA}\n` +
    `Go Version: node${process.versions.node}\n` +
    `Go OS/Arch: ${process.platform}/${arch}\n`
  );
}
