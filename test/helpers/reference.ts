// The real etcd of today (3.6 and 3.7), built from Go modules by scripts/reference/install.sh at the
// versions pinned in scripts/reference/v3.6/go.mod and scripts/reference/v3.7/go.mod, into
// ${ETCD_REFERENCE_CACHE:-/var/cache/etcd-ts-reference}/<line>/bin. A test that needs one calls
// referenceEtcd(line): a missing or outdated build is an error that says how to make it, never a skip.
import fs from 'node:fs';
import path from 'node:path';

const REPO_ROOT = path.resolve(__dirname, '..', '..');

export const REFERENCE_LINES = ['3.6', '3.7'] as const;
export type ReferenceLine = (typeof REFERENCE_LINES)[number];

export interface ReferenceBinaries {
  readonly line: ReferenceLine;
  /** The exact version pinned in scripts/reference/v<line>/go.mod, e.g. `v3.7.4`. */
  readonly version: string;
  /** The directory that holds the four binaries. */
  readonly binDir: string;
  readonly etcd: string;
  readonly etcdctl: string;
  readonly etcdutl: string;
  /** etcd's own benchmark tool (tools/benchmark) of that line. */
  readonly benchmark: string;
}

/** Where install.sh puts the builds (the same variable and default as the script). */
export function referenceCacheDir(): string {
  return process.env['ETCD_REFERENCE_CACHE'] || '/var/cache/etcd-ts-reference';
}

/** The version of go.etcd.io/etcd/server/v3 that scripts/reference/v<line>/go.mod pins. */
export function pinnedReferenceVersion(line: ReferenceLine): string {
  const goMod = fs.readFileSync(path.join(REPO_ROOT, 'scripts', 'reference', `v${line}`, 'go.mod'), 'utf8');
  const m = /^\s*go\.etcd\.io\/etcd\/server\/v3 (v\S+)/m.exec(goMod);
  if (!m) throw new Error(`scripts/reference/v${line}/go.mod pins no go.etcd.io/etcd/server/v3`);
  return m[1]!;
}

/** Paths of the reference binaries of one line; throws when they are not built or are outdated. */
export function referenceEtcd(line: ReferenceLine): ReferenceBinaries {
  const dir = path.join(referenceCacheDir(), line);
  const binDir = path.join(dir, 'bin');
  const version = pinnedReferenceVersion(line);
  const fix = 'run `bash scripts/reference/install.sh` (builds etcd 3.6 and 3.7 from Go modules, a few minutes cold)';
  const bins = {
    etcd: path.join(binDir, 'etcd'),
    etcdctl: path.join(binDir, 'etcdctl'),
    etcdutl: path.join(binDir, 'etcdutl'),
    benchmark: path.join(binDir, 'benchmark'),
  };
  for (const [name, file] of Object.entries(bins)) {
    try {
      fs.accessSync(file, fs.constants.X_OK);
    } catch {
      throw new Error(`reference etcd ${line} (${version}): ${name} is not built (${file} missing): ${fix}`);
    }
  }
  let built = '';
  try {
    built = fs.readFileSync(path.join(dir, 'VERSION'), 'utf8').trim();
  } catch {
    // an unfinished or foreign directory: reported below
  }
  if (built !== version) {
    throw new Error(`reference etcd ${line}: ${dir} holds ${built || 'an unknown version'}, but ${version} is pinned: ${fix}`);
  }
  return { line, version, binDir, ...bins };
}
