import { describe, expect, it } from 'vitest';
import { WatchHub } from '../../../src/watch/watch-hub';
import { WatchCancelReason, WatchFilter, type WatchStreamEvent } from '../../../src/watch/types';
import { FakeStore } from './fake-store';
import { eventsOf, params, setup, view } from './helpers';

describe('WatchHub basics', () => {
  it('sends created first (header = current revision), then live events of the watched key', () => {
    const { write, client } = setup();
    write({ put: 'a', value: '1' }); // rev 2
    const c = client();
    c.stream.create(params({ key: 'a' }));
    expect(c.got).toEqual([
      { watchId: 0, headerRevision: 2, created: true, canceled: false, compactRevision: 0, cancelReason: '', fragment: false, events: [] },
    ]);
    write({ put: 'b', value: 'x' }); // rev 3, other key
    write({ put: 'a', value: '2' }); // rev 4
    write({ del: 'a' }); // rev 5
    expect(c.got.slice(1).map((r) => [r.watchId, r.headerRevision, view(r.events)])).toEqual([
      [0, 4, ['PUT a@4=2']],
      [0, 5, ['DEL a@5=']],
    ]);
  });

  it('matches single keys, ranges, prefixes and "from key" (range_end \\0); empty key means \\0', () => {
    const { write, client } = setup();
    const c = client();
    const single = c.stream.create(params({ key: 'foo' }));
    const range = c.stream.create(params({ key: 'b', rangeEnd: Buffer.from('d') }));
    const prefix = c.stream.create(params({ key: 'foo', rangeEnd: Buffer.from('fop') }));
    const fromKey = c.stream.create(params({ key: 'c', rangeEnd: Buffer.from([0]) }));
    const all = c.stream.create(params({ key: '', rangeEnd: Buffer.from([0]) }));
    for (const k of ['a', 'b', 'c', 'd', 'foo', 'foo/bar', 'fop', 'zzz']) write({ put: k, value: 'v' });
    const keys = (id: number) => eventsOf(c.got, id).map((s) => s.split('@')[0].slice(4));
    expect(keys(single)).toEqual(['foo']);
    expect(keys(range)).toEqual(['b', 'c']);
    expect(keys(prefix)).toEqual(['foo', 'foo/bar']);
    expect(keys(fromKey)).toEqual(['c', 'd', 'foo', 'foo/bar', 'fop', 'zzz']);
    expect(keys(all)).toEqual(['a', 'b', 'c', 'd', 'foo', 'foo/bar', 'fop', 'zzz']);
  });

  it('orders keys bytewise, including bytes >= 0x80 and trailing zero bytes', () => {
    const { write, client } = setup();
    const c = client();
    const b = (...xs: number[]) => Buffer.from(xs);
    const high = c.stream.create(params({ key: b(0x80), rangeEnd: b(0xff) }));
    const fromHigh = c.stream.create(params({ key: b(0x7f, 0xff), rangeEnd: b(0) }));
    const exact = c.stream.create(params({ key: b(0x61) }));
    for (const k of [b(0x7f), b(0x7f, 0xff), b(0x80), b(0x80, 0), b(0xfe, 0xff), b(0xff), b(0xff, 0), b(0x61, 0), b(0x61)]) {
      write({ put: k, value: 'v' });
    }
    const keys = (id: number) => c.got.filter((r) => r.watchId === id).flatMap((r) => r.events.map((e) => e.kv.key.toString('hex')));
    expect(keys(high)).toEqual(['80', '8000', 'feff']);
    expect(keys(fromHigh)).toEqual(['7fff', '80', '8000', 'feff', 'ff', 'ff00']);
    expect(keys(exact)).toEqual(['61']);
  });

  it('puts all events of one revision (a txn) into one response', () => {
    const { write, client } = setup();
    const c = client();
    const id = c.stream.create(params({ key: 'k', rangeEnd: Buffer.from('l') }));
    write({ put: 'k1', value: 'a' }, { put: 'x', value: 'b' }, { put: 'k2', value: 'c' });
    expect(c.got.slice(1).map((r) => view(r.events))).toEqual([['PUT k1@2=a', 'PUT k2@2=c']]);
    expect(c.got[1].watchId).toBe(id);
  });

  it('applies NOPUT / NODELETE filters and sends nothing when all events are filtered', () => {
    const { write, client } = setup();
    const c = client();
    const noPut = c.stream.create(params({ key: 'a', filters: [WatchFilter.NOPUT] }));
    const noDel = c.stream.create(params({ key: 'a', filters: [WatchFilter.NODELETE] }));
    write({ put: 'a', value: '1' });
    write({ del: 'a' });
    expect(eventsOf(c.got, noPut)).toEqual(['DEL a@3=']);
    expect(eventsOf(c.got, noDel)).toEqual(['PUT a@2=1']);
    expect(c.got.length).toBe(2 + 2); // two created + one response each
  });

  it('strips prevKv unless the watcher asked for it, without touching the store events', () => {
    const { store, write, client } = setup();
    const c = client();
    const plain = c.stream.create(params({ key: 'a' }));
    const withPrev = c.stream.create(params({ key: 'a', prevKv: true }));
    write({ put: 'a', value: '1' });
    write({ put: 'a', value: '2' });
    write({ del: 'a' });
    expect(eventsOf(c.got, plain)).toEqual(['PUT a@2=1', 'PUT a@3=2', 'DEL a@4=']);
    expect(eventsOf(c.got, withPrev)).toEqual(['PUT a@2=1', 'PUT a@3=2 prev=1@2', 'DEL a@4= prev=2@3']);
    expect(store.history.get(3)![0].prevKv).not.toBeNull();
  });

  it('hands the watchers of a one-event revision shared, frozen event lists (one with prevKv, one without)', () => {
    const { write, client } = setup();
    const a = client();
    const b = client();
    const ids = [a.stream.create(params({ key: 'a' })), b.stream.create(params({ key: 'a' })), a.stream.create(params({ key: 'a', prevKv: true }))];
    write({ put: 'a', value: '1' });
    write({ put: 'a', value: '2' });
    const last = (c: typeof a, id: number) => c.got.filter((r) => r.watchId === id).at(-1)!;
    const [plainA, plainB, withPrev] = [last(a, ids[0]), last(b, ids[1]), last(a, ids[2])];
    expect(view(plainA.events)).toEqual(['PUT a@3=2']);
    expect(view(withPrev.events)).toEqual(['PUT a@3=2 prev=1@2']);
    expect(plainB.events).toBe(plainA.events);
    expect(Object.isFrozen(plainA.events) && Object.isFrozen(withPrev.events)).toBe(true);
    expect(() => (plainA.events as unknown as unknown[]).push(null)).toThrow();
  });

  it('start revision 0 and current+1 are live; a future start waits for its revision', () => {
    const { write, client } = setup();
    write({ put: 'a', value: '1' }); // 2
    const c = client();
    const fut = c.stream.create(params({ key: 'a', startRevision: 5 }));
    const next = c.stream.create(params({ key: 'a', startRevision: 3 }));
    write({ put: 'a', value: '2' }); // 3
    write({ put: 'a', value: '3' }); // 4
    write({ put: 'a', value: '4' }); // 5
    expect(eventsOf(c.got, next)).toEqual(['PUT a@3=2', 'PUT a@4=3', 'PUT a@5=4']);
    expect(eventsOf(c.got, fut)).toEqual(['PUT a@5=4']);
  });
});

describe('WatchHub history replay', () => {
  it('replays history from a past start revision in bounded batches, then goes live without gaps or duplicates', () => {
    const { store, write, client, drain, step, hub } = setup({ maxEventsPerResponse: 3 });
    for (let i = 1; i <= 10; i++) write({ put: 'k', value: String(i) }, { put: 'other', value: String(i) }); // revs 2..11
    const c = client();
    const id = c.stream.create(params({ key: 'k', startRevision: 4 }));
    expect(c.got.length).toBe(1); // only created so far: replay happens on later turns
    expect(hub.slowWatcherCount()).toBe(1);
    step();
    write({ put: 'k', value: '11' }); // rev 12 while still catching up
    drain();
    write({ put: 'k', value: '12' }); // rev 13 live
    const expected = [];
    for (let r = 4; r <= 13; r++) expected.push(`PUT k@${r}=${r - 1}`);
    expect(eventsOf(c.got, id)).toEqual(expected);
    expect(hub.slowWatcherCount()).toBe(0);
    // Every read was bounded (a revision holds 2 events, so at most 3 events = 1 revision + ...).
    for (const r of store.reads) expect(r.returned).toBeLessThanOrEqual(3);
    // Responses during catch-up carry events in revision order and a header >= their last event.
    for (const r of c.got.slice(1)) {
      const revs = r.events.map((e) => e.kv.modRevision);
      expect([...revs].sort((a, b) => a - b)).toEqual(revs);
      expect(r.headerRevision).toBeGreaterThanOrEqual(revs[revs.length - 1]);
    }
  });

  it('a start revision below the compaction point gets created, then compact_revision + canceled', () => {
    const { store, write, client, drain, hub } = setup();
    for (let i = 0; i < 5; i++) write({ put: 'a', value: String(i) }); // revs 2..6
    store.compact(5);
    const c = client();
    const id = c.stream.create(params({ key: 'a', startRevision: 3 }));
    drain();
    expect(c.got.map((r) => [r.watchId, r.created, r.canceled, r.compactRevision, r.headerRevision])).toEqual([
      [id, true, false, 0, 6],
      [id, false, true, 5, 0],
    ]);
    expect(hub.watcherCount()).toBe(0);
    write({ put: 'a', value: 'x' });
    expect(c.got.length).toBe(2);
    // The client's cancel of the dead watcher is still answered, as etcd does.
    expect(c.stream.cancel(id)).toBe(true);
    expect(c.got[2]).toMatchObject({ watchId: id, canceled: true, created: false });
    // At the compaction revision itself the history is still there.
    const ok = c.stream.create(params({ key: 'a', startRevision: 5 }));
    drain();
    expect(eventsOf(c.got, ok)).toEqual(['PUT a@5=3', 'PUT a@6=4', 'PUT a@7=x']);
  });

  it('treats a Compacted error from the store like a compacted start', () => {
    const store = new FakeStore();
    for (let i = 0; i < 3; i++) store.write([{ put: 'a', value: String(i) }]);
    const queue: Array<() => void> = [];
    const hub = new WatchHub(store, { progressNotifyIntervalMs: 1000, schedule: (fn) => queue.push(fn), setTimer: () => 0, clearTimer: () => {} });
    const got: WatchStreamEvent[] = [];
    const s = hub.openStream((e) => (got.push(e), true));
    s.create(params({ key: 'a', startRevision: 2 }));
    // The store compacts between compactRevision() and eventsInRange(): simulate with a lying store.
    const realCompact = store.compactRevision.bind(store);
    let calls = 0;
    store.compactRevision = () => (calls++ === 0 ? 0 : realCompact());
    store.compact(3);
    while (queue.length) queue.shift()!();
    expect(got[1]).toMatchObject({ canceled: true, compactRevision: 3 });
    expect(hub.watcherCount()).toBe(0);
  });
});

describe('WatchHub IDs and cancel', () => {
  it('auto IDs count from 0 skipping client-chosen IDs; duplicates get etcd\'s created+canceled -1 response', () => {
    const { client, write } = setup();
    const c = client();
    expect(c.stream.create(params({ key: 'a', watchId: 1 }))).toBe(1);
    expect(c.stream.create(params({ key: 'a' }))).toBe(0);
    expect(c.stream.create(params({ key: 'a' }))).toBe(2);
    expect(c.stream.create(params({ key: 'a', watchId: 1 }))).toBe(-1);
    expect(c.got[3]).toEqual({
      watchId: -1, headerRevision: 1, created: true, canceled: true, compactRevision: 0,
      cancelReason: WatchCancelReason.DuplicateId, fragment: false, events: [],
    });
    expect(c.stream.create(params({ key: 'b', rangeEnd: Buffer.from('a') }))).toBe(-1);
    expect(c.got[4].cancelReason).toBe('mvcc: watcher range is empty');
    expect(c.stream.create(params({ key: 'a', startRevision: -1 }))).toBe(-1);
    expect(c.got[5].cancelReason).toBe('etcdserver: mvcc: required revision has been compacted');
    // IDs are per stream.
    const d = client();
    expect(d.stream.create(params({ key: 'a' }))).toBe(0);
    write({ put: 'a', value: '1' });
    expect(c.got.filter((r) => r.events.length > 0).map((r) => r.watchId).sort()).toEqual([0, 1, 2]);
  });

  it('cancel answers with a canceled response and stops events; unknown IDs are ignored', () => {
    const { client, write, hub } = setup();
    const c = client();
    const id = c.stream.create(params({ key: 'a', watchId: 7 }));
    write({ put: 'a', value: '1' });
    expect(c.stream.cancel(id)).toBe(true);
    expect(c.got[2]).toMatchObject({ watchId: 7, canceled: true, created: false, headerRevision: 2, events: [] });
    write({ put: 'a', value: '2' });
    expect(c.got.length).toBe(3);
    expect(c.stream.cancel(id)).toBe(false);
    expect(c.stream.cancel(12345)).toBe(false);
    expect(c.got.length).toBe(3);
    expect(hub.watcherCount()).toBe(0);
  });

  it('close drops every watcher of the stream silently', () => {
    const { client, write, hub } = setup();
    const c = client();
    c.stream.create(params({ key: 'a' }));
    c.stream.create(params({ key: 'a', startRevision: 1 }));
    c.stream.close();
    write({ put: 'a', value: '1' });
    expect(c.got.length).toBe(2);
    expect(hub.watcherCount()).toBe(0);
    expect(hub.slowWatcherCount()).toBe(0);
  });
});

describe('WatchHub progress', () => {
  it('a progress request is answered once with watch_id -1 and the current revision when synced', () => {
    const { client, write } = setup();
    const c = client();
    c.stream.requestProgress(); // no watchers: etcd sends nothing
    expect(c.got.length).toBe(0);
    c.stream.create(params({ key: 'a' }));
    write({ put: 'b', value: '1' });
    c.stream.requestProgress();
    expect(c.got[1]).toMatchObject({ watchId: -1, headerRevision: 2, created: false, canceled: false, events: [] });
    expect(c.got.length).toBe(2);
  });

  it('defers the progress answer until every watcher of the stream has caught up', () => {
    const { client, write, drain, step } = setup({ maxEventsPerResponse: 1 });
    for (let i = 0; i < 5; i++) write({ put: 'a', value: String(i) }); // revs 2..6
    const c = client();
    const id = c.stream.create(params({ key: 'a', startRevision: 2 }));
    c.stream.requestProgress();
    c.stream.requestProgress(); // collapses into the first
    step();
    expect(c.got.some((r) => r.watchId === -1)).toBe(false);
    drain();
    const idx = c.got.findIndex((r) => r.watchId === -1);
    expect(idx).toBe(c.got.length - 1);
    expect(c.got[idx].headerRevision).toBe(6);
    expect(eventsOf(c.got.slice(0, idx), id)).toHaveLength(5);
    expect(c.got.filter((r) => r.watchId === -1)).toHaveLength(1);
  });

  it('a progress request waits for a future start revision to be reached', () => {
    const { client, write } = setup();
    const c = client();
    c.stream.create(params({ key: 'a', startRevision: 4 }));
    c.stream.requestProgress();
    write({ put: 'x', value: '1' }); // 2
    write({ put: 'x', value: '1' }); // 3
    expect(c.got.some((r) => r.watchId === -1)).toBe(false);
    write({ put: 'x', value: '1' }); // 4
    expect(c.got.filter((r) => r.watchId === -1).map((r) => r.headerRevision)).toEqual([4]);
  });

  it('progress_notify: quiet watchers get an empty response each interval; an event elides the next one', () => {
    const { client, write, fireProgressTimer } = setup();
    const c = client();
    const pn = c.stream.create(params({ key: 'a', progressNotify: true }));
    c.stream.create(params({ key: 'a' })); // did not ask
    fireProgressTimer();
    expect(c.got.slice(2)).toEqual([
      { watchId: pn, headerRevision: 1, created: false, canceled: false, compactRevision: 0, cancelReason: '', fragment: false, events: [] },
    ]);
    write({ put: 'a', value: '1' });
    const before = c.got.length;
    fireProgressTimer(); // an event went out during this interval: no notification
    expect(c.got.length).toBe(before);
    write({ put: 'zzz', value: '1' });
    fireProgressTimer();
    expect(c.got[c.got.length - 1]).toMatchObject({ watchId: pn, headerRevision: 3, events: [] });
  });
});

describe('WatchHub slow readers', () => {
  it('stops pushing when the sink says so, and serves the rest from the store after resume', () => {
    const { client, write, drain, hub, queue } = setup({ maxEventsPerResponse: 2 });
    const c = client();
    const id = c.stream.create(params({ key: 'a', prevKv: true }));
    const other = c.stream.create(params({ key: 'b' }));
    c.accept = false;
    write({ put: 'a', value: '1' }); // 2: delivered (the sink took it but said "full")
    for (let i = 2; i <= 6; i++) write({ put: 'a', value: String(i) }, { put: 'b', value: String(i) }); // 3..7
    expect(c.got.length).toBe(3);
    expect(hub.slowWatcherCount()).toBe(2);
    drain();
    expect(queue.length).toBe(0);
    expect(c.got.length).toBe(3); // nothing while paused
    c.accept = true;
    c.stream.resume();
    drain();
    write({ put: 'a', value: '7' }); // 8: live again
    expect(eventsOf(c.got, id)).toEqual([
      'PUT a@2=1',
      'PUT a@3=2 prev=1@2',
      'PUT a@4=3 prev=2@3',
      'PUT a@5=4 prev=3@4',
      'PUT a@6=5 prev=4@5',
      'PUT a@7=6 prev=5@6',
      'PUT a@8=7 prev=6@7',
    ]);
    expect(eventsOf(c.got, other)).toEqual(['PUT b@3=2', 'PUT b@4=3', 'PUT b@5=4', 'PUT b@6=5', 'PUT b@7=6']);
    expect(hub.slowWatcherCount()).toBe(0);
  });

  it('a paused stream does not hold back others', () => {
    const { client, write } = setup();
    const slow = client();
    const fast = client();
    slow.stream.create(params({ key: 'a' }));
    const f = fast.stream.create(params({ key: 'a' }));
    slow.accept = false;
    for (let i = 0; i < 5; i++) write({ put: 'a', value: String(i) });
    expect(eventsOf(fast.got, f)).toHaveLength(5);
    expect(slow.got.length).toBe(2);
  });

  it('catches up with the real scheduler (setImmediate)', async () => {
    const store = new FakeStore();
    for (let i = 0; i < 2000; i++) store.write([{ put: `k${i % 7}`, value: String(i) }]);
    const hub = new WatchHub(store, { progressNotifyIntervalMs: 60_000, maxEventsPerResponse: 100 });
    try {
      const got: WatchStreamEvent[] = [];
      const s = hub.openStream((e) => (got.push(e), true));
      const id = s.create(params({ key: 'k3', startRevision: 1 }));
      const deadline = Date.now() + 5000;
      while (hub.slowWatcherCount() > 0 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
      expect(hub.slowWatcherCount()).toBe(0);
      expect(eventsOf(got, id)).toHaveLength(Math.floor(2000 / 7) + (3 < 2000 % 7 ? 1 : 0));
    } finally {
      hub.close();
    }
  });
});

describe('WatchHub catch-up response size', () => {
  it('cuts catch-up responses between revisions by size, never inside one', () => {
    const { write, client, drain } = setup({ maxCatchUpResponseBytes: 1000 });
    const big = 'x'.repeat(400);
    for (let i = 0; i < 6; i++) write({ put: 'a', value: big }); // revs 2..7, ~450 bytes each
    write({ put: 'a', value: big }, { put: 'b', value: big }, { put: 'c', value: big }); // rev 8: ~1350 bytes
    const c = client();
    const id = c.stream.create(params({ key: 'a', rangeEnd: Buffer.from([0]), startRevision: 2 }));
    drain();
    const sizes = c.got.filter((r) => r.watchId === id && r.events.length > 0).map((r) => r.events.map((e) => e.kv.modRevision));
    expect(sizes).toEqual([[2, 3], [4, 5], [6, 7], [8, 8, 8]]);
  });

  it('a client that stops reading in the middle of a batch resumes exactly where it stopped', () => {
    const { write, client, drain, hub } = setup({ maxCatchUpResponseBytes: 1 });
    for (let i = 0; i < 10; i++) write({ put: 'a', value: String(i) }); // revs 2..11
    const c = client();
    let budget = 3;
    const id = c.stream.create(params({ key: 'a', startRevision: 2 }));
    c.accept = true;
    const orig = c.got.push.bind(c.got);
    c.got.push = (...xs) => {
      const n = orig(...xs);
      if (xs.some((x) => x.events.length > 0) && --budget === 0) c.accept = false;
      return n;
    };
    drain();
    expect(eventsOf(c.got, id)).toEqual(['PUT a@2=0', 'PUT a@3=1', 'PUT a@4=2']);
    expect(hub.slowWatcherCount()).toBe(1);
    c.accept = true;
    c.stream.resume();
    drain();
    expect(eventsOf(c.got, id).map((e) => e.split('=')[0])).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11].map((r) => `PUT a@${r}`));
  });
});

describe('WatchHub lifecycle', () => {
  it('restore() re-serves synced watchers from the store (snapshot install)', () => {
    const { store, hub, client, drain } = setup();
    const c = client();
    const id = c.stream.create(params({ key: 'a' }));
    const future = c.stream.create(params({ key: 'a', startRevision: 100 }));
    // The store jumps ahead without notify (a snapshot from the leader replaced it).
    store.write([{ put: 'a', value: '1' }]);
    store.write([{ put: 'a', value: '2' }]);
    hub.restore();
    expect(hub.slowWatcherCount()).toBe(2);
    drain();
    expect(eventsOf(c.got, id)).toEqual(['PUT a@2=1', 'PUT a@3=2']);
    expect(eventsOf(c.got, future)).toEqual([]);
    expect(hub.slowWatcherCount()).toBe(0);
    expect(hub.currentRevision()).toBe(3);
  });

  it('close() ends every stream and stops the progress timer', () => {
    const store = new FakeStore();
    let armed = 0;
    let cleared = 0;
    const hub = new WatchHub(store, {
      progressNotifyIntervalMs: 10,
      setTimer: () => ++armed,
      clearTimer: () => void cleared++,
      schedule: () => {},
    });
    const got: WatchStreamEvent[] = [];
    const s = hub.openStream((e) => (got.push(e), true));
    s.create(params({ key: 'a', progressNotify: true }));
    hub.close();
    expect(armed).toBe(1);
    expect(cleared).toBe(1);
    expect(hub.watcherCount()).toBe(0);
    const r = store.write([{ put: 'a', value: '1' }])!;
    hub.notify(r.events, r.rev);
    expect(got.length).toBe(1);
    expect(() => hub.openStream(() => true)).toThrow();
  });

  it('a throwing sink closes only its own stream', () => {
    const store = new FakeStore();
    const errors: unknown[] = [];
    const hub = new WatchHub(store, { progressNotifyIntervalMs: 1000, setTimer: () => 0, clearTimer: () => {}, onSinkError: (e) => errors.push(e) });
    let created = false;
    const bad = hub.openStream(() => {
      if (created) throw new Error('boom');
      created = true;
      return true;
    });
    bad.create(params({ key: 'a' }));
    const got: WatchStreamEvent[] = [];
    const good = hub.openStream((e) => (got.push(e), true));
    good.create(params({ key: 'a' }));
    const r = store.write([{ put: 'a', value: '1' }])!;
    expect(() => hub.notify(r.events, r.rev)).not.toThrow();
    expect(errors).toHaveLength(1);
    expect(got.map((x) => view(x.events))).toEqual([[], ['PUT a@2=1']]);
    expect(hub.watcherCount()).toBe(1);
    hub.close();
  });

  it('ignores a revision notified twice', () => {
    const { store, hub, client } = setup();
    const c = client();
    c.stream.create(params({ key: 'a' }));
    const r = store.write([{ put: 'a', value: '1' }])!;
    hub.notify(r.events, r.rev);
    hub.notify(r.events, r.rev);
    expect(c.got.length).toBe(2);
  });
});
