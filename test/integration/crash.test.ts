// Crash test: concurrent writers, kill -9 at a random moment, restart on the same data dir, and
// check that nothing acknowledged was lost, the revision never went back, and writes work again.
import { afterAll, describe, expect, it } from 'vitest';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';
import { EtcdGrpc, Msg } from '../helpers/grpc';
import { sleepMs } from '../helpers/wait';

const ROUNDS = 5;
const WRITERS = 4;
const MAX_LOAD_MS = 1_500;
const PUT_DEADLINE_MS = 2_000;
const TOTAL_BUDGET_MS = 90_000;

let m: EtcdMember | undefined;
afterAll(async () => {
  await m?.stop();
});

interface Acked {
  /** key -> value, for keys written once. */
  unique: Map<string, string>;
  /** counter key -> highest acknowledged sequence number (later writes may also have landed). */
  counters: Map<string, number>;
  maxRevision: number;
}

/** One writer: puts a fresh key, then bumps its counter key, until a put fails or `stop` is set. */
async function writer(client: EtcdGrpc, round: number, id: number, acked: Acked, stop: { now: boolean }): Promise<number> {
  let seq = 0;
  while (!stop.now) {
    seq++;
    const key = `crash/r${round}/w${id}/${String(seq).padStart(6, '0')}`;
    const value = `${round}:${id}:${seq}:${Math.random().toString(36).slice(2)}`;
    const counterKey = `crash/counter/w${id}`;
    try {
      const r1 = await client.unary('KV', 'Put', { key: Buffer.from(key), value: Buffer.from(value) }, PUT_DEADLINE_MS);
      acked.unique.set(key, value);
      acked.maxRevision = Math.max(acked.maxRevision, revisionOf(r1));
      const counterValue = round * 1_000_000 + seq;
      const r2 = await client.unary('KV', 'Put', { key: Buffer.from(counterKey), value: Buffer.from(String(counterValue)) }, PUT_DEADLINE_MS);
      acked.counters.set(counterKey, counterValue);
      acked.maxRevision = Math.max(acked.maxRevision, revisionOf(r2));
    } catch {
      return seq - 1; // the server went away
    }
  }
  return seq;
}

function revisionOf(res: Msg): number {
  const header = res['header'] as { revision: string } | null;
  if (header === null) throw new Error('response without header');
  return Number(header.revision);
}

async function readAll(client: EtcdGrpc): Promise<{ kvs: Map<string, string>; revision: number }> {
  const res = await client.unary('KV', 'Range', { key: Buffer.from('crash/'), range_end: Buffer.from('crash0') }, 10_000);
  const kvs = new Map<string, string>();
  for (const kv of res['kvs'] as { key: Buffer; value: Buffer }[]) kvs.set(kv.key.toString(), kv.value.toString());
  return { kvs, revision: revisionOf(res) };
}

describe('crash (kill -9) and restart', () => {
  it(`keeps every acknowledged write across ${ROUNDS} kill -9 rounds`, async () => {
    const started = Date.now();
    m = await startEtcd();
    const acked: Acked = { unique: new Map(), counters: new Map(), maxRevision: 0 };
    let lastSeenRevision = 0;
    const perRound: string[] = [];

    // A lease granted and acknowledged before the crashes must survive them, with its key.
    const setup = new EtcdGrpc(m.clientHostPort);
    const grant = await setup.unary('Lease', 'LeaseGrant', { TTL: 600 }, 10_000);
    const leaseId = String(grant['ID']);
    await setup.unary('KV', 'Put', { key: Buffer.from('crash/leased'), value: Buffer.from('v'), lease: leaseId }, 10_000);
    setup.close();

    for (let round = 1; round <= ROUNDS; round++) {
      expect(Date.now() - started, 'time budget').toBeLessThan(TOTAL_BUDGET_MS);
      const clients = Array.from({ length: WRITERS }, () => new EtcdGrpc(m!.clientHostPort));
      const stop = { now: false };
      const writers = clients.map((c, i) => writer(c, round, i, acked, stop));
      // A random moment, sometimes almost at once.
      const killAfterMs = Math.floor(Math.random() * MAX_LOAD_MS);
      await sleepMs(killAfterMs);
      await m.kill9();
      stop.now = true;
      const counts = await Promise.all(writers);
      for (const c of clients) c.close();

      await m.restart();
      const check = new EtcdGrpc(m.clientHostPort);
      try {
        const { kvs, revision } = await readAll(check);
        // The revision never goes back: not below any acknowledged write, nor below what we saw before.
        expect(revision, `round ${round}: revision after restart`).toBeGreaterThanOrEqual(acked.maxRevision);
        expect(revision, `round ${round}: revision after restart`).toBeGreaterThanOrEqual(lastSeenRevision);

        const lost: string[] = [];
        for (const [k, v] of acked.unique) if (kvs.get(k) !== v) lost.push(`${k}: want ${v}, have ${kvs.get(k)}`);
        for (const [k, n] of acked.counters) {
          const have = Number(kvs.get(k));
          if (!(have >= n)) lost.push(`${k}: acknowledged ${n}, have ${kvs.get(k)}`);
        }
        expect(lost, `round ${round}: acknowledged writes missing after restart:\n${lost.slice(0, 20).join('\n')}`).toEqual([]);

        expect(kvs.get('crash/leased'), `round ${round}: key of the long lease`).toBe('v');
        const ttl = await check.unary('Lease', 'LeaseTimeToLive', { ID: leaseId, keys: true }, 10_000);
        expect(Number(ttl['TTL']), `round ${round}: lease TTL after restart`).toBeGreaterThan(0);
        expect((ttl['keys'] as Buffer[]).map((k) => k.toString())).toEqual(['crash/leased']);

        // It serves writes again, at a newer revision.
        const put = await check.unary('KV', 'Put', { key: Buffer.from(`crash/probe/${round}`), value: Buffer.from('ok') }, 10_000);
        expect(revisionOf(put)).toBe(revision + 1);
        lastSeenRevision = revisionOf(put);
        perRound.push(`round ${round}: killed after ${killAfterMs} ms, ${counts.reduce((a, b) => a + b, 0)} put pairs acked, revision ${revision}`);
      } finally {
        check.close();
      }
    }
    console.log(`crash test on ${m.logs().split('\n')[0]}\n${perRound.join('\n')}\n${acked.unique.size} unique keys checked`);
    // The test must have written something, or it proves nothing.
    expect(acked.unique.size).toBeGreaterThan(ROUNDS);
  }, 150_000);
});
