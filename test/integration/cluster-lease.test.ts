// Leases on a 3-member cluster: granted through a follower, kept alive through a follower (the
// keepalive reaches the leader), not expired early by a new leader after the old one is killed,
// and on expiry their keys are deleted on every member.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, ClusterMember } from '../helpers/cluster';
import { EtcdGrpc, StreamReader } from '../helpers/grpc';
import { sleepMs, waitFor } from '../helpers/wait';

const ELECTION_TIMEOUT_MS = 1_000;
const TTL_A_SEC = 6;
const TTL_B_SEC = 4;
/** Clock and apply delays between the leader starting a TTL and the client seeing the answer. */
const EARLY_TOLERANCE_MS = 500;

let cluster: Cluster | undefined;
const grpcs: EtcdGrpc[] = [];
afterAll(async () => {
  for (const g of grpcs) g.close();
  await cluster?.close();
}, 30_000);

/** Keepalives on one member's LeaseKeepAlive stream; returns the time of each answer. */
async function keepAlive(member: ClusterMember, leaseId: string, times: number, everyMs: number): Promise<{ lastAckMs: number; ttls: number[] }> {
  const g = new EtcdGrpc(member.clientHostPort);
  grpcs.push(g);
  const stream = g.bidi('Lease', 'LeaseKeepAlive');
  const reader = new StreamReader(stream, 100);
  const ttls: number[] = [];
  let lastAckMs = 0;
  try {
    for (let i = 0; i < times; i++) {
      stream.write({ ID: leaseId });
      const r = await reader.next(10_000);
      lastAckMs = Date.now();
      expect(String(r['ID'])).toBe(leaseId);
      ttls.push(Number(r['TTL']));
      if (i + 1 < times) await sleepMs(everyMs);
    }
  } finally {
    stream.end();
    g.close();
  }
  return { lastAckMs, ttls };
}

/** Whether `key` is on `m` (serializable: that member's own applied state). */
async function hasKey(m: ClusterMember, key: string): Promise<boolean> {
  const r = await m.client().unary('KV', 'Range', { key: Buffer.from(key), serializable: true }, 2_000);
  return (r['kvs'] as unknown[]).length === 1;
}

/**
 * Watch `key` on every member until it is gone from all of them; fails if it disappears from any
 * member before `notBeforeMs`. Returns when it was first seen gone.
 */
async function expectExpiry(ms: ClusterMember[], key: string, notBeforeMs: number, timeoutMs: number): Promise<number> {
  let firstGoneMs = 0;
  await waitFor(
    `${key} deleted on ${ms.map((m) => m.name).join(',')}`,
    async () => {
      const present = await Promise.all(ms.map((m) => hasKey(m, key).catch(() => true)));
      const now = Date.now();
      if (present.some((p) => !p) && firstGoneMs === 0) firstGoneMs = now;
      return present.every((p) => !p);
    },
    { timeoutMs, intervalMs: 100 },
  );
  expect(firstGoneMs, `${key} expired ${notBeforeMs - firstGoneMs} ms early`).toBeGreaterThanOrEqual(notBeforeMs - EARLY_TOLERANCE_MS);
  return firstGoneMs;
}

describe('3-member cluster: leases', () => {
  it('grant and keepalive through followers; a new leader does not expire leases early; expiry deletes keys everywhere', async () => {
    cluster = await Cluster.start({ size: 3, args: [`--election-timeout=${ELECTION_TIMEOUT_MS}`, '--heartbeat-interval=100'] });
    const c = cluster;
    const leader = await c.waitLeader();
    const [f1, f2] = c.members.filter((m) => m !== leader) as [ClusterMember, ClusterMember];

    // Lease B: granted through a follower, its key put through the other, never kept alive.
    const grantB = await f2.client().unary('Lease', 'LeaseGrant', { TTL: String(TTL_B_SEC) }, 5_000);
    const grantBAckMs = Date.now();
    const leaseB = String(grantB['ID']);
    expect(Number(grantB['TTL'])).toBe(TTL_B_SEC);
    await f1.client().unary('KV', 'Put', { key: Buffer.from('lease/b'), value: Buffer.from('b'), lease: leaseB }, 5_000);

    // Lease A: granted through a follower and kept alive through a follower.
    const grantA = await f1.client().unary('Lease', 'LeaseGrant', { TTL: String(TTL_A_SEC) }, 5_000);
    const leaseA = String(grantA['ID']);
    await f2.client().unary('KV', 'Put', { key: Buffer.from('lease/a'), value: Buffer.from('a'), lease: leaseA }, 5_000);
    const ka1 = keepAlive(f1, leaseA, 5, 1_000);

    // B expires on schedule (no keepalive), on every member.
    const bGoneMs = await expectExpiry(c.members, 'lease/b', grantBAckMs + TTL_B_SEC * 1_000, TTL_B_SEC * 1_000 + 10_000);
    const ttlB = await f1.client().unary('Lease', 'LeaseTimeToLive', { ID: leaseB }, 5_000);
    expect(Number(ttlB['TTL'])).toBe(-1);
    const { lastAckMs, ttls } = await ka1;
    expect(ttls.every((t) => t === TTL_A_SEC), `keepalive answers through a follower: ${ttls}`).toBe(true);
    const ttlA = await f2.client().unary('Lease', 'LeaseTimeToLive', { ID: leaseA, keys: true }, 5_000);
    expect(Number(ttlA['TTL'])).toBeGreaterThan(0);
    expect(Number(ttlA['grantedTTL'])).toBe(TTL_A_SEC);
    expect((ttlA['keys'] as Buffer[]).map((k) => k.toString())).toEqual(['lease/a']);

    // Kill the leader right after the last keepalive: the new leader must honour the full TTL.
    const killedAtMs = Date.now();
    await leader.kill9();
    const newLeader = await c.waitLeader({ among: [f1, f2], timeoutMs: 10 * ELECTION_TIMEOUT_MS });
    const electedAfterMs = Date.now() - killedAtMs;
    const mustLiveUntilMs = lastAckMs + TTL_A_SEC * 1_000 - EARLY_TOLERANCE_MS;
    while (Date.now() < mustLiveUntilMs) {
      for (const m of [f1, f2]) {
        const present = await hasKey(m, 'lease/a').catch(() => true);
        expect(present, `lease/a on ${m.name} ${mustLiveUntilMs - Date.now()} ms before its TTL could run out`).toBe(true);
      }
      await sleepMs(200);
    }

    // Keepalive through the surviving follower reaches the new leader and renews.
    const follower = [f1, f2].find((m) => m !== newLeader)!;
    const ka2 = await keepAlive(follower, leaseA, 2, 500);
    expect(ka2.ttls, 'keepalive through the new follower').toEqual([TTL_A_SEC, TTL_A_SEC]);
    expect(await hasKey(newLeader, 'lease/a')).toBe(true);

    // Left alone, A expires, and its key goes on every member (the restarted one included).
    const aGoneMs = await expectExpiry([f1, f2], 'lease/a', ka2.lastAckMs + TTL_A_SEC * 1_000, TTL_A_SEC * 1_000 + 10_000);
    leader.relaunch();
    await leader.waitReady(20_000);
    await c.waitConverged(c.members, 20_000);
    for (const m of c.members) {
      expect(await hasKey(m, 'lease/a'), `lease/a on ${m.name}`).toBe(false);
      expect(await hasKey(m, 'lease/b'), `lease/b on ${m.name}`).toBe(false);
    }
    const leases = await leader.client().unary('Lease', 'LeaseLeases', {}, 5_000);
    expect((leases['leases'] as Array<{ ID: string }>).map((l) => String(l.ID))).not.toContain(leaseA);
    console.log(
      `[cluster-lease] lease B (TTL ${TTL_B_SEC}s) gone ${bGoneMs - grantBAckMs} ms after its grant; leader ${leader.name} killed ` +
        `${killedAtMs - lastAckMs} ms after A's last keepalive, ${newLeader.name} led after ${electedAfterMs} ms; ` +
        `A (TTL ${TTL_A_SEC}s) gone ${aGoneMs - ka2.lastAckMs} ms after its last keepalive`,
    );
  }, 80_000);
});
