// etcd's buckets read into an etcd-ts database, from a bbolt file built here.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Alarms, AlarmType } from '../../../src/alarm/alarms';
import { Backend } from '../../../src/backend/backend';
import { BboltWriter } from '../../../src/backend/bbolt_writer';
import { importEtcdDb } from '../../../src/etcdutl/import_etcd';
import { nopLogger } from '../../../src/log';
import { MvccStore } from '../../../src/mvcc';
import { encodeKeyValue } from '../../../src/mvcc/kv_codec';
import { revToBytes } from '../../../src/mvcc/revision';
import { encodeMessage } from '../../../src/pb/internal';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'import-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("importing etcd's buckets", () => {
  it('keeps keys with their revisions, tombstones, the compaction point and raised alarms', async () => {
    const file = path.join(dir, 'etcd.db');
    const w = new BboltWriter(file);
    const kv = (key: string, create: number, mod: number, version: number, value: string): Buffer =>
      encodeKeyValue({ key: Buffer.from(key), createRevision: create, modRevision: mod, version, value: Buffer.from(value), lease: 0n });
    await w.addBucket('key', [
      [revToBytes(2, 0), kv('a', 2, 2, 1, 'one')],
      [revToBytes(3, 0), kv('b', 3, 3, 1, 'two')],
      [revToBytes(4, 0, true), kv('b', 0, 0, 0, '')],
      [revToBytes(5, 0), kv('a', 2, 5, 2, 'three')],
    ]);
    await w.addBucket('meta', [
      [Buffer.from('consistent_index'), Buffer.from('0000000000000009', 'hex')],
      [Buffer.from('finishedCompactRev'), revToBytes(3, 0)],
      [Buffer.from('scheduledCompactRev'), revToBytes(3, 0)],
    ]);
    await w.addBucket('alarm', [[encodeMessage('etcdserverpb.AlarmMember', { memberID: '12345', alarm: AlarmType.NOSPACE }), Buffer.alloc(0)]]);
    w.finish();

    const be = Backend.open(path.join(dir, 'db'), { flushIntervalMs: 0 });
    try {
      const counts = importEtcdDb(file, be, nopLogger());
      expect(counts).toMatchObject({ keyRecords: 4, leases: 0, users: 0, roles: 0, authEnabled: false });
      expect(new Alarms(be.subDb('alarm')).list()).toEqual([{ memberId: 12345n, alarm: AlarmType.NOSPACE }]);
      const store = new MvccStore(be);
      expect(store.currentRevision()).toBe(5);
      const r = store.range(Buffer.from('a'), Buffer.from('c'));
      expect(r.kvs.map((x) => [x.key.toString(), x.value.toString(), x.createRevision, x.modRevision, x.version])).toEqual([['a', 'three', 2, 5, 2]]);
      // Revision 3 is the compaction point: readable; below it, compacted.
      expect(store.rangeAt(Buffer.from('b'), null, 3).kvs.map((x) => x.value.toString())).toEqual(['two']);
      expect(() => store.rangeAt(Buffer.from('b'), null, 2)).toThrow(/compacted/);
      await store.close();
    } finally {
      await be.close();
    }
  });
});
