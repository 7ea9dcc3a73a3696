// Entry point of bin/etcdutl: etcd's offline tool, for snapshot files of this server and of etcd,
// and a data directory no server is using. Command line as etcdutl's (cobra/pflag):
// `snapshot restore <file> [flags]`, `snapshot status <file> [-w simple|json|table|fields]`,
// `defrag --data-dir <dir>`, `version`. Errors print "Error: ..." and exit 1, as etcdutl does.
import path from 'node:path';
import { ETCD_API_VERSION, ETCD_VERSION } from '../config/version';
import { parseEtcdUrlList, parseInitialCluster } from '../config/urls';
import { createLogger } from '../log';
import { defragDataDir } from './defrag';
import { restoreSnapshot } from './restore';
import { formatStatus, snapshotStatus } from './status';
import { BackendFormatError } from '../backend/backend';
import { BboltError } from '../backend/bbolt_reader';
import { EtcdutlError } from './errors';

class UsageError extends Error {}

type FlagKind = 'string' | 'bool';
interface FlagDef {
  kind: FlagKind;
  dflt: string;
  short?: string;
}

const GLOBAL_FLAGS: Record<string, FlagDef> = {
  'write-out': { kind: 'string', dflt: 'simple', short: 'w' },
  help: { kind: 'bool', dflt: 'false', short: 'h' },
};

const RESTORE_FLAGS: Record<string, FlagDef> = {
  'data-dir': { kind: 'string', dflt: '' },
  'wal-dir': { kind: 'string', dflt: '' },
  name: { kind: 'string', dflt: 'default' },
  'initial-cluster': { kind: 'string', dflt: 'default=http://localhost:2380' },
  'initial-cluster-token': { kind: 'string', dflt: 'etcd-cluster' },
  'initial-advertise-peer-urls': { kind: 'string', dflt: 'http://localhost:2380' },
  'skip-hash-check': { kind: 'bool', dflt: 'false' },
  'bump-revision': { kind: 'string', dflt: '0' },
  'mark-compacted': { kind: 'bool', dflt: 'false' },
};

interface Parsed {
  positional: string[];
  values: Map<string, string>;
}

/** pflag's parsing: flags anywhere, `--f=v`, `--f v`, `-w v`, `-w=v`, bool flags alone or `=true|false`, `--` ends flags. */
function parseArgs(args: readonly string[], defs: Record<string, FlagDef>): Parsed {
  const values = new Map<string, string>();
  for (const [name, d] of Object.entries(defs)) values.set(name, d.dflt);
  const byShort = new Map<string, string>();
  for (const [name, d] of Object.entries(defs)) if (d.short) byShort.set(d.short, name);
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') {
      positional.push(...args.slice(i + 1));
      break;
    }
    if (!a.startsWith('-') || a === '-') {
      positional.push(a);
      continue;
    }
    const long = a.startsWith('--');
    const body = a.slice(long ? 2 : 1);
    const eq = body.indexOf('=');
    const key = eq >= 0 ? body.slice(0, eq) : body;
    const name = long ? key : byShort.get(key);
    const def = name === undefined ? undefined : defs[name];
    if (name === undefined || def === undefined) throw new UsageError(long ? `unknown flag: --${key}` : `unknown shorthand flag: '${key}' in ${a}`);
    if (def.kind === 'bool') {
      const v = eq >= 0 ? body.slice(eq + 1) : 'true';
      if (!['true', 'false', '1', '0', 't', 'f', 'TRUE', 'FALSE', 'True', 'False'].includes(v)) {
        throw new UsageError(`invalid argument "${v}" for "--${name}" flag: strconv.ParseBool: parsing "${v}": invalid syntax`);
      }
      values.set(name, ['true', '1', 't', 'TRUE', 'True'].includes(v) ? 'true' : 'false');
      continue;
    }
    if (eq >= 0) {
      values.set(name, body.slice(eq + 1));
    } else {
      if (i + 1 >= args.length) throw new UsageError(`flag needs an argument: --${name}`);
      values.set(name, args[++i]);
    }
  }
  return { positional, values };
}

const USAGE = `etcdutl: an administrative command line tool for etcd-ts data (etcd's etcdutl).

Usage:
  etcdutl snapshot restore <filename> [flags]
  etcdutl snapshot status <filename> [-w simple|json|table|fields]
  etcdutl defrag --data-dir <dir>
  etcdutl version

snapshot restore flags:
      --data-dir string                      Path to the output data directory (default "<name>.etcd")
      --wal-dir string                       Path to the WAL directory (use --data-dir if none given)
      --name string                          Human-readable name for this member (default "default")
      --initial-cluster string               Initial cluster configuration for restore bootstrap (default "default=http://localhost:2380")
      --initial-cluster-token string         Initial cluster token for the etcd cluster during restore bootstrap (default "etcd-cluster")
      --initial-advertise-peer-urls string   List of this member's peer URLs to advertise to the rest of the cluster (default "http://localhost:2380")
      --skip-hash-check                      Ignore snapshot integrity hash value (required if copied from data directory)
      --bump-revision uint                   How much to increase the latest revision after restore
      --mark-compacted                       Mark the latest revision after restore as the point of scheduled compaction (required if --bump-revision > 0, disallowed otherwise)

Global flags:
  -w, --write-out string   set the output format (fields, json, simple, table) (default "simple")
  -h, --help               help for etcdutl

Snapshot files are what \`etcdctl snapshot save\` writes, from etcd-ts (an LMDB database and its
sha256) or from etcd itself (bbolt): a restore of either makes an etcd-ts data directory.
`;

async function run(argv: readonly string[]): Promise<number> {
  const defs = { ...GLOBAL_FLAGS, ...RESTORE_FLAGS };
  const { positional, values } = parseArgs(argv, defs);
  const str = (n: string): string => {
    const v = values.get(n);
    if (v === undefined) throw new Error(`flag ${n} not defined`);
    return v;
  };
  if (str('help') === 'true' || positional.length === 0) {
    process.stdout.write(USAGE);
    return 0;
  }
  const [cmd, sub, ...rest] = positional;
  if (cmd === 'version') {
    process.stdout.write(`etcdutl version: ${ETCD_VERSION}\nAPI version: ${ETCD_API_VERSION}\n`);
    return 0;
  }
  if (cmd === 'defrag') {
    const dataDir = str('data-dir');
    if (dataDir === '') throw new UsageError('required flag(s) "data-dir" not set');
    try {
      await defragDataDir(dataDir);
    } catch (e) {
      throw new EtcdutlError(`Failed to defragment etcd data[${dataDir}] (${(e as Error).message})`);
    }
    return 0;
  }
  if (cmd !== 'snapshot') throw new UsageError(`unknown command "${cmd}" for "etcdutl"`);
  if (sub === 'status') {
    if (rest.length !== 1) throw new UsageError('snapshot status requires exactly one argument');
    const st = await snapshotStatus(rest[0]);
    process.stdout.write(formatStatus(st, str('write-out')));
    return 0;
  }
  if (sub === 'restore') {
    if (rest.length !== 1) throw new UsageError('snapshot restore requires exactly one argument');
    const bumpText = str('bump-revision');
    if (!/^\d+$/.test(bumpText) || !Number.isSafeInteger(Number(bumpText))) {
      throw new UsageError(`invalid argument "${bumpText}" for "--bump-revision" flag: strconv.ParseUint: parsing "${bumpText}": invalid syntax`);
    }
    const bumpRevision = Number(bumpText);
    const markCompacted = str('mark-compacted') === 'true';
    if ((bumpRevision === 0 && markCompacted) || (bumpRevision > 0 && !markCompacted)) {
      throw new UsageError('--mark-compacted required if --revision-bump > 0');
    }
    const name = str('name');
    const dataDir = str('data-dir') || `${name}.etcd`;
    const walDir = str('wal-dir') || path.join(dataDir, 'member', 'wal');
    let initialCluster: Map<string, string[]>;
    let peerUrls: string[];
    try {
      initialCluster = new Map([...parseInitialCluster(str('initial-cluster'))].map(([n, urls]) => [n, urls.map((u) => u.text)]));
      peerUrls = parseEtcdUrlList(str('initial-advertise-peer-urls')).map((u) => u.text);
    } catch (e) {
      throw new EtcdutlError((e as Error).message);
    }
    const log = createLogger({ level: 'info', outputs: ['stderr'] });
    try {
      await restoreSnapshot(
        {
          snapshotPath: rest[0],
          name,
          dataDir,
          walDir,
          initialCluster,
          initialClusterToken: str('initial-cluster-token'),
          peerUrls,
          skipHashCheck: str('skip-hash-check') === 'true',
          bumpRevision,
        },
        log,
      );
    } finally {
      log.flush();
    }
    return 0;
  }
  throw new UsageError(sub === undefined ? 'snapshot needs a subcommand: restore or status' : `unknown command "${sub}" for "etcdutl snapshot"`);
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    // What the file or the command line is wrong about, in a line; a broken invariant (a bug) with its stack.
    const plain = e instanceof UsageError || e instanceof EtcdutlError || e instanceof BboltError || e instanceof BackendFormatError || (e as NodeJS.ErrnoException).code === 'ENOENT';
    if (plain) {
      process.stderr.write(`Error: ${(e as Error).message}\n`);
      process.exit(1);
    }
    process.stderr.write(`Error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
