// A snapshot of etcd itself (bbolt) turned into an etcd-ts database: the way over from a running
// etcd (`etcdctl snapshot save` there, `etcdutl snapshot restore` here). What carries over, bucket
// by bucket: "key" (every revision of every key, tombstones included; the record formats are the
// same, each record is decoded and re-encoded canonically), the compaction marks of "meta", "lease",
// "auth"/"authUsers"/"authRoles" and "alarm". Replaced as etcd's own restore replaces them: the
// membership ("members", "members_removed", "cluster": a restore starts a new cluster) and the
// consistent index.
import assert from 'node:assert';
import { Alarms } from '../alarm/alarms';
import { AuthStore, type RoleRecord, type UserRecord } from '../auth/store';
import type { Backend } from '../backend/backend';
import { decodeLeaseRecord, encodeLeaseRecord } from '../lease/lease-record';
import type { Logger } from '../log';
import { appendKeyRecord, KEY_DB } from '../mvcc';
import { decodeKeyValue, encodeKeyValue } from '../mvcc/kv_codec';
import { bytesToRev, isTombstoneKey } from '../mvcc/revision';
import { decodeMessage } from '../pb/internal';
import { BboltError, BboltReader, type BboltEntry } from '../backend/bbolt_reader';

/** Records written per backend transaction: bounds the memory one commit holds. */
const RECORDS_PER_BATCH = 10_000;
const REV_BYTES = 17;
const META_COMPACTION_KEYS = ['scheduledCompactRev', 'finishedCompactRev'];

export interface ImportCounts {
  keyRecords: number;
  leases: number;
  users: number;
  roles: number;
  authEnabled: boolean;
}

/** Writes `entries` through `put` in bounded transactions. */
function copyInBatches(backend: Backend, entries: Iterator<BboltEntry>, put: (e: BboltEntry) => void): number {
  let n = 0;
  for (let done = false; !done; ) {
    backend.batch(() => {
      for (let i = 0; i < RECORDS_PER_BATCH; i++) {
        const next = entries.next();
        if (next.done) {
          done = true;
          return;
        }
        put(next.value);
        n++;
      }
    });
  }
  return n;
}

/** Reads the bbolt database `bboltPath` (no sha256 trailer) into the empty `backend`. */
export function importEtcdDb(bboltPath: string, backend: Backend, log: Logger): ImportCounts {
  const reader = BboltReader.open(bboltPath);
  try {
    const buckets = new Set(reader.bucketNames());
    if (!buckets.has(KEY_DB) || !buckets.has('meta')) throw new BboltError(`${bboltPath} is a bbolt database without etcd's "key" and "meta" buckets`);

    const kv = backend.subDb(KEY_DB);
    let lastMain = 0;
    const keyRecords = copyInBatches(backend, reader.entries(KEY_DB)[Symbol.iterator](), ({ key, value }) => {
      if (key.length !== REV_BYTES && !isTombstoneKey(key)) throw new BboltError(`etcd key record with a ${key.length}-byte revision`);
      const main = bytesToRev(key).main;
      assert(main >= lastMain, 'etcd key records out of revision order');
      lastMain = main;
      appendKeyRecord(kv, key, encodeKeyValue(decodeKeyValue(value)));
    });

    backend.batch(() => {
      for (const { key, value } of reader.entries('meta')) {
        const name = key.toString();
        if (!META_COMPACTION_KEYS.includes(name)) continue;
        if (value.length !== REV_BYTES) throw new BboltError(`etcd meta ${name} of ${value.length} bytes`);
        backend.metaPut(name, value);
      }
    });

    const leaseDb = backend.subDb('lease');
    const leases = copyInBatches(backend, reader.entries('lease')[Symbol.iterator](), ({ key, value }) => {
      if (key.length !== 8) throw new BboltError(`etcd lease key of ${key.length} bytes`);
      const rec = decodeLeaseRecord(value);
      if (rec.id !== key.readBigInt64BE(0)) throw new BboltError(`etcd lease record ${rec.id} under key ${key.toString('hex')}`);
      leaseDb.putSync(key, encodeLeaseRecord(rec));
    });

    let enabled = false;
    let authRevision = 0;
    for (const { key, value } of reader.entries('auth')) {
      if (key.toString() === 'authEnabled') enabled = value.length === 1 && value[0] === 1;
      if (key.toString() === 'authRevision' && value.length === 8) authRevision = Number(value.readBigUInt64BE(0));
    }
    const users: UserRecord[] = [];
    for (const { value } of reader.entries('authUsers')) {
      const u = decodeMessage('authpb.User', value);
      users.push({ name: u.name.toString(), password: u.password.toString(), roles: [...u.roles], noPassword: u.options?.noPassword ?? false });
    }
    const roles: RoleRecord[] = [];
    for (const { value } of reader.entries('authRoles')) {
      const r = decodeMessage('authpb.Role', value);
      roles.push({ name: r.name.toString(), perms: r.keyPermission.map((p) => ({ permType: p.permType, key: Buffer.from(p.key), rangeEnd: Buffer.from(p.rangeEnd) })) });
    }
    const auth = new AuthStore(backend.subDb('auth'));
    backend.batch(() => auth.loadRestored(users, roles, enabled, authRevision));

    // Raised alarms stay raised, as etcd's restore keeps them (a NOSPACE alarm still refuses writes
    // until `etcdctl alarm disarm`).
    const alarms = new Alarms(backend.subDb('alarm'));
    let alarmCount = 0;
    backend.batch(() => {
      for (const { key } of reader.entries('alarm')) {
        const a = decodeMessage('etcdserverpb.AlarmMember', key);
        if (alarms.activate({ memberId: BigInt(a.memberID), alarm: a.alarm })) alarmCount++;
      }
    });
    if (alarmCount > 0) log.warn('restored raised alarms', { alarms: alarms.list().map((a) => `${a.memberId.toString(16)}:${a.alarm}`) });
    log.info('read etcd snapshot', { 'key-records': keyRecords, 'latest-revision': lastMain, leases, users: users.length, roles: roles.length, 'auth-enabled': enabled });
    return { keyRecords, leases, users: users.length, roles: roles.length, authEnabled: enabled };
  } finally {
    reader.close();
  }
}
