// `etcdutl snapshot restore`: a new member's data directory from a snapshot file (of etcd-ts, or of
// etcd itself: see import_etcd.ts), as etcd builds it. The database keeps every key, revision,
// lease, user and alarm; the membership is replaced by the one --initial-cluster names (a new
// cluster, new IDs computed as etcd does), and the Raft log starts from a snapshot at index N =
// number of members, term 1, with the consistent index at N, so the restored state is what the
// first leader of the new cluster serves.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import { Backend, dbFileFormat } from '../backend/backend';
import type { Logger } from '../log';
import { computeClusterId, computeMemberId } from '../membership/ids';
import { Members, type Member } from '../membership/members';
import { MvccStore } from '../mvcc/store';
import { Wal } from '../wal/wal';
import { importEtcdDb } from './import_etcd';
import { EtcdutlError } from './errors';
import { copyVerifiedDb } from './snapshot_file';
import { fsyncDir, mkdirDurable } from '../runtime/fsync';

export interface RestoreOptions {
  snapshotPath: string;
  name: string;
  /** Default: `<name>.etcd`. Must not exist. */
  dataDir: string;
  /** Default: `<dataDir>/member/wal`. Must not exist when given. */
  walDir: string;
  /** --initial-cluster, parsed: member name -> its peer URLs. */
  initialCluster: ReadonlyMap<string, readonly string[]>;
  initialClusterToken: string;
  /** --initial-advertise-peer-urls of this member. */
  peerUrls: readonly string[];
  skipHashCheck: boolean;
  /** --bump-revision (with --mark-compacted): 0 leaves revisions as they are. */
  bumpRevision: number;
}

export interface RestoreResult {
  memberId: bigint;
  clusterId: bigint;
  /** The Raft index (and consistent index) the new member starts from. */
  index: number;
}

/** etcd's ServerConfig.VerifyBootstrap, the parts that apply to a restore. */
function verifyBootstrap(o: RestoreOptions): void {
  const own = o.initialCluster.get(o.name);
  if (own === undefined) throw new EtcdutlError(`couldn't find local name "${o.name}" in the initial cluster configuration`);
  const a = [...own].sort().join(',');
  const b = [...o.peerUrls].sort().join(',');
  if (a !== b) {
    throw new EtcdutlError(`--initial-cluster has ${o.name}=${a} but missing from --initial-advertise-peer-urls=${b}`);
  }
  const seen = new Map<string, string>();
  for (const [name, urls] of o.initialCluster) {
    for (const u of urls) {
      const other = seen.get(u);
      if (other !== undefined) throw new EtcdutlError(`duplicate URL ${u} for members ${other} and ${name} in --initial-cluster`);
      seen.set(u, name);
    }
  }
}

export async function restoreSnapshot(o: RestoreOptions, log: Logger): Promise<RestoreResult> {
  verifyBootstrap(o);
  if (fs.existsSync(o.dataDir)) throw new EtcdutlError(`data-dir "${o.dataDir}" exists`);
  const defaultWalDir = path.join(o.dataDir, 'member', 'wal');
  if (o.walDir !== defaultWalDir && fs.existsSync(o.walDir)) throw new EtcdutlError(`wal-dir "${o.walDir}" exists`);
  if (!fs.existsSync(o.snapshotPath)) throw new EtcdutlError(`stat ${o.snapshotPath}: no such file or directory`);
  const format = dbFileFormat(o.snapshotPath);
  if (format !== 'lmdb' && format !== 'bbolt') throw new EtcdutlError(`${o.snapshotPath} is not a snapshot file (no database header)`);

  const snapDir = path.join(o.dataDir, 'member', 'snap');
  log.info('restoring snapshot', { path: o.snapshotPath, 'wal-dir': o.walDir, 'data-dir': o.dataDir, 'snap-dir': snapDir });
  const members: Member[] = [];
  for (const urls of o.initialCluster.values()) {
    members.push({ id: computeMemberId([...urls], o.initialClusterToken), name: '', peerUrls: [...urls], clientUrls: [], isLearner: false });
  }
  members.sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  const memberId = computeMemberId([...o.peerUrls], o.initialClusterToken);
  const clusterId = computeClusterId(members.map((m) => m.id));
  const index = members.length;
  assert(index > 0 && members.some((m) => m.id === memberId));

  try {
    mkdirDurable(snapDir);
    const dbPath = path.join(snapDir, 'db');
    // A snapshot of etcd itself is read into a new database; one of ours is the database.
    const copyPath = format === 'bbolt' ? path.join(snapDir, 'etcd-snapshot.bbolt') : dbPath;
    copyVerifiedDb(o.snapshotPath, copyPath, o.skipHashCheck);

    const backend = Backend.open(dbPath, { flushIntervalMs: 0 });
    try {
      if (format === 'bbolt') {
        importEtcdDb(copyPath, backend, log);
        fs.rmSync(copyPath);
      }
      const ms = new Members(backend.subDb('members'), backend.subDb('members_removed'));
      backend.batch(() => {
        ms.clear();
        for (const m of members) ms.add(m);
        backend.resetConsistentIndex(index);
      });
      if (o.bumpRevision > 0) {
        const { latest, bumped } = await MvccStore.bumpRevisionForRestore(backend, o.bumpRevision);
        log.info('bumping latest revision', { 'latest-revision': latest, 'bump-amount': o.bumpRevision, 'new-latest-revision': bumped });
        log.info('marking revision compacted', { revision: bumped });
      }
      await backend.flushed();
    } finally {
      await backend.close();
    }
    // The server makes its own lock file; a restored directory holds only what etcd's does.
    fs.rmSync(`${dbPath}-lock`, { force: true });
    // The database's directory entry (its data was fsynced by the copy and the flush).
    fsyncDir(snapDir);

    mkdirDurable(o.walDir);
    const wal = Wal.open(o.walDir);
    try {
      await wal.create({ memberId, clusterId, name: o.name });
      const voters = members.map((m) => m.id);
      await wal.save({ term: 1, vote: voters[0], commit: index }, [], {
        data: Buffer.alloc(0),
        metadata: { index, term: 1, confState: { voters, learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } },
      });
    } finally {
      await wal.close();
    }
  } catch (e) {
    // Leave nothing a later start would take for a member.
    fs.rmSync(o.dataDir, { recursive: true, force: true });
    if (o.walDir !== defaultWalDir) fs.rmSync(o.walDir, { recursive: true, force: true });
    throw e;
  }
  log.info('restored snapshot', { path: o.snapshotPath, 'wal-dir': o.walDir, 'data-dir': o.dataDir, 'snap-dir': snapDir });
  return { memberId, clusterId, index };
}
