import { afterEach, describe, expect, it } from 'vitest';
import { EtcdError } from '../../../src/errors';
import { appendKeyRecord, KEY_DB, type MvccStoreOptions } from '../../../src/mvcc/store';
import { revToBytes } from '../../../src/mvcc/revision';
import { EventType, type MvccEvent } from '../../../src/mvcc/types';
import { b, closeStore, openStore, write } from './helpers';

type S = ReturnType<typeof openStore>;
const opened: S[] = [];
function fresh(path?: string, opts?: MvccStoreOptions): S {
  const s = openStore(path, opts);
  opened.push(s);
  return s;
}
afterEach(async () => {
  for (const s of opened.splice(0)) await closeStore(s).catch(() => undefined);
});

function errName(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof EtcdError) return e.message;
    throw e;
  }
  return 'no error';
}
async function asyncErrName(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof EtcdError) return e.message;
    throw e;
  }
  return 'no error';
}
const COMPACTED = 'etcdserver: mvcc: required revision has been compacted';
const FUTURE = 'etcdserver: mvcc: required revision is a future revision';

describe('MvccStore revisions', () => {
  it('starts at revision 1; each writing txn adds one; subs order the writes', () => {
    const s = fresh();
    expect(s.store.currentRevision()).toBe(1);
    expect(s.store.compactRevision()).toBe(0);
    const ev1 = write(s, (t) => {
      expect(t.rev).toBe(1);
      t.put(b('a'), b('1'), 0n);
      expect(t.rev).toBe(2);
      t.put(b('b'), b('2'), 0n);
      // The txn sees its own writes.
      expect(t.range(b('a'), b('c')).kvs.map((kv) => kv.key.toString())).toEqual(['a', 'b']);
    });
    expect(ev1.map((e) => [e.type, e.kv.key.toString(), e.kv.modRevision])).toEqual([
      [EventType.PUT, 'a', 2],
      [EventType.PUT, 'b', 2],
    ]);
    expect(s.store.currentRevision()).toBe(2);
    // A txn that writes nothing does not advance the revision.
    const ev2 = write(s, (t) => t.deleteRange(b('zzz'), null));
    expect(ev2).toEqual([]);
    expect(s.store.currentRevision()).toBe(2);
  });

  it('tracks versions, create revisions and generations across deletes', () => {
    const s = fresh();
    write(s, (t) => t.put(b('k'), b('v1'), 0n)); // 2
    write(s, (t) => t.put(b('k'), b('v2'), 5n)); // 3
    let kv = s.store.range(b('k'), null).kvs[0];
    expect(kv).toMatchObject({ createRevision: 2, modRevision: 3, version: 2, lease: 5n });
    expect(kv.value.toString()).toBe('v2');
    const del = write(s, (t) => t.deleteRange(b('k'), null)); // 4
    expect(del[0].type).toBe(EventType.DELETE);
    expect(del[0].kv).toMatchObject({ modRevision: 4, version: 0, createRevision: 0 });
    expect(del[0].prevKv?.value.toString()).toBe('v2');
    expect(s.store.range(b('k'), null).count).toBe(0);
    write(s, (t) => t.put(b('k'), b('v3'), 0n)); // 5
    kv = s.store.range(b('k'), null).kvs[0];
    expect(kv).toMatchObject({ createRevision: 5, modRevision: 5, version: 1, lease: 0n });
    // Old revisions still readable.
    expect(s.store.range(b('k'), null, { rev: 2 }).kvs[0].value.toString()).toBe('v1');
    expect(s.store.range(b('k'), null, { rev: 4 }).kvs).toEqual([]);
    expect(s.store.range(b('k'), null, { rev: 4 }).rev).toBe(5); // reports the current revision
    expect(errName(() => s.store.range(b('k'), null, { rev: 6 }))).toBe(FUTURE);
    expect(s.store.keyCount()).toBe(1);
  });

  it('ranges: limit, count, countOnly, keysOnly, open end, all keys', () => {
    const s = fresh();
    write(s, (t) => {
      for (const k of ['a', 'b', 'c', 'd']) t.put(b(k), b(`v${k}`), 0n);
    });
    const r = s.store.range(b('a'), b('d'), { limit: 2 });
    expect(r.kvs.map((kv) => kv.key.toString())).toEqual(['a', 'b']);
    expect(r.count).toBe(3);
    expect(s.store.range(b('b'), Buffer.from([0]), {}).kvs.map((kv) => kv.key.toString())).toEqual(['b', 'c', 'd']);
    expect(s.store.range(Buffer.from([0]), Buffer.from([0])).count).toBe(4);
    const co = s.store.range(b('a'), Buffer.from([0]), { countOnly: true });
    expect(co).toEqual({ kvs: [], count: 4, rev: 2 });
    expect(s.store.range(b('a'), null, { keysOnly: true }).kvs[0].value.length).toBe(0);
    expect(s.store.range(b('a'), Buffer.alloc(0)).kvs.length).toBe(1); // empty end = single key
  });

  it('ranges at past revisions: limit, count and countOnly see each key as it was then', () => {
    const s = fresh();
    write(s, (t) => t.put(b('a'), b('a1'), 0n)); // 2
    write(s, (t) => t.put(b('b'), b('b1'), 0n)); // 3
    write(s, (t) => t.put(b('c'), b('c1'), 0n)); // 4
    write(s, (t) => t.deleteRange(b('b'), null)); // 5
    write(s, (t) => t.put(b('a'), b('a2'), 0n)); // 6
    write(s, (t) => t.put(b('d'), b('d1'), 0n)); // 7
    const at = (rev: number, limit = 0) => {
      const r = s.store.range(b('a'), Buffer.from([0]), { rev, limit });
      return [r.kvs.map((kv) => `${kv.key}=${kv.value}@${kv.modRevision}`), r.count];
    };
    expect(at(4)).toEqual([['a=a1@2', 'b=b1@3', 'c=c1@4'], 3]);
    expect(at(4, 2)).toEqual([['a=a1@2', 'b=b1@3'], 3]);
    expect(at(5)).toEqual([['a=a1@2', 'c=c1@4'], 2]);
    expect(at(6, 1)).toEqual([['a=a2@6'], 2]);
    expect(at(7)).toEqual([['a=a2@6', 'c=c1@4', 'd=d1@7'], 3]);
    expect(s.store.range(b('a'), Buffer.from([0]), { rev: 4, countOnly: true })).toEqual({ kvs: [], count: 3, rev: 7 });
    expect(s.store.range(b('b'), null, { rev: 6, countOnly: true }).count).toBe(0);
  });

  it('handles keys longer than LMDB allows and binary keys with 0x00 / 0xff', async () => {
    const p = fresh();
    const long = Buffer.alloc(5000, 0x61);
    const long2 = Buffer.concat([long, Buffer.from([0x00])]);
    const bins = [Buffer.from([0x00]), Buffer.from([0x00, 0x00]), Buffer.from([0xff]), Buffer.from([0xff, 0xff, 0x00]), Buffer.from([0x08, 0x10])];
    write(p, (t) => {
      t.put(long, b('L'), 0n);
      t.put(long2, b('L2'), 0n);
      for (const k of bins) t.put(k, k, 0n);
    });
    expect(p.store.range(long, null).kvs[0].value.toString()).toBe('L');
    expect(p.store.range(long2, null).kvs[0].value.toString()).toBe('L2');
    const all = p.store.range(Buffer.from([0]), Buffer.from([0])).kvs.map((kv) => kv.key);
    expect(all).toEqual([...bins, long, long2].sort(Buffer.compare));
    expect(p.store.range(Buffer.from([0xff]), null).kvs[0].value).toEqual(Buffer.from([0xff]));
    // Survives a restart.
    await closeStore(p);
    opened.splice(opened.indexOf(p), 1);
    const q = fresh(p.dbPath);
    expect(q.store.range(long2, null).kvs[0].value.toString()).toBe('L2');
    expect(q.store.range(Buffer.from([0]), Buffer.from([0])).count).toBe(7);
  });
});

describe('MvccStore restart', () => {
  it('lists a key with a lease only while its last record is a put with one', async () => {
    const p = fresh();
    write(p, (t) => t.put(b('e'), b('1'), 5n));
    write(p, (t) => t.put(b('e'), b('2'), 0n)); // lease dropped by an overwrite
    write(p, (t) => t.put(b('f'), b('1'), 3n));
    write(p, (t) => t.deleteRange(b('f'), null)); // deleted
    write(p, (t) => t.put(b('g'), b('1'), 0n));
    write(p, (t) => t.put(b('g'), b('2'), 8n)); // lease added by an overwrite
    write(p, (t) => t.put(b('h'), b('1'), 6n));
    write(p, (t) => t.deleteRange(b('h'), null));
    write(p, (t) => t.put(b('h'), b('2'), 2n)); // created again with a lease
    await closeStore(p);
    opened.splice(opened.indexOf(p), 1);
    const q = fresh(p.dbPath);
    const listed = (): string[] => q.store.keysWithLease().map((x) => `${x.key}:${x.lease}`).sort();
    expect(listed()).toEqual(['g:8', 'h:2']);
    // The index walk that serves it after a write agrees.
    write(q, (t) => t.put(b('z'), b('1'), 0n));
    expect(listed()).toEqual(['g:8', 'h:2']);
  });

  it('rebuilds the index, revision and lease attachments from disk', async () => {
    const p = fresh();
    write(p, (t) => t.put(b('a'), b('1'), 7n)); // 2
    write(p, (t) => t.put(b('b'), b('2'), 0n)); // 3
    write(p, (t) => t.deleteRange(b('b'), null)); // 4
    write(p, (t) => t.put(b('a'), b('3'), -2n)); // 5
    write(p, (t) => t.put(b('c'), b('4'), 9n)); // 6
    await closeStore(p);
    opened.splice(opened.indexOf(p), 1);
    const q = fresh(p.dbPath);
    expect(q.store.currentRevision()).toBe(6);
    expect(q.store.keyCount()).toBe(2);
    expect(q.store.range(b('a'), null).kvs[0]).toMatchObject({ version: 2, createRevision: 2, modRevision: 5, lease: -2n });
    expect(q.store.range(b('b'), null, { rev: 3 }).kvs[0].value.toString()).toBe('2');
    expect(q.store.keysWithLease().map((x) => [x.key.toString(), x.lease])).toEqual([
      ['a', -2n],
      ['c', 9n],
    ]);
    write(q, (t) => t.put(b('b'), b('5'), 0n));
    expect(q.store.range(b('b'), null).kvs[0]).toMatchObject({ version: 1, createRevision: 7 });
    // After a write the list comes from the index again, and follows it.
    write(q, (t) => t.put(b('a'), b('6'), 0n));
    write(q, (t) => t.put(b('d'), b('7'), 4n));
    expect(q.store.keysWithLease().map((x) => [x.key.toString(), x.lease])).toEqual([
      ['c', 9n],
      ['d', 4n],
    ]);
  });
});

describe('MvccStore restart, every revision', () => {
  // The key index is rebuilt from the records in chunks sorted by key (IndexRebuild): one chunk
  // for all, one record per chunk, and chunks that split keys' histories between them.
  it.each([undefined, 1, 7, 64])('answers every range at every revision as before: creates, updates, deletes, re-creates, compacted history (chunks of %s records)', async (chunkRecords) => {
    const p = fresh();
    // A fixed pseudo-random history over 40 keys (a small LCG: the same every run).
    let seed = 12345;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let i = 0; i < 600; i++) {
      const k = b(`k${String(next(40)).padStart(2, '0')}`);
      if (next(5) === 0) write(p, (t) => t.deleteRange(k, null));
      else write(p, (t) => t.put(k, b(`v${i}`), BigInt(next(3))));
    }
    const compactAt = Math.floor(p.store.currentRevision() / 3);
    await p.store.compact(compactAt).done;
    const last = p.store.currentRevision();
    const snapshot = (s: S): string[] => {
      const leased = s.store.keysWithLease().map((x) => `${x.key}:${x.lease}`).sort();
      const out: string[] = [`count ${s.store.keyCount()}`, `leased ${leased.join(' ')}`];
      for (let rev = compactAt; rev <= last; rev++) {
        const r = s.store.range(b('k'), b('l'), { rev });
        out.push(`${rev}: ${r.kvs.map((kv) => `${kv.key}=${kv.value}/${kv.createRevision}/${kv.modRevision}/${kv.version}/${kv.lease}`).join(' ')}`);
      }
      return out;
    };
    const before = snapshot(p);
    await closeStore(p);
    opened.splice(opened.indexOf(p), 1);
    const q = fresh(p.dbPath, { rebuildChunkRecords: chunkRecords });
    expect(q.store.currentRevision()).toBe(last);
    expect(snapshot(q)).toEqual(before);
    // Writes after the rebuild find every key where it was (creates, deletes and overwrites).
    for (let i = 0; i < 40; i++) {
      const k = b(`k${String(i).padStart(2, '0')}`);
      if (i % 3 === 0) write(q, (t) => t.deleteRange(k, null));
      else write(q, (t) => t.put(k, b(`w${i}`), 0n));
    }
    const after = q.store.range(b('k'), b('l'));
    expect(after.kvs.map((kv) => `${kv.key}=${kv.value}`)).toEqual(
      Array.from({ length: 40 }, (_, i) => i)
        .filter((i) => i % 3 !== 0)
        .map((i) => `k${String(i).padStart(2, '0')}=w${i}`),
    );
    expect(q.store.keyCount()).toBe(after.kvs.length);
  });
});

describe('MvccStore compaction', () => {
  it('rejects old and future revisions; compacted ranges fail, later ones work', async () => {
    const s = fresh();
    for (let i = 0; i < 5; i++) write(s, (t) => t.put(b('k'), b(`v${i}`), 0n)); // 2..6
    write(s, (t) => t.put(b('gone'), b('x'), 0n)); // 7
    write(s, (t) => t.deleteRange(b('gone'), null)); // 8
    expect(errName(() => s.store.compact(9))).toBe(FUTURE);
    const { done } = s.store.compact(5);
    expect(s.store.compactRevision()).toBe(5);
    expect(errName(() => s.store.compact(5))).toBe(COMPACTED);
    expect(errName(() => s.store.compact(4))).toBe(COMPACTED);
    expect(errName(() => s.store.range(b('k'), null, { rev: 4 }))).toBe(COMPACTED);
    expect(s.store.range(b('k'), null, { rev: 5 }).kvs[0].value.toString()).toBe('v3');
    await done;
    expect(s.store.range(b('k'), null, { rev: 5 }).kvs[0].value.toString()).toBe('v3');
    expect(s.store.range(b('k'), null).kvs[0]).toMatchObject({ version: 5, createRevision: 2 });
    const { done: d2 } = s.store.compact(8);
    await d2;
    expect(s.store.range(b('gone'), null, { rev: 8 }).kvs).toEqual([]);
    expect(s.store.range(b('k'), null).kvs[0].version).toBe(5);
  });

  it("compacts a large index in steps: requests are served between them, and writes meanwhile keep their history", async () => {
    const s = fresh();
    const KEYS = 20_000; // a few of the index's steps (4096 keys each)
    const key = (i: number): Buffer => b(`k${String(i).padStart(5, '0')}`);
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < KEYS; i += 1000) {
        write(s, (t) => {
          for (let j = i; j < i + 1000; j++) t.put(key(j), b(`r${round}`), 0n);
        });
      }
    }
    write(s, (t) => t.deleteRange(key(0), key(10))); // ten keys deleted: emptied by the compaction
    const rev = s.store.currentRevision();
    const { done } = s.store.compact(rev);
    // The first step has not run yet: reads below rev fail at once all the same.
    expect(errName(() => s.store.range(key(5), null, { rev: rev - 1 }))).toBe(COMPACTED);
    // Turns of the event loop until the compaction is over, each with a write and a read. The
    // physical part deletes records from its first step on: the turns that find them all are
    // the index's (in one go, the index's part ran before any turn).
    const records = (): number => s.backend.recordCount(KEY_DB);
    const before = records();
    let turns = 0;
    let indexTurns = 0;
    let finished = false;
    void done.then(() => (finished = true));
    while (!finished) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (finished) break;
      if (records() === before + turns) indexTurns++;
      turns++;
      const k = key(KEYS - 1 - turns);
      write(s, (t) => t.put(k, b(`during${turns}`), 0n));
      expect(s.store.range(k, null).kvs[0]).toMatchObject({ version: 3, value: b(`during${turns}`) });
    }
    expect(indexTurns).toBeGreaterThanOrEqual(2);
    // Every key reads as written, at the compacted revision and now; the writes made during the
    // compaction keep the revisions they had before it.
    const atRev = s.store.range(b('k'), b('l'), { rev });
    expect(atRev.count).toBe(KEYS - 10);
    expect(atRev.kvs.every((kv) => kv.value.toString() === 'r1' && kv.version === 2)).toBe(true);
    const changed = s.store.range(key(KEYS - 1 - turns), key(KEYS - 1));
    expect(changed.kvs.map((kv) => kv.value.toString())).toEqual(Array.from({ length: turns }, (_, i) => `during${turns - i}`));
    expect(s.store.range(key(KEYS - 2), null, { rev }).kvs[0].value.toString()).toBe('r1');
    // The physical part left one record per live key, the writes made meanwhile and the tombstones at rev.
    expect([...s.backend.subDb('key').getKeys({})].length).toBe(KEYS - 10 + turns + 10);
  });

  it('finishes an interrupted compaction after a restart and keeps the revision', async () => {
    const p = fresh();
    for (let i = 0; i < 3000; i++) write(p, (t) => t.put(b(`k${i % 10}`), b(`v${i}`), 0n)); // 2..3001
    const rev = p.store.currentRevision();
    p.store.compact(rev); // physical deletion runs in steps of 1000 records
    await closeStore(p); // stops it part way
    opened.splice(opened.indexOf(p), 1);
    const q = fresh(p.dbPath);
    expect(q.store.compactRevision()).toBe(rev);
    expect(q.store.currentRevision()).toBe(rev);
    expect(errName(() => q.store.range(b('k1'), null, { rev: rev - 1 }))).toBe(COMPACTED);
    // Wait (bounded) for the resumed physical compaction to finish: only 10 records remain.
    const deadline = Date.now() + 20_000;
    while ((await q.store.hashKV(0)).hash !== 0 && Date.now() < deadline) {
      const recs = [...q.backend.subDb('key').getKeys({})].length;
      if (recs === 10) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect([...q.backend.subDb('key').getKeys({})].length).toBe(10);
    expect(q.store.range(b('k'), b('l')).count).toBe(10);
    await closeStore(q);
    opened.splice(opened.indexOf(q), 1);
    // Everything but the compacted records is still there after another restart.
    const r = fresh(p.dbPath);
    expect(r.store.currentRevision()).toBe(rev);
    expect(r.store.range(b('k9'), null).kvs[0].version).toBe(300);
  });

  it('keeps a key deleted and created again in the compacted revision (found by differential-random)', async () => {
    // One txn deletes from a key ("\0" end: etcd's duplicate-key check lets that through) and
    // puts a key of the range again. Compacting at that revision must keep the new value: the
    // index still points at it (etcd 3.6 deletes it and dies on the next read, issue #22376).
    const s = fresh();
    write(s, (t) => {
      t.put(b('a'), b('old'), 0n);
      t.put(b('c'), b('old'), 0n);
    }); // 2
    write(s, (t) => {
      t.deleteRange(b('a'), b('\0')); // 3.0 a, 3.1 c
      t.put(b('c'), b('new'), 0n); // 3.2
      t.put(b('d'), b('d'), 0n); // 3.3
      t.deleteRange(b('d'), b('\0')); // 3.4: d deleted again in the same revision
    }); // 3
    write(s, (t) => t.put(b('x'), b('later'), 0n)); // 4
    await s.store.compact(3).done;
    const live = (st: typeof s): string[] => st.store.range(b('\0'), b('\0')).kvs.map((kv) => `${kv.key}=${kv.value}@${kv.createRevision}/${kv.modRevision}/${kv.version}`);
    expect(live(s)).toEqual(['c=new@3/3/1', 'x=later@4/4/1']);
    expect(s.store.range(b('c'), null, { rev: 3 }).kvs[0].value.toString()).toBe('new');
    // A watcher from the compacted revision gets the live put (etcd 3.4 behaves so too) and the
    // tombstones of keys that stayed deleted (etcd >= 3.5.16 keeps those).
    expect(s.store.eventsInRange(3, 4, 10, true).events.map((e) => `${e.type}:${e.kv.key}@${e.kv.modRevision}`)).toEqual(['1:a@3', '0:c@3', '1:d@3', '0:x@4']);
    await closeStore(s);
    opened.splice(opened.indexOf(s), 1);
    const q = fresh(s.dbPath);
    expect(live(q)).toEqual(['c=new@3/3/1', 'x=later@4/4/1']);
  });

  it('hashKV is equal for equal histories however far compaction got', async () => {
    const a = fresh();
    const c = fresh();
    for (const s of [a, c]) {
      write(s, (t) => t.put(b('x'), b('1'), 0n));
      write(s, (t) => t.put(b('x'), b('2'), 0n));
      write(s, (t) => t.put(b('y'), b('1'), 0n));
      write(s, (t) => t.deleteRange(b('y'), null));
      write(s, (t) => t.put(b('z'), b('1'), 0n));
    }
    expect(await a.store.hashKV(0)).toEqual(await c.store.hashKV(0));
    const before = await a.store.hashKV(6);
    const at4 = await a.store.hashKV(4);
    const { done } = a.store.compact(4);
    const mid = await a.store.hashKV(6);
    await done;
    expect((await a.store.hashKV(6)).hash).toBe(mid.hash);
    const cDone = c.store.compact(4).done;
    expect(await c.store.hashKV(6)).toEqual(await a.store.hashKV(6));
    expect(mid.compactRevision).toBe(4);
    expect(before.compactRevision).toBe(-1);
    // Once the compaction at 4 is done, HashKV at 4 answers the hash it kept (etcd's
    // hashStorage): the store at 4 as it was before, with the compact revision before (-1).
    expect(await a.store.hashKV(4)).toEqual(at4);
    expect(at4).toMatchObject({ compactRevision: -1, hashRevision: 4 });
    expect(await asyncErrName(a.store.hashKV(3))).toBe(COMPACTED);
    expect(await asyncErrName(a.store.hashKV(7))).toBe(FUTURE);
    expect((await a.store.hashKV(0)).hashRevision).toBe(6);
    // Once both compactions are done the whole files hash alike too (etcd's Hash).
    await cDone;
    expect(await c.store.hash()).toBe(await a.store.hash());
  });
});

describe('MvccStore HashKV in steps', () => {
  const KEYS = 300;
  const key = (i: number): Buffer => b(`k${String(i).padStart(4, '0')}`);
  /** Three rounds over `keys` keys (a txn of 100 puts each), the first compacted away. */
  async function history(hashStep = 7, keys = KEYS): Promise<S> {
    // Seven keys or records per turn of the event loop: a hash takes ~170 turns here.
    const s = fresh(undefined, { hashStep });
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < keys; i += 100) {
        write(s, (t) => {
          for (let j = i; j < i + 100; j++) t.put(key(j), b(`r${round}-${j}`), 0n);
        });
      }
      if (round === 0) await s.store.compact(s.store.currentRevision()).done;
    }
    write(s, (t) => t.deleteRange(key(0), key(5)));
    return s;
  }
  const turn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

  it('answers for the store as it was when asked: writes, and a compaction at or below its revision that deletes records it hashes, between its steps change nothing', async () => {
    const s = await history();
    const rev = s.store.currentRevision();
    const reference = await s.store.hashKV(0);
    expect(reference).toMatchObject({ compactRevision: 4, hashRevision: rev });
    let settled = false;
    const running = s.store.hashKV(0).finally(() => (settled = true));
    let turns = 0;
    let compacted = false;
    while (!settled) {
      await turn();
      turns++;
      write(s, (t) => {
        t.put(key(turns % KEYS), b(`during${turns}`), 0n);
        t.deleteRange(key(KEYS - 1 - (turns % 50)), null);
      });
      expect(s.store.range(key(turns % KEYS), null).kvs[0]?.value.toString()).toBe(`during${turns}`);
      // A compaction at the hash's revision removes the second round's records, which this
      // hash includes (they are above its compact revision): it runs to its end meanwhile.
      if (turns === 3) void s.store.compact(rev).done.then(() => (compacted = true));
    }
    expect(compacted).toBe(true);
    expect(turns).toBeGreaterThan(50);
    expect(await running).toEqual(reference);
    // Asked again, etcd answers with the hash its compaction at rev kept (hashStorage): the one
    // HashKV gave before it, with the compact revision before (etcd 3.6: compact_revision 4).
    expect(await s.store.hashKV(rev)).toEqual(reference);
  });

  it('answers "compacted" when a compaction above its revision comes during it, queues at most 16 more, and is "stopped" by closing', async () => {
    const s = await history();
    const rev = s.store.currentRevision();
    const running = asyncErrName(s.store.hashKV(rev));
    await turn();
    write(s, (t) => t.put(key(1), b('after'), 0n));
    s.store.compact(rev + 1);
    expect(await running).toBe(COMPACTED);
    // One runs at a time; 16 wait (each answers alike); the next is refused as etcd refuses an overload.
    const reference = await s.store.hashKV(0);
    const queued = Array.from({ length: 16 }, () => s.store.hashKV(0));
    expect(await asyncErrName(s.store.hashKV(0))).toBe('etcdserver: too many requests');
    for (const q of queued) expect(await q).toEqual(reference);
    expect(await s.store.hashKV(0)).toEqual(reference);
    const stopped = asyncErrName(s.store.hashKV(0));
    await turn();
    await closeStore(s);
    opened.splice(opened.indexOf(s), 1);
    expect(await stopped).toBe('etcdserver: server stopped');
    expect(await asyncErrName(s.store.hashKV(0))).toBe('etcdserver: server stopped');
  });

  it("hashes the whole backend (etcd's Hash) in steps too, of the store as it was when asked; closing stops it", async () => {
    const s = await history();
    const reference = await s.store.hash();
    let settled = false;
    const running = s.store.hash().finally(() => (settled = true));
    let turns = 0;
    while (!settled) {
      await turn();
      turns++;
      write(s, (t) => t.put(key(turns % KEYS), b(`during${turns}`), 0n));
    }
    expect(turns).toBeGreaterThan(50);
    expect(await running).toBe(reference);
    expect(await s.store.hash()).not.toBe(reference);
    const stopped = asyncErrName(s.store.hash());
    await turn();
    await closeStore(s);
    opened.splice(opened.indexOf(s), 1);
    expect(await stopped).toBe('etcdserver: server stopped');
  });

  it('starts again when a defragmentation swaps the file under it', async () => {
    // ~12000 turns: the copy on lmdb-js's thread ends long before the hash (~350-770 turns for 300 keys).
    const s = await history(1, 3000);
    const reference = await s.store.hashKV(0);
    let settled = false;
    const running = s.store.hashKV(0).finally(() => (settled = true));
    await turn();
    await s.backend.defragment();
    expect(settled).toBe(false);
    expect(await running).toEqual(reference);
  });
});

describe('MvccStore ranges in steps', () => {
  const key = (i: number): Buffer => b(`k${String(i).padStart(4, '0')}`);
  function loaded(): S {
    // Seven records per turn of the event loop: 600 keys take ~85 turns.
    const s = fresh(undefined, { rangeStep: 7 });
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 600; i += 100) {
        write(s, (t) => {
          for (let j = i; j < i + 100; j++) t.put(key(j), b(`r${round}-${j}`), 0n);
        });
      }
    }
    write(s, (t) => t.deleteRange(key(0), key(10)));
    return s;
  }
  const records = (into: string[]) => (record: Uint8Array, length: number): void => {
    into.push(Buffer.from(record.subarray(0, length)).toString('hex'));
  };
  const turn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

  it('reads what rangeRecords reads, at the revision it started at, whatever is written or compacted (at or below it) between its steps', async () => {
    const s = loaded();
    const rev = s.store.currentRevision();
    for (const opts of [{ rev: rev - 3 }, { limit: 100 }, { countOnly: true }, {}]) {
      const want: string[] = [];
      const wantCount = s.store.rangeRecords(b('k'), b('l'), opts, records(want));
      const got: string[] = [];
      let settled = false;
      const running = s.store.rangeRecordsInSteps(b('k'), b('l'), opts, records(got)).finally(() => (settled = true));
      let turns = 0;
      let compaction: Promise<void> = Promise.resolve();
      while (!settled) {
        await turn();
        turns++;
        write(s, (t) => {
          t.put(key(turns % 600), b(`during${turns}`), 0n);
          t.put(b(`k0100x${turns}`), b('new'), 0n);
          t.deleteRange(key(599 - (turns % 100)), null);
        });
        // A compaction at the range's revision deletes the first round's records meanwhile.
        if (turns === 2 && opts.rev === undefined && opts.limit === undefined && !opts.countOnly) compaction = s.store.compact(rev).done;
      }
      expect(await running).toEqual(wantCount);
      await compaction;
      expect(got).toEqual(want);
      if (opts.countOnly) expect(got).toEqual([]);
      if (opts.limit === undefined) expect(turns).toBeGreaterThan(opts.rev === undefined && !opts.countOnly ? 50 : 5);
    }
  });

  it('ends a turn once its time is up, whatever its count of records', async () => {
    // No count limit to speak of, no time at all: a turn every RANGE_CLOCK_RECORDS (256) records.
    const s = fresh(undefined, { rangeStep: 1_000_000, rangeTurnMs: 0 });
    write(s, (t) => {
      for (let j = 0; j < 1000; j++) t.put(key(j), b(`v${j}`), 0n);
    });
    const want: string[] = [];
    s.store.rangeRecords(b('k'), b('l'), {}, records(want));
    const got: string[] = [];
    let settled = false;
    const running = s.store.rangeRecordsInSteps(b('k'), b('l'), {}, records(got)).finally(() => (settled = true));
    let turns = 0;
    while (!settled) {
      await turn();
      turns++;
    }
    await running;
    expect(got).toEqual(want);
    expect(turns).toBeGreaterThanOrEqual(3);
  });

  it('answers "compacted" when a compaction past its revision comes between its steps', async () => {
    const s = loaded();
    const rev = s.store.currentRevision();
    const running = asyncErrName(s.store.rangeRecordsInSteps(b('k'), b('l'), {}, () => undefined));
    await turn();
    write(s, (t) => t.put(key(1), b('after'), 0n));
    s.store.compact(rev + 1);
    expect(await running).toBe(COMPACTED);
    // Closing stops one too.
    const stopped = asyncErrName(s.store.rangeRecordsInSteps(b('k'), b('l'), {}, () => undefined));
    await turn();
    await closeStore(s);
    opened.splice(opened.indexOf(s), 1);
    expect(await stopped).toBe('etcdserver: server stopped');
  });
});

describe('MvccStore events', () => {
  it('notifies listeners after the batch commits, once per writing txn', () => {
    const s = fresh();
    const got: Array<{ events: MvccEvent[]; rev: number; revSeen: number }> = [];
    s.store.onEvents((events, rev) => got.push({ events, rev, revSeen: s.store.currentRevision() }));
    s.backend.batch(() => {
      const t = s.store.write();
      t.put(b('a'), b('1'), 0n);
      t.end();
      expect(got.length).toBe(0);
      const t2 = s.store.write();
      t2.deleteRange(b('none'), null);
      t2.end();
    });
    expect(got.length).toBe(1);
    expect(got[0].rev).toBe(2);
    expect(got[0].events[0].kv.key.toString()).toBe('a');
    // Put events carry the previous value.
    write(s, (t) => t.put(b('a'), b('2'), 0n));
    expect(got[1].events[0].prevKv?.value.toString()).toBe('1');
  });

  it('eventsInRange returns whole revisions in order, with prev values when asked', () => {
    const s = fresh();
    write(s, (t) => t.put(b('a'), b('1'), 0n)); // 2
    write(s, (t) => {
      t.put(b('b'), b('1'), 0n);
      t.put(b('c'), b('1'), 0n);
      t.put(b('a'), b('2'), 0n);
    }); // 3
    write(s, (t) => t.deleteRange(b('a'), b('c'))); // 4: a, b
    write(s, (t) => t.put(b('d'), b('1'), 0n)); // 5
    const all = s.store.eventsInRange(1, 100, 100, true);
    expect(all.nextRev).toBe(6);
    expect(all.events.map((e) => `${e.type}:${e.kv.key}@${e.kv.modRevision}`)).toEqual([
      '0:a@2', '0:b@3', '0:c@3', '0:a@3', '1:a@4', '1:b@4', '0:d@5',
    ]);
    expect(all.events[3].prevKv?.value.toString()).toBe('1');
    expect(all.events[4].prevKv?.value.toString()).toBe('2');
    expect(all.events[0].prevKv).toBeNull();
    // maxEvents never splits a revision.
    const part = s.store.eventsInRange(2, 5, 2, false);
    expect(part.events.length).toBe(4); // rev 2 (1 event) + all of rev 3
    expect(part.nextRev).toBe(4);
    expect(part.events[3].prevKv).toBeNull();
    const rest = s.store.eventsInRange(part.nextRev, 5, 2, false);
    expect(rest.events.length).toBe(2);
    expect(rest.nextRev).toBe(5);
    expect(s.store.eventsInRange(5, 5, 10, false).events.length).toBe(1);
    s.store.compact(3);
    expect(errName(() => s.store.eventsInRange(2, 5, 10, false))).toBe(COMPACTED);
    expect(s.store.eventsInRange(4, 5, 10, true).events[0].prevKv?.value.toString()).toBe('2');
  });

  it('prev values of a key written twice in one txn are those etcd watchers get (found by differential-random)', () => {
    // etcd's watch server fills prev_kv by reading the key at modRevision - 1, and leaves it out
    // for a create (create_revision == mod_revision). A delete from a key ("\0" end) escapes the
    // duplicate-key check, so one txn can delete a key and create it again, or put and delete it.
    const s = fresh();
    write(s, (t) => {
      t.put(b('a'), b('old'), 0n);
      t.put(b('c'), b('old'), 0n);
    }); // 2
    const live = write(s, (t) => {
      t.put(b('b'), b('new'), 0n);
      const del = t.deleteRange(b('a'), b('\0'));
      // The delete itself sees the txn's own put.
      expect(del.prevKvs.map((kv) => `${kv.key}=${kv.value}`)).toEqual(['a=old', 'b=new', 'c=old']);
      t.put(b('c'), b('again'), 0n);
    }); // 3
    const show = (evs: typeof live): string[] => evs.map((e) => `${e.type}:${e.kv.key}@${e.kv.modRevision} prev=${e.prevKv ? e.prevKv.value.toString() : '-'}`);
    const want = ['0:b@3 prev=-', '1:a@3 prev=old', '1:b@3 prev=-', '1:c@3 prev=old', '0:c@3 prev=-'];
    expect(show(live)).toEqual(want);
    expect(show(s.store.eventsInRange(3, 3, 10, true).events)).toEqual(want);
  });
});

describe('MvccStore with backend maintenance', () => {
  it('keeps working across a defragment, and the snapshot copy holds the data', async () => {
    const s = fresh();
    for (let i = 0; i < 200; i++) write(s, (t) => t.put(b(`k${i % 20}`), Buffer.alloc(1000, i), 0n));
    await s.store.compact(s.store.currentRevision()).done;
    const before = await s.store.hashKV(0);
    await s.backend.defragment();
    expect(await s.store.hashKV(0)).toEqual(before);
    write(s, (t) => t.put(b('after'), b('defrag'), 0n));
    expect(s.store.range(b('after'), null).kvs[0].value.toString()).toBe('defrag');
    expect(s.store.range(b('k'), b('l')).count).toBe(20);
    await closeStore(s);
    opened.splice(opened.indexOf(s), 1);
    const q = fresh(s.dbPath);
    expect(q.store.range(b('after'), null).kvs[0].modRevision).toBe(202);
  });
});

describe('MvccStore on disk', () => {
  it('fills the key bucket page by page: 3000 records of 1 KiB take ~1000 pages, not ~1500', () => {
    const s = fresh();
    const value = Buffer.alloc(1024, 0x61);
    const before = s.backend.sizeBytes();
    for (let i = 0; i < 3000; i++) write(s, (t) => t.put(b(`/registry/pods/default/p${i}`), value, 0n));
    write(s, (t) => t.deleteRange(b('/registry/pods/default/p0'), null));
    const pages = (s.backend.sizeBytes() - before) / 4096;
    // Three ~1.1 KiB records fit a 4 KiB page. Inserted rather than appended, each split page kept
    // two of them: 1500 pages. Appended, a page is left full: ~1000, plus branch and free pages.
    expect(pages).toBeGreaterThan(1000);
    expect(pages).toBeLessThan(1150);
    expect(s.store.range(b('/registry/'), b('/registry0')).count).toBe(2999);
    expect(s.store.currentRevision()).toBe(3002);
  });

  it('refuses a record whose revision key is not above the last one, and writes nothing', () => {
    const s = fresh();
    write(s, (t) => t.put(b('a'), b('1'), 0n));
    write(s, (t) => t.put(b('b'), b('2'), 0n));
    const kv = s.backend.subDb(KEY_DB);
    const records = kv.getKeysCount({});
    expect(() => s.backend.batch(() => appendKeyRecord(kv, revToBytes(2, 0), b('stale')))).toThrow(
      "record at revision key 00000000000000025f0000000000000000 is not above the key bucket's last one",
    );
    expect(kv.getKeysCount({})).toBe(records);
    expect(s.store.range(b('a'), null).kvs[0].value.toString()).toBe('1');
  });
});
