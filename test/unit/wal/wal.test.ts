import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Wal } from '../../../src/wal/wal';
import type { Entry } from '../../../src/raft/types';

const dirs: string[] = [];
function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function ent(index: number, term: number, data = `e${index}`): Entry {
  return { index, term, type: 0, data: Buffer.from(data) };
}

const identity = { memberId: 0x8e9e05c52164694dn, clusterId: 0xcdf818194e3a8c32n, name: 'default' };

describe('WAL', () => {
  it('reads back what it saved, after reopening', async () => {
    const dir = tmp();
    let wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save({ term: 2, vote: identity.memberId, commit: 2 }, [ent(1, 1), ent(2, 2), ent(3, 2)], null);
    await wal.close();
    wal = Wal.open(dir);
    const c = wal.readAll();
    expect(c.identity).toEqual(identity);
    expect(c.hardState).toEqual({ term: 2, vote: identity.memberId, commit: 2 });
    expect(c.entries.map((e) => [e.index, e.term, e.data.toString()])).toEqual([
      [1, 1, 'e1'],
      [2, 2, 'e2'],
      [3, 2, 'e3'],
    ]);
    await wal.close();
  });

  it('replaces a conflicting uncommitted tail', async () => {
    const dir = tmp();
    const wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save(null, [ent(1, 1), ent(2, 1), ent(3, 1), ent(4, 1)], null);
    await wal.save({ term: 2, vote: 0n, commit: 1 }, [ent(3, 2, 'new3')], null);
    const c = wal.readAll();
    expect(c.entries.map((e) => [e.index, e.term, e.data.toString()])).toEqual([
      [1, 1, 'e1'],
      [2, 1, 'e2'],
      [3, 2, 'new3'],
    ]);
    await wal.close();
  });

  it('drops entries covered by a snapshot and continues after it', async () => {
    const dir = tmp();
    const wal = Wal.open(dir);
    await wal.create(identity);
    await wal.save({ term: 1, vote: 0n, commit: 5 }, [1, 2, 3, 4, 5].map((i) => ent(i, 1)), null);
    const confState = { voters: [identity.memberId], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    await wal.compact(4, { index: 3, term: 1, confState });
    const c = wal.readAll();
    expect(c.snapshot?.index).toBe(3);
    expect(c.snapshot?.confState.voters).toEqual([identity.memberId]);
    expect(c.entries.map((e) => e.index)).toEqual([4, 5]);
    await wal.close();
  });

  it('refuses to overwrite an identity', async () => {
    const wal = Wal.open(tmp());
    await wal.create(identity);
    await expect(wal.create(identity)).rejects.toThrow();
    await wal.close();
  });
});
