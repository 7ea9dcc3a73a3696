// The file Maintenance.Snapshot sends, in etcd's own format: a bbolt database with etcd's buckets,
// so `etcdctl snapshot status/restore` (and etcdutl) read a backup of ours, and it can be restored
// into etcd itself. Built from a point-in-time LMDB copy of our database. Bucket by bucket: "key"
// and "lease" hold the same records (our formats are etcd's); "meta" the consistent index and the
// compaction marks; "auth", "authUsers", "authRoles" the auth store as authpb messages; "members",
// "members_removed" and "alarm" as etcd writes them. Users keep their password hashes: bcrypt ones
// verify in etcd, scrypt ones (set before etcd-ts hashed with bcrypt) only here.
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { AuthStore } from '../auth/store';
import { Backend } from '../backend/backend';
import { BboltWriter } from '../backend/bbolt_writer';
import { Alarms } from '../alarm/alarms';
import { Members } from '../membership/members';
import { KEY_DB } from '../mvcc';
import { encodeMessage } from '../pb/internal';
import { nextTurn } from '../runtime/next_turn';

const META_KEYS = ['consistent_index', 'finishedCompactRev', 'scheduledCompactRev'];

/** Records copied per turn of the event loop (~2 ms; a first one before V8 optimizes: ~10 ms). */
const RECORDS_PER_TURN = 1024;

/**
 * A sub-database's records, read as views of lmdb-js's buffer and copied straight into the
 * bucket's pages (a Buffer per key and per value was 45% of a 1M-key conversion's CPU).
 */
async function addRecords(w: BboltWriter, be: Backend, name: string): Promise<void> {
  be.subDb(name); // opens it (a copy of ours has every sub-database, maybe empty)
  const bucket = w.beginBucket(name);
  const scan = be.openRecordScan(name);
  try {
    while (scan.step(RECORDS_PER_TURN, bucket.add)) await nextTurn();
  } finally {
    scan.close();
  }
  await bucket.end();
}

function sortedByKey(entries: Array<[Buffer, Buffer]>): Array<[Buffer, Buffer]> {
  return entries.sort((a, b) => Buffer.compare(a[0], b[0]));
}

/** Writes the etcd-format snapshot of the LMDB database copy `lmdbCopy` to `out` (created). */
export async function writeEtcdSnapshot(lmdbCopy: string, out: string): Promise<void> {
  const be = Backend.open(lmdbCopy, { flushIntervalMs: 0 });
  const w = new BboltWriter(out);
  try {
    await addRecords(w, be, KEY_DB);
    await addRecords(w, be, 'lease');

    const meta: Array<[Buffer, Buffer]> = [];
    for (const k of META_KEYS) {
      const v = be.metaGet(k);
      if (v !== undefined) meta.push([Buffer.from(k), v]);
    }
    await w.addBucket('meta', sortedByKey(meta));

    const auth = new AuthStore(be.subDb('auth'));
    const revision = Buffer.alloc(8);
    // etcd's auth store starts at revision 1.
    revision.writeBigUInt64BE(BigInt(Math.max(1, auth.revision())));
    await w.addBucket('auth', sortedByKey([
      [Buffer.from('authEnabled'), Buffer.from([auth.isEnabled() ? 1 : 0])],
      [Buffer.from('authRevision'), revision],
    ]));
    const users: Array<[Buffer, Buffer]> = [];
    for (const name of auth.userList()) {
      const u = auth.getUser(name);
      if (u === undefined) continue;
      users.push([Buffer.from(name), encodeMessage('authpb.User', { name: Buffer.from(name), password: Buffer.from(u.password), roles: [...u.roles].sort(), options: { noPassword: u.noPassword } })]);
    }
    await w.addBucket('authUsers', sortedByKey(users));
    const roles: Array<[Buffer, Buffer]> = [];
    for (const name of auth.roleList()) {
      roles.push([Buffer.from(name), encodeMessage('authpb.Role', { name: Buffer.from(name), keyPermission: auth.roleGet(name) })]);
    }
    await w.addBucket('authRoles', sortedByKey(roles));

    const members = new Members(be.subDb('members'), be.subDb('members_removed'));
    const memberRecords: Array<[Buffer, Buffer]> = members.list().map((m) => {
      // Go's json.Marshal of etcd's Member; the uint64 ID as exact digits.
      const learner = m.isLearner ? ',"isLearner":true' : '';
      const attrs = m.name !== '' || m.clientUrls.length > 0 ? `,"name":${JSON.stringify(m.name)},"clientURLs":${JSON.stringify(m.clientUrls)}` : '';
      return [Buffer.from(m.id.toString(16)), Buffer.from(`{"id":${m.id.toString()},"peerURLs":${JSON.stringify(m.peerUrls)}${learner}${attrs}}`)];
    });
    await w.addBucket('members', sortedByKey(memberRecords));
    const removed = members.removedIds().map((id): [Buffer, Buffer] => [Buffer.from(id.toString(16)), Buffer.from('removed')]);
    await w.addBucket('members_removed', sortedByKey(removed));

    const alarms = new Alarms(be.subDb('alarm'));
    await w.addBucket('alarm', sortedByKey(alarms.list().map((a) => [encodeMessage('etcdserverpb.AlarmMember', { memberID: a.memberId.toString(), alarm: a.alarm }), Buffer.alloc(0)])));
    w.finish();
  } catch (e) {
    w.abort();
    throw e;
  } finally {
    await be.close();
  }
}

/** The compiled worker entry (absent when running from the TypeScript sources, as the unit tests do). */
const WORKER_FILE = path.join(__dirname, 'etcd_snapshot_worker.js');

/**
 * Copies from this size on are converted on a worker thread. Starting one and loading the modules
 * there costs ~0.5 s: 100k keys (32 MB) took 1.3-1.5 s that way against 0.7-1.0 s in-thread.
 */
export const OFF_THREAD_MIN_BYTES = 64 * 1024 * 1024;

/**
 * writeEtcdSnapshot() on a worker thread of its own for a copy of `minBytes` or more, where the
 * built server has the worker's file (in-thread otherwise): at 1M keys the conversion's CPU (1.4-1.8
 * s, in steps) and closing the copy's environment (~0.2 s in one go, unmapping what was read)
 * slowed or held every request.
 */
export async function writeEtcdSnapshotOffThread(lmdbCopy: string, out: string, minBytes = OFF_THREAD_MIN_BYTES): Promise<'worker' | 'in-thread'> {
  if (!fs.existsSync(WORKER_FILE) || fs.statSync(lmdbCopy).size < minBytes) {
    await writeEtcdSnapshot(lmdbCopy, out);
    return 'in-thread';
  }
  await new Promise<void>((resolve, reject) => {
    const worker = new Worker(WORKER_FILE, { workerData: { lmdbCopy, out } });
    let answered = false;
    worker.once('message', (m: { ok: boolean; error?: string }) => {
      answered = true;
      if (m.ok) resolve();
      else reject(new Error(`snapshot conversion failed: ${m.error ?? 'unknown error'}`));
    });
    worker.once('error', (e) => {
      answered = true;
      reject(e);
    });
    worker.once('exit', (code) => {
      if (!answered) reject(new Error(`snapshot conversion worker exited with code ${code}`));
    });
  });
  return 'worker';
}
