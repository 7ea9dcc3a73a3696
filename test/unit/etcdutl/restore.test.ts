// etcdutl's restore of a snapshot file in our earlier format (the LMDB database and its sha256), as
// `etcdctl snapshot save` wrote them before snapshots became etcd's format: still restorable.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Backend } from '../../../src/backend/backend';
import { restoreSnapshot } from '../../../src/etcdutl/restore';
import { nopLogger } from '../../../src/log';
import { computeMemberId } from '../../../src/membership/ids';
import { Members } from '../../../src/membership/members';
import { MvccStore } from '../../../src/mvcc';
import { Wal } from '../../../src/wal/wal';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'restore-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('etcdutl snapshot restore of an LMDB snapshot file', () => {
  it('makes a member that starts from a Raft snapshot at the member count, with the keys and the new members', async () => {
    const src = Backend.open(path.join(dir, 'src', 'db'), { flushIntervalMs: 0 });
    const store = new MvccStore(src);
    for (const [k, v] of [['a', '1'], ['b', '2'], ['a', '3']]) {
      src.batch(() => {
        const t = store.write();
        t.put(Buffer.from(k), Buffer.from(v), 0n);
        t.end();
        src.setConsistentIndex(src.consistentIndex() + 1);
      });
    }
    const file = path.join(dir, 'old-format.db');
    const snap = await src.openSnapshot();
    const fd = fs.openSync(file, 'w');
    for await (const chunk of snap.chunks) fs.writeSync(fd, chunk);
    fs.closeSync(fd);
    await store.close();
    await src.close();

    const urls = { m1: 'http://10.0.0.1:2380', m2: 'http://10.0.0.2:2380' };
    const dataDir = path.join(dir, 'm1.etcd');
    const res = await restoreSnapshot(
      {
        snapshotPath: file,
        name: 'm1',
        dataDir,
        walDir: path.join(dataDir, 'member', 'wal'),
        initialCluster: new Map([['m1', [urls.m1]], ['m2', [urls.m2]]]),
        initialClusterToken: 'tok',
        peerUrls: [urls.m1],
        skipHashCheck: false,
        bumpRevision: 0,
      },
      nopLogger(),
    );
    expect(res.memberId).toBe(computeMemberId([urls.m1], 'tok'));
    expect(res.index).toBe(2);

    const be = Backend.open(path.join(dataDir, 'member', 'snap', 'db'), { flushIntervalMs: 0 });
    try {
      expect(be.consistentIndex()).toBe(2);
      const ms = new Members(be.subDb('members'), be.subDb('members_removed'));
      expect(ms.list().map((m) => m.peerUrls[0]).sort()).toEqual([urls.m1, urls.m2]);
      const st = new MvccStore(be);
      expect(st.currentRevision()).toBe(4);
      expect(st.range(Buffer.from('a'), null).kvs.map((kv) => [kv.value.toString(), kv.version])).toEqual([['3', 2]]);
      await st.close();
    } finally {
      await be.close();
    }
    const wal = Wal.open(path.join(dataDir, 'member', 'wal'));
    const c = wal.readAll();
    expect(c.identity.memberId).toBe(res.memberId);
    expect(c.snapshot?.index).toBe(2);
    expect(c.snapshot?.confState.voters.length).toBe(2);
    expect(c.hardState).toMatchObject({ term: 1, commit: 2 });
    expect(c.entries).toEqual([]);
    await wal.close();
  });
});
