// Shared set-up for the watch hub tests: a fake store, a hub with a manual scheduler and timer,
// and recording sinks.
import { WatchHub } from '../../../src/watch/watch-hub';
import type { WatchCreateParams, WatchStreamEvent } from '../../../src/watch/types';
import type { HubWatchStream } from '../../../src/watch/watch-hub';
import { FakeStore, type Op } from './fake-store';

export function params(p: Partial<Omit<WatchCreateParams, 'key'>> & { key: string | Buffer }): WatchCreateParams {
  return {
    key: typeof p.key === 'string' ? Buffer.from(p.key) : p.key,
    rangeEnd: p.rangeEnd ?? Buffer.alloc(0),
    startRevision: p.startRevision ?? 0,
    filters: p.filters ?? [],
    prevKv: p.prevKv ?? false,
    progressNotify: p.progressNotify ?? false,
    fragment: false,
    watchId: p.watchId ?? 0,
  };
}

export interface Client {
  stream: HubWatchStream;
  got: WatchStreamEvent[];
  /** What the sink answers next (false: "slow down"). */
  accept: boolean;
}

export function setup(opts: { maxEventsPerResponse?: number; maxWatchersPerSync?: number; maxCatchUpResponseBytes?: number } = {}) {
  const store = new FakeStore();
  const queue: Array<() => void> = [];
  const timers: Array<() => void> = [];
  const hub = new WatchHub(store, {
    progressNotifyIntervalMs: 1000,
    maxEventsPerResponse: opts.maxEventsPerResponse,
    maxWatchersPerSync: opts.maxWatchersPerSync,
    maxCatchUpResponseBytes: opts.maxCatchUpResponseBytes,
    schedule: (fn) => queue.push(fn),
    setTimer: (fn) => {
      timers.push(fn);
      return timers.length;
    },
    clearTimer: () => {},
  });
  const write = (...ops: Op[]) => {
    const r = store.write(ops);
    if (r) hub.notify(r.events, r.rev);
    return r?.rev ?? store.currentRevision();
  };
  /** Run scheduled catch-up batches until none is left (bounded). Returns how many ran. */
  const drain = (maxSteps = 100_000) => {
    let n = 0;
    while (queue.length > 0) {
      if (++n > maxSteps) throw new Error('catch-up did not settle');
      queue.shift()!();
    }
    return n;
  };
  const step = () => {
    const fn = queue.shift();
    if (fn) fn();
    return fn !== undefined;
  };
  /** Fire the progress timer once (the hub re-arms it). */
  const fireProgressTimer = () => {
    const fn = timers.shift();
    if (!fn) throw new Error('no progress timer armed');
    fn();
  };
  const client = (): Client => {
    const c = { got: [] as WatchStreamEvent[], accept: true } as Client;
    c.stream = hub.openStream((ev) => {
      c.got.push(ev);
      return c.accept;
    });
    return c;
  };
  return { store, hub, write, drain, step, fireProgressTimer, client, queue };
}

/** A compact view of events for comparisons. */
export function view(evs: WatchStreamEvent['events']): string[] {
  return evs.map(
    (e) =>
      `${e.type === 0 ? 'PUT' : 'DEL'} ${e.kv.key.toString()}@${e.kv.modRevision}=${e.kv.value.toString()}` +
      (e.prevKv ? ` prev=${e.prevKv.value.toString()}@${e.prevKv.modRevision}` : ''),
  );
}

export function eventsOf(got: WatchStreamEvent[], watchId: number): string[] {
  return got.filter((r) => r.watchId === watchId).flatMap((r) => view(r.events));
}
