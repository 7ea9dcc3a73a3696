// Property-style test: random writes, random watchers (keys, ranges, start revisions, filters,
// prev_kv), random slow clients, cancels, progress requests and timer ticks. Every watcher must
// receive exactly the events it should, in order, once; every progress notification must only
// claim a revision whose events the watcher(s) already have.
import { describe, expect, it } from 'vitest';
import type { MvccEvent } from '../../../src/mvcc/types';
import { WatchFilter, type WatchStreamEvent } from '../../../src/watch/types';
import type { Op } from './fake-store';
import { params, setup, view } from './helpers';
import { mulberry32 } from '../../helpers/random';


const KEYS = ['a', 'a/1', 'a/2', 'ab', 'b', 'b/1', 'c', '\x00z', 'zz', 'é', 'ÿ/1', 'a\u0080'];

interface Spec {
  key: Buffer;
  rangeEnd: Buffer;
  effStart: number;
  noPut: boolean;
  noDelete: boolean;
  prevKv: boolean;
}

interface Track {
  spec: Spec;
  id: number;
  clientIdx: number;
  got: string[];
  canceled: boolean;
  compacted: boolean;
  exp: string[];
  expRevs: number[];
  expUpTo: number;
}

function matches(spec: Spec, key: Buffer): boolean {
  const k = spec.key.length === 0 ? Buffer.from([0]) : spec.key;
  if (spec.rangeEnd.length === 0) return key.equals(k);
  if (Buffer.compare(key, k) < 0) return false;
  if (spec.rangeEnd.length === 1 && spec.rangeEnd[0] === 0) return true;
  return Buffer.compare(key, spec.rangeEnd) < 0;
}

/** Extends the track's expected-event cache up to `upToRev`; returns how many fall at or below it. */
function expectedUpTo(history: Map<number, MvccEvent[]>, t: Track, upToRev: number): number {
  for (let r = Math.max(t.expUpTo + 1, t.spec.effStart); r <= upToRev; r++) {
    for (const ev of history.get(r) ?? []) {
      if (!matches(t.spec, ev.kv.key)) continue;
      if (ev.type === 0 && t.spec.noPut) continue;
      if (ev.type === 1 && t.spec.noDelete) continue;
      t.exp.push(view([t.spec.prevKv ? ev : { ...ev, prevKv: null }])[0]);
      t.expRevs.push(r);
    }
  }
  t.expUpTo = Math.max(t.expUpTo, upToRev);
  let n = t.expRevs.length;
  while (n > 0 && t.expRevs[n - 1] > upToRev) n--;
  return n;
}

function check(cond: boolean, msg: () => string): void {
  if (!cond) throw new Error(msg());
}

function runScenario(seed: number, steps: number, withCompaction: boolean): { responses: number; checks: number; compacted: number } {
  const rnd = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const env = setup({
    maxEventsPerResponse: 1 + Math.floor(rnd() * 8),
    maxWatchersPerSync: 1 + Math.floor(rnd() * 4),
    maxCatchUpResponseBytes: rnd() < 0.5 ? 1 + Math.floor(rnd() * 300) : undefined,
  });
  const { store, hub } = env;
  const tracks: Track[] = [];
  let responses = 0;
  let checks = 0;

  interface C {
    accept: boolean;
    stream: ReturnType<typeof hub.openStream>;
    byId: Map<number, Track>;
  }
  const clients: C[] = [];
  const onResponse = (ci: number, r: WatchStreamEvent) => {
    responses++;
    const c = clients[ci];
    expect(r.fragment).toBe(false);
    if (r.watchId === -1) {
      if (r.created) return; // refused create (not generated here)
      // Stream-wide progress: every live watcher of the stream is complete up to the header.
      for (const t of c.byId.values()) {
        if (t.canceled || t.compacted) continue;
        const n = expectedUpTo(store.allRevisions, t, r.headerRevision);
        check(t.got.length === n, () => `stream progress at ${r.headerRevision}: watch ${t.id} has ${t.got.length} of ${n} events`);
        checks++;
      }
      return;
    }
    const t = c.byId.get(r.watchId);
    if (r.created) return; // registered by the caller right after create() returns
    expect(t, `response for unknown watch ${r.watchId}`).toBeDefined();
    if (!t) return;
    expect(t.canceled, 'response after cancel').toBe(false);
    expect(t.compacted, 'response after compaction cancel').toBe(false);
    if (r.canceled) {
      if (r.compactRevision !== 0) t.compacted = true;
      else t.canceled = true;
      return;
    }
    if (r.events.length === 0) {
      // Per-watcher progress notification.
      const n = expectedUpTo(store.allRevisions, t, r.headerRevision);
      check(t.got.length === n, () => `progress at ${r.headerRevision}: watch ${t.id} has ${t.got.length} of ${n} events`);
      checks++;
    } else {
      const last = r.events[r.events.length - 1].kv.modRevision;
      check(r.headerRevision >= last, () => `header ${r.headerRevision} below event revision ${last}`);
      expectedUpTo(store.allRevisions, t, last);
      for (const e of view(r.events)) {
        const i = t.got.length;
        check(t.exp[i] === e, () => `watch ${t.id} event #${i}: got ${e}, want ${t.exp[i]}`);
        t.got.push(e);
      }
      checks++;
    }
  };
  const nClients = 1 + Math.floor(rnd() * 3);
  for (let i = 0; i < nClients; i++) {
    const c = { accept: true, byId: new Map<number, Track>() } as C;
    clients.push(c);
    c.stream = hub.openStream((r) => {
      onResponse(i, r);
      return c.accept;
    });
  }

  const randomOps = (): Op[] => {
    const n = 1 + Math.floor(rnd() * 3);
    const ops: Op[] = [];
    const used = new Set<string>();
    for (let i = 0; i < n; i++) {
      const k = pick(KEYS);
      if (used.has(k)) continue; // etcd rejects duplicate keys in one txn
      used.add(k);
      ops.push(rnd() < 0.75 ? { put: k, value: `v${Math.floor(rnd() * 1000)}` } : { del: k });
    }
    return ops;
  };

  const createWatcher = () => {
    const ci = Math.floor(rnd() * clients.length);
    const c = clients[ci];
    const shape = rnd();
    let key = Buffer.from(pick(KEYS));
    let rangeEnd = Buffer.alloc(0);
    if (shape < 0.3) {
      // single key
    } else if (shape < 0.55) {
      // prefix
      const p = pick(['a', 'a/', 'b', '', 'ÿ']);
      key = Buffer.from(p);
      rangeEnd = p === '' ? Buffer.from([0]) : Buffer.from(p.slice(0, -1) + String.fromCharCode(p.charCodeAt(p.length - 1) + 1));
    } else if (shape < 0.75) {
      const [x, y] = [pick(KEYS), pick(KEYS)].sort();
      if (x === y) return;
      key = Buffer.from(x);
      rangeEnd = Buffer.from(y);
    } else {
      rangeEnd = Buffer.from([0]);
    }
    const cur = hub.currentRevision();
    const startRevision = rnd() < 0.4 ? 0 : 1 + Math.floor(rnd() * (cur + 3));
    const filters: number[] = [];
    if (rnd() < 0.15) filters.push(WatchFilter.NOPUT);
    if (rnd() < 0.15) filters.push(WatchFilter.NODELETE);
    const spec: Spec = {
      key,
      rangeEnd,
      effStart: startRevision === 0 ? cur + 1 : startRevision,
      noPut: filters.includes(WatchFilter.NOPUT),
      noDelete: filters.includes(WatchFilter.NODELETE),
      prevKv: rnd() < 0.5,
    };
    const progressNotify = rnd() < 0.5;
    // Register the track before create() so responses emitted inside it find it.
    const pendingTrack: Track = { spec, id: -2, clientIdx: ci, got: [], canceled: false, compacted: false, exp: [], expRevs: [], expUpTo: 0 };
    const watchId = rnd() < 0.1 ? 1000 + tracks.length : 0;
    const id = c.stream.create(params({ key, rangeEnd, startRevision, filters, prevKv: spec.prevKv, progressNotify, watchId }));
    expect(id).toBeGreaterThanOrEqual(0);
    pendingTrack.id = id;
    c.byId.set(id, pendingTrack);
    tracks.push(pendingTrack);
  };

  for (let s = 0; s < steps; s++) {
    const a = rnd();
    if (a < 0.35) {
      const r = store.write(randomOps());
      if (r) hub.notify(r.events, r.rev);
    } else if (a < 0.5) {
      createWatcher();
    } else if (a < 0.62) {
      env.step();
    } else if (a < 0.7) {
      const c = pick(clients);
      c.accept = rnd() < 0.6;
      if (c.accept) c.stream.resume();
    } else if (a < 0.75) {
      const live = tracks.filter((t) => !t.canceled && !t.compacted);
      if (live.length > 0) {
        const t = pick(live);
        expect(clients[t.clientIdx].stream.cancel(t.id)).toBe(true);
        expect(t.canceled).toBe(true);
      }
    } else if (a < 0.82) {
      pick(clients).stream.requestProgress();
    } else if (a < 0.87) {
      env.fireProgressTimer();
    } else if (a < 0.89 && withCompaction) {
      const cur = store.currentRevision();
      const at = Math.max(store.compactRevision(), cur - Math.floor(rnd() * 20));
      store.compact(at);
    } else {
      // several writes in a burst (one apply round)
      for (let i = 0; i < 5; i++) {
        const r = store.write(randomOps());
        if (r) hub.notify(r.events, r.rev);
      }
    }
  }

  // Let everyone read, finish catching up, and check final sequences.
  for (const c of clients) {
    c.accept = true;
    c.stream.resume();
  }
  env.drain();
  expect(hub.slowWatcherCount()).toBe(0);
  const finalRev = store.currentRevision();
  for (const t of tracks) {
    const n = expectedUpTo(store.allRevisions, t, finalRev);
    if (t.canceled) {
      check(t.got.length <= n, () => `canceled watch ${t.id} got extra events`);
    } else {
      if (t.compacted) {
        check(withCompaction && t.got.length <= n, () => `watch ${t.id} compacted without compaction`);
      } else check(t.got.length === n, () => `watch ${t.id} ended with ${t.got.length} of ${n} events`);
    }
    checks++;
  }
  expect(hub.watcherCount()).toBe(tracks.filter((t) => !t.canceled && !t.compacted).length);
  return { responses, checks, compacted: tracks.filter((t) => t.compacted).length };
}

describe('WatchHub property: random workloads', () => {
  it('every watcher gets exactly its events, in order, once; progress never runs ahead', () => {
    let responses = 0;
    let checks = 0;
    let compacted = 0;
    const seeds = Number(process.env.WATCH_PROP_SEEDS ?? 20);
    for (let seed = 1; seed <= seeds; seed++) {
      try {
        const t0 = Date.now();
        const r = runScenario(seed, 400, seed % 2 === 0);
        if (process.env.WATCH_PROP_TIMING) console.log(seed, Date.now() - t0, r);
        responses += r.responses;
        checks += r.checks;
        compacted += r.compacted;
      } catch (e) {
        throw new Error(`seed ${seed}: ${(e as Error).message}`);
      }
    }
    expect(responses).toBeGreaterThan(1000);
    expect(checks).toBeGreaterThan(1000);
    expect(compacted).toBeGreaterThan(0);
  }, 180_000);
});
