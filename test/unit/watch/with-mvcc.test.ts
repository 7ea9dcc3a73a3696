// The hub and the lessor against the real backend and MVCC store: the contracts they were
// written against (eventsInRange, after-commit notification, lease sub-database) hold.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Backend } from '../../../src/backend/backend';
import { MvccStore } from '../../../src/mvcc/store';
import { Lessor } from '../../../src/lease/lessor';
import { WatchHub } from '../../../src/watch/watch-hub';
import type { WatchStreamEvent } from '../../../src/watch/types';
import type { MvccEvent } from '../../../src/mvcc/types';
import { params, view } from './helpers';
import { applyPut } from '../../../src/apply/kv';
import { putReq } from '../apply/kv_helpers';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function open() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'watch-mvcc-'));
  const backend = Backend.open(path.join(dir, 'db'));
  const mvcc = new MvccStore(backend);
  const clock = { ms: 0 };
  const lessor = new Lessor({ db: backend.subDb('lease'), nowMs: () => clock.ms, minTtlSec: 1 });
  lessor.recover(mvcc.keysWithLease());
  const hub = new WatchHub(mvcc, { progressNotifyIntervalMs: 60_000 });
  mvcc.onEvents((events, rev) => hub.notify(events, rev));
  // As server.ts wires them: a put reads the key's previous value only while a watcher asked for it.
  mvcc.eventsNeedPrevKv = () => hub.wantsPrevKv();
  const stored: MvccEvent[] = [];
  mvcc.onEvents((events) => stored.push(...events));
  cleanups.push(async () => {
    hub.close();
    await new Promise((r) => setTimeout(r, 20));
    await mvcc.close();
    await backend.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const put = (key: string, value: string, lease = 0n) =>
    backend.batch(() => {
      const txn = mvcc.write();
      applyPut(txn, lessor, putReq(key, value, { lease: String(lease) }));
      txn.end();
    });
  const revoke = (id: bigint) =>
    backend.batch(() => {
      const keys = lessor.revoke(id);
      const txn = mvcc.write();
      for (const k of keys) txn.deleteRange(k, null);
      txn.end();
    });
  return { backend, mvcc, lessor, hub, put, revoke, clock, stored };
}

async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

describe('WatchHub + Lessor on the real MVCC store', () => {
  it('a revoked lease deletes its keys in one revision, seen by live and replaying watchers', async () => {
    const { hub, lessor, put, revoke, backend } = open();
    const got: WatchStreamEvent[] = [];
    const s = hub.openStream((e) => (got.push(e), true));
    const live = s.create(params({ key: 'svc/', rangeEnd: Buffer.from('svc0'), prevKv: true }));
    backend.batch(() => lessor.grant(42n, 10));
    put('svc/a', '1', 42n); // 2
    put('svc/b', '2', 42n); // 3
    put('other', 'x'); // 4
    put('svc/a', '3', 42n); // 5
    revoke(42n); // 6: both keys deleted
    expect(lessor.exists(42n)).toBe(false);
    const want = ['PUT svc/a@2=1', 'PUT svc/b@3=2', 'PUT svc/a@5=3 prev=1@2', 'DEL svc/a@6= prev=3@5', 'DEL svc/b@6= prev=2@3'];
    expect(got.filter((r) => r.watchId === live).flatMap((r) => view(r.events))).toEqual(want);
    const lastLive = got[got.length - 1];
    expect(lastLive.events).toHaveLength(2); // one revision, one response

    const replay = s.create(params({ key: 'svc/', rangeEnd: Buffer.from('svc0'), startRevision: 1, prevKv: true }));
    await until(() => hub.slowWatcherCount() === 0, 'catch-up');
    expect(got.filter((r) => r.watchId === replay).flatMap((r) => view(r.events))).toEqual(want);
  });

  it('a watcher starting before a compaction gets compact_revision', async () => {
    const { hub, mvcc, put, backend } = open();
    for (let i = 0; i < 5; i++) put('k', String(i)); // revs 2..6
    await backend.batch(() => mvcc.compact(5)).done;
    const got: WatchStreamEvent[] = [];
    const s = hub.openStream((e) => (got.push(e), true));
    const old = s.create(params({ key: 'k', startRevision: 3 }));
    const atCompact = s.create(params({ key: 'k', startRevision: 5 }));
    await until(() => hub.slowWatcherCount() === 0, 'catch-up');
    expect(got.find((r) => r.watchId === old && r.canceled)).toMatchObject({ compactRevision: 5, headerRevision: 0 });
    expect(got.filter((r) => r.watchId === atCompact).flatMap((r) => view(r.events))).toEqual(['PUT k@5=3', 'PUT k@6=4']);
  });

  it('live events carry prev_kv while some watcher asked for it, and only then', async () => {
    const { hub, mvcc, put, backend, stored } = open();
    const got: WatchStreamEvent[] = [];
    const s = hub.openStream((e) => (got.push(e), true));
    const seen = (id: number): string[] => got.filter((r) => r.watchId === id).flatMap((r) => view(r.events));
    const plain = s.create(params({ key: 'k' }));
    put('k', '1'); // 2
    put('k', '2'); // 3
    expect(hub.wantsPrevKv()).toBe(false);
    expect(stored[stored.length - 1].prevKv).toBeNull();

    const withPrev = s.create(params({ key: 'k', prevKv: true }));
    expect(hub.wantsPrevKv()).toBe(true);
    put('k', '3'); // 4
    expect(seen(withPrev)).toEqual(['PUT k@4=3 prev=2@3']);
    expect(seen(plain)).toEqual(['PUT k@2=1', 'PUT k@3=2', 'PUT k@4=3']);

    expect(s.cancel(withPrev)).toBe(true);
    expect(hub.wantsPrevKv()).toBe(false);
    put('k', '4'); // 5
    expect(stored[stored.length - 1].prevKv).toBeNull();

    // One catching up from the past counts from its start, through its move to the live set.
    const replay = s.create(params({ key: 'k', startRevision: 2, prevKv: true }));
    expect(hub.wantsPrevKv()).toBe(true);
    await until(() => hub.slowWatcherCount() === 0, 'catch-up');
    put('k', '5'); // 6
    expect(seen(replay)).toEqual(['PUT k@2=1', 'PUT k@3=2 prev=1@2', 'PUT k@4=3 prev=2@3', 'PUT k@5=4 prev=3@4', 'PUT k@6=5 prev=4@5']);

    // One that found its start compacted away is out; so is every watcher of a closed stream.
    await backend.batch(() => mvcc.compact(6)).done;
    const late = s.create(params({ key: 'k', startRevision: 3, prevKv: true }));
    await until(() => got.some((r) => r.watchId === late && r.canceled), 'compacted');
    expect(hub.wantsPrevKv()).toBe(true); // `replay` is still there
    s.close();
    expect(hub.wantsPrevKv()).toBe(false);
    put('k', '6'); // 7
    expect(stored[stored.length - 1].prevKv).toBeNull();
  });
});
