// Random histories checked against a plain model of etcd's semantics: every revision's full
// key space, reads at old revisions, compaction and restarts.
import { afterEach, describe, expect, it } from 'vitest';
import type { KeyValue } from '../../../src/mvcc/types';
import { closeStore, openStore } from './helpers';
import { mulberry32 } from '../../helpers/random';

type S = ReturnType<typeof openStore>;
const opened: S[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await closeStore(s).catch(() => undefined);
});

const rng = mulberry32;

const KEYS = [
  Buffer.from([0x00]),
  Buffer.from([0x00, 0x00]),
  Buffer.from('a'),
  Buffer.from('a\u0000'),
  Buffer.from('ab'),
  Buffer.from('b'),
  Buffer.from([0xff]),
  Buffer.from([0xff, 0xff]),
  Buffer.alloc(3000, 0x6b),
];

type Space = Map<string, KeyValue>;
const hex = (b: Buffer) => b.toString('hex');

function inRange(k: Buffer, key: Buffer, end: Buffer | null): boolean {
  if (end === null || end.length === 0) return k.equals(key);
  if (end.length === 1 && end[0] === 0) return Buffer.compare(k, key) >= 0;
  return Buffer.compare(k, key) >= 0 && Buffer.compare(k, end) < 0;
}

function modelRange(space: Space, key: Buffer, end: Buffer | null): KeyValue[] {
  return [...space.values()].filter((kv) => inRange(kv.key, key, end)).sort((x, y) => Buffer.compare(x.key, y.key));
}

function pickRange(r: () => number): [Buffer, Buffer | null] {
  const key = KEYS[Math.floor(r() * KEYS.length)];
  const x = r();
  if (x < 0.4) return [key, null];
  if (x < 0.55) return [key, Buffer.from([0])];
  return [key, KEYS[Math.floor(r() * KEYS.length)]];
}

describe('MvccStore against a model', () => {
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    it(`random history, seed ${seed}`, async () => {
      const r = rng(seed);
      let s = openStore();
      opened.push(s);
      const history: Space[] = [new Map(), new Map()]; // index = revision; rev 1 is empty
      let compactRev = 0;
      for (let step = 0; step < 400; step++) {
        const x = r();
        const cur = history.length - 1;
        if (x < 0.55) {
          // A txn of 1..3 writes (distinct keys, as the API enforces).
          const next = new Map(history[cur]);
          const rev = cur + 1;
          const n = 1 + Math.floor(r() * 3);
          const used = new Set<string>();
          let wrote = false;
          s.backend.batch(() => {
            const t = s.store.write();
            for (let i = 0; i < n; i++) {
              if (r() < 0.75) {
                const key = KEYS[Math.floor(r() * KEYS.length)];
                if (used.has(hex(key))) continue;
                used.add(hex(key));
                const value = Buffer.from(`v${step}.${i}`);
                const lease = r() < 0.2 ? BigInt(Math.floor(r() * 5)) : 0n;
                t.put(key, value, lease);
                const prev = next.get(hex(key));
                next.set(hex(key), { key, value, lease, modRevision: rev, createRevision: prev ? prev.createRevision : rev, version: prev ? prev.version + 1 : 1 });
                wrote = true;
              } else {
                const [key, end] = pickRange(r);
                const victims = modelRange(next, key, end);
                if (victims.some((v) => used.has(hex(v.key)))) continue;
                const res = t.deleteRange(key, end);
                expect(res.deleted).toBe(victims.length);
                for (const v of victims) {
                  used.add(hex(v.key));
                  next.delete(hex(v.key));
                }
                if (victims.length > 0) wrote = true;
              }
            }
            t.end();
          });
          if (wrote) history.push(next);
          expect(s.store.currentRevision()).toBe(history.length - 1);
        } else if (x < 0.85) {
          const low = Math.max(compactRev, 1);
          const rev = low + Math.floor(r() * (cur - low + 1));
          const [key, end] = pickRange(r);
          const got = s.store.range(key, end, { rev: rev === cur ? 0 : rev });
          const want = modelRange(history[rev], key, end);
          expect(got.count).toBe(want.length);
          expect(got.kvs).toEqual(want);
          expect(got.rev).toBe(cur);
        } else if (x < 0.9) {
          if (cur > compactRev) {
            const rev = compactRev + 1 + Math.floor(r() * (cur - compactRev));
            const { done } = s.store.compact(rev);
            compactRev = rev;
            if (r() < 0.5) await done;
          }
        } else if (x < 0.95) {
          // Events between two revisions: every change, in order.
          const from = Math.max(compactRev, 1) + Math.floor(r() * 3);
          const got = s.store.eventsInRange(from, cur, 1000, false).events;
          let n = 0;
          for (let rev = Math.max(from, 2); rev <= cur; rev++) {
            const before = history[rev - 1];
            const after = history[rev];
            for (const [k, kv] of after) if (before.get(k) !== kv) n++;
            for (const k of before.keys()) if (!after.has(k)) n++;
          }
          expect(got.length).toBe(n);
          for (let i = 1; i < got.length; i++) expect(got[i].kv.modRevision).toBeGreaterThanOrEqual(got[i - 1].kv.modRevision);
        } else {
          await closeStore(s);
          opened.splice(opened.indexOf(s), 1);
          s = openStore(s.dbPath);
          opened.push(s);
          expect(s.store.currentRevision()).toBe(cur);
          expect(s.store.compactRevision()).toBe(compactRev);
        }
        expect(s.store.keyCount()).toBe(history[history.length - 1].size);
      }
    });
  }
});
