// kube-mix: the requests kube-apiserver's storage layer sends, on a store shaped like its registry.
// Paged lists at a revision, guarded updates (compare mod_revision, else get), guarded creates
// (compare create_revision == 0), guarded deletes, and long-lived prefix watches with prev_kv.
import assert from 'node:assert';
import { budgetMs, generatorCpuSec, type CustomContext, type CustomSample } from './custom_case';
import { EtcdConnection, keyAfter, prefixEnd, type RequestOp, type WatchStream } from './etcd_client';
import { LatencyRecorder, pool, sleep, waitFor, withTimeout } from './latency';
import { readProcs } from './procstat';

export const KUBE_MIX_DEFAULTS = {
  keys: 10_000,
  /** A small kube object (a ConfigMap, a small Pod in protobuf) is 1-4 KiB. */
  valueBytes: 1024,
  durationSec: 10,
  conns: 8,
  listers: 2,
  updaters: 16,
  creators: 2,
  deleters: 2,
  watchers: 3,
};

const REGISTRY = '/registry/';
/** Share of the store per resource; events are what creators add and deleters remove. */
const RESOURCES: readonly [string, number][] = [
  ['pods', 0.4],
  ['configmaps', 0.2],
  ['secrets', 0.2],
  ['services', 0.1],
  ['deployments', 0.1],
];
const NAMESPACES = 20;
const PAGE = 500;
const CALL_TIMEOUT_MS = 30_000;
const SEED_PUTS_PER_TXN = 100;
const SEED_IN_FLIGHT = 16;
/** Bound on created keys waiting for a deleter; beyond it creators forget the oldest (it stays stored). */
const MAX_PENDING_DELETES = 10_000;
const STOP_TIMEOUT_MS = 60_000;
const CATCH_UP_TIMEOUT_MS = 15_000;
/** After a failed call, wait before the next one: a dead server must not turn the loop into a spin. */
const ERROR_BACKOFF_MS = 50;

type Kind = 'update' | 'create' | 'delete' | 'list page' | 'list';
const KINDS: readonly Kind[] = ['update', 'create', 'delete', 'list page', 'list'];

interface Stored {
  key: Buffer;
  modRevision: number;
}

interface MixWatcher {
  stream?: WatchStream;
  created: boolean;
  ended: boolean;
  events: number;
  eventsInWindow: number;
  missingPrevKv: number;
  lastRevision: number;
}

function kubeKey(resource: string, i: number): Buffer {
  return Buffer.from(`${REGISTRY}${resource}/ns-${i % NAMESPACES}/${resource.slice(0, -1)}-${i}`);
}

export async function runKubeMix(ctx: CustomContext, params: Readonly<Record<string, number>>): Promise<CustomSample> {
  const p = { ...KUBE_MIX_DEFAULTS, ...params };
  assert(p.keys >= 100 && p.durationSec > 0);
  const endpoint = ctx.cluster.endpoints[0];
  const conns = Array.from({ length: p.conns }, () => new EtcdConnection(endpoint));
  const conn = (i: number): EtcdConnection => conns[i % conns.length];
  const value = Buffer.alloc(p.valueBytes, 0x6b);
  const extra: Record<string, number> = {};
  try {
    // The store: keys spread over resources and namespaces.
    const objects: Stored[] = [];
    const perResource = new Map<string, number>();
    for (const [resource, share] of RESOURCES) {
      const n = Math.round(p.keys * share);
      perResource.set(resource, n);
      for (let i = 0; i < n; i++) objects.push({ key: kubeKey(resource, i), modRevision: 0 });
    }
    ctx.log(`seeding ${objects.length} objects of ${p.valueBytes} B under ${REGISTRY}`);
    const batches = Math.ceil(objects.length / SEED_PUTS_PER_TXN);
    await withTimeout(
      pool(batches, SEED_IN_FLIGHT, async (b) => {
        const slice = objects.slice(b * SEED_PUTS_PER_TXN, (b + 1) * SEED_PUTS_PER_TXN);
        const r = await conn(b).txn([], slice.map((o): RequestOp => ({ put: { key: o.key, value } })), [], CALL_TIMEOUT_MS);
        for (const o of slice) o.modRevision = r.revision;
      }),
      budgetMs(ctx, 300_000),
      'seed',
    );

    // Long-lived watches on the whole registry, as kube-apiserver's watch cache keeps.
    const watchers: MixWatcher[] = Array.from({ length: p.watchers }, () => ({
      created: false, ended: false, events: 0, eventsInWindow: 0, missingPrevKv: 0, lastRevision: 0,
    }));
    let inWindow = false;
    for (const [i, w] of watchers.entries()) {
      w.stream = conn(i).watchStream(
        (r) => {
          if (r.created) w.created = true;
          for (const e of r.events) {
            w.events++;
            if (inWindow) w.eventsInWindow++;
            if ((e.type === 'DELETE' || e.kv.version > 1) && !e.prevKv) w.missingPrevKv++;
            w.lastRevision = Math.max(w.lastRevision, e.kv.modRevision);
          }
        },
        () => {
          w.ended = true;
        },
      );
      w.stream.create({ key: Buffer.from(REGISTRY), rangeEnd: prefixEnd(Buffer.from(REGISTRY)), prevKv: true });
    }
    await waitFor(() => watchers.every((w) => w.created || w.ended), budgetMs(ctx, 30_000), 'watches created');
    assert(watchers.every((w) => w.created), 'a watch stream ended before it was created');

    const lat = new Map<Kind, LatencyRecorder>(KINDS.map((k) => [k, new LatencyRecorder()]));
    const rec = (k: Kind): LatencyRecorder => {
      const r = lat.get(k);
      assert(r);
      return r;
    };
    let conflicts = 0;
    let listMismatches = 0;
    let writesApplied = 0;
    let lastWriteRevision = 0;
    const noteWrite = (revision: number): void => {
      writesApplied++;
      lastWriteRevision = Math.max(lastWriteRevision, revision);
    };
    const pendingDeletes: Stored[] = [];
    let createSeq = 0;
    let running = true;

    const guard = async (k: Kind, op: () => Promise<void>): Promise<void> => {
      try {
        await rec(k).time(op);
      } catch {
        await sleep(ERROR_BACKOFF_MS);
      }
    };

    const updater = async (c: number): Promise<void> => {
      while (running) {
        const o = objects[Math.floor(Math.random() * objects.length)];
        await guard('update', async () => {
          const r = await conn(c).txn([{ target: 'mod', key: o.key, revision: o.modRevision }], [{ put: { key: o.key, value } }], [{ range: { key: o.key } }], CALL_TIMEOUT_MS);
          if (r.succeeded) {
            o.modRevision = r.revision;
            noteWrite(r.revision);
          } else {
            conflicts++;
            const current = r.responses[0]?.range?.kvs[0];
            if (current) o.modRevision = current.modRevision;
          }
        });
      }
    };
    const creator = async (c: number): Promise<void> => {
      while (running) {
        const key = kubeKey('events', createSeq++);
        await guard('create', async () => {
          const r = await conn(c).txn([{ target: 'create', key, revision: 0 }], [{ put: { key, value } }], [{ range: { key } }], CALL_TIMEOUT_MS);
          if (!r.succeeded) return;
          noteWrite(r.revision);
          if (pendingDeletes.length >= MAX_PENDING_DELETES) pendingDeletes.shift();
          pendingDeletes.push({ key, modRevision: r.revision });
        });
      }
    };
    const deleter = async (c: number): Promise<void> => {
      while (running) {
        const o = pendingDeletes.shift();
        if (!o) {
          await sleep(5);
          continue;
        }
        await guard('delete', async () => {
          const r = await conn(c).txn([{ target: 'mod', key: o.key, revision: o.modRevision }], [{ deleteRange: { key: o.key } }], [{ range: { key: o.key } }], CALL_TIMEOUT_MS);
          if (r.succeeded) noteWrite(r.revision);
          else conflicts++;
        });
      }
    };
    const lister = async (c: number): Promise<void> => {
      let next = c;
      while (running) {
        const [resource] = RESOURCES[next++ % RESOURCES.length];
        const prefix = Buffer.from(`${REGISTRY}${resource}/`);
        const end = prefixEnd(prefix);
        await guard('list', async () => {
          let from: Buffer = prefix;
          let revision = 0;
          let items = 0;
          for (;;) {
            const r = await rec('list page').time(() => conn(c).range({ key: from, rangeEnd: end, limit: PAGE, revision }, CALL_TIMEOUT_MS));
            if (revision === 0) revision = r.revision;
            items += r.kvs.length;
            if (!r.more || r.kvs.length === 0) break;
            from = keyAfter(r.kvs[r.kvs.length - 1].key);
          }
          if (items !== perResource.get(resource)) listMismatches++;
        });
      }
    };

    ctx.log(`mix for ${p.durationSec} s: ${p.listers} listers, ${p.updaters} updaters, ${p.creators} creators, ${p.deleters} deleters, ${p.watchers} watchers, ${p.conns} conns`);
    const before = readProcs(ctx.cluster.pids);
    const genCpu0 = process.cpuUsage();
    const t0 = performance.now();
    inWindow = true;
    const loops: Promise<void>[] = [];
    let c = 0;
    for (let i = 0; i < p.updaters; i++) loops.push(updater(c++));
    for (let i = 0; i < p.creators; i++) loops.push(creator(c++));
    for (let i = 0; i < p.deleters; i++) loops.push(deleter(c++));
    for (let i = 0; i < p.listers; i++) loops.push(lister(c++));
    await sleep(p.durationSec * 1000);
    running = false;
    inWindow = false;
    const windowSec = (performance.now() - t0) / 1000;
    const after = readProcs(ctx.cluster.pids);
    const genCpuSec = generatorCpuSec(genCpu0);
    await withTimeout(Promise.all(loops), budgetMs(ctx, STOP_TIMEOUT_MS), 'stopping the clients');

    // Every applied write must reach every watcher, with prev_kv where there was a previous value.
    const c0 = performance.now();
    await waitFor(() => watchers.every((w) => w.ended || w.lastRevision >= lastWriteRevision), budgetMs(ctx, CATCH_UP_TIMEOUT_MS), 'watchers catching up').catch(() => undefined);
    extra['watch catch-up after load ms'] = performance.now() - c0;

    let ops = 0;
    for (const k of KINDS) {
      const r = rec(k);
      if (k !== 'list') ops += r.count;
      extra[`${k} /s`] = r.count / windowSec;
      extra[`${k} p50 ms`] = r.percentile(50);
      extra[`${k} p99 ms`] = r.percentile(99);
    }
    extra['update conflicts /s'] = conflicts / windowSec;
    extra[`watch events /s (sum of ${p.watchers})`] = watchers.reduce((n, w) => n + w.eventsInWindow, 0) / windowSec;
    extra['watch events missing'] = watchers.reduce((n, w) => n + Math.max(0, writesApplied - w.events), 0);
    extra['events without prev_kv'] = watchers.reduce((n, w) => n + w.missingPrevKv, 0);
    extra['list count mismatches'] = listMismatches;
    extra['watch streams lost'] = watchers.filter((w) => w.ended).length;
    extra['generator CPU %'] = (genCpuSec / windowSec) * 100;
    const errors = KINDS.reduce((n, k) => n + rec(k).errors, 0);
    if (ops === 0) throw new Error(`no request succeeded (${KINDS.map((k) => rec(k).lastError).find(Boolean) ?? 'no error seen'})`);

    return {
      qps: ops / windowSec,
      p50Ms: rec('update').percentile(50),
      p99Ms: rec('update').percentile(99),
      requests: ops,
      errors,
      cpuSec: Math.max(0, after.cpuSec - before.cpuSec),
      peakRssMiB: readProcs(ctx.cluster.pids).peakRssMiB,
      wallSec: windowSec,
      extra,
    };
  } finally {
    for (const c of conns) c.close();
  }
}
