// Network partitions through the fault-injecting proxies on the peer links. A partitioned
// follower, healed, does not disrupt the cluster (pre-vote: its term does not grow while it is
// cut off, so the leader and term stay). A partitioned leader steps down (check-quorum), serves no
// stale read, the majority elects a new leader, and on healing the old leader rejoins as a
// follower without bumping the term. No acknowledged write is lost.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, ClusterMember, lostWrites, readPrefix, revisionOf, WriteLoad } from '../helpers/cluster';
import { sleepMs, waitFor } from '../helpers/wait';

const ELECTION_TIMEOUT_MS = 1_000;
const PARTITION_MS = 4 * ELECTION_TIMEOUT_MS;

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
}, 30_000);

async function terms(ms: ClusterMember[]): Promise<string> {
  const sts = await Promise.all(ms.map(async (m) => {
    try {
      const s = await m.status();
      return `${m.name}: term ${s.raftTerm} leader ${s.leader === '0' ? 'none' : s.leader === m.id ? 'self' : s.leader}`;
    } catch (e) {
      return `${m.name}: ${(e as Error).message}`;
    }
  }));
  return sts.join('; ');
}

describe('3-member cluster: partitions through peer-link proxies', () => {
  it('a partitioned follower, then a partitioned leader, rejoin without disrupting the cluster', async () => {
    cluster = await Cluster.start({ size: 3, proxy: true, args: [`--election-timeout=${ELECTION_TIMEOUT_MS}`, '--heartbeat-interval=100', '--pre-vote=true'] });
    const c = cluster;
    const leader = await c.waitLeader();
    const term1 = (await leader.status()).raftTerm;
    const [f1, f2] = c.members.filter((m) => m !== leader) as [ClusterMember, ClusterMember];
    // The proxies must know which member dialed them, or they cannot cut single links.
    await waitFor('proxies to identify every peer connection', () =>
      c.members.every((m) => m.proxy!.sources().length >= 2 && m.proxy!.sources().every((s) => s !== undefined)),
    );

    const isolated = new Set<ClusterMember>();
    const load = new WriteLoad('load/', () => c.up().filter((m) => !isolated.has(m)), { writers: 3, putDeadlineMs: 3_000 }).start();
    await sleepMs(500);

    // ---- 1. partition a follower
    isolated.add(f1);
    c.partition([f1]);
    await sleepMs(PARTITION_MS);
    const duringFollower = await terms(c.members);
    const f1Status = await f1.status();
    // With pre-vote the cut-off follower's campaigns fail before it raises its term.
    expect(f1Status.raftTerm, `isolated follower's term (${duringFollower})`).toBe(term1);
    expect((await leader.status()).leader).toBe(leader.id);
    const ackedBeforeHeal1 = load.log.acked.size;
    c.heal();
    isolated.delete(f1);
    await c.waitConverged(c.members, 20_000);
    await sleepMs(2 * ELECTION_TIMEOUT_MS);
    for (const m of c.members) {
      const st = await m.status();
      expect(st.leader, `${m.name}'s leader after the follower rejoined (${await terms(c.members)})`).toBe(leader.id);
      expect(st.raftTerm, `${m.name}'s term after the follower rejoined`).toBe(term1);
    }

    // ---- 2. partition the leader
    const cutAtMs = Date.now();
    isolated.add(leader);
    c.partition([leader]);
    const newLeader = await c.waitLeader({ among: [f1, f2], timeoutMs: 10 * ELECTION_TIMEOUT_MS });
    const electedAfterMs = Date.now() - cutAtMs;
    const term2 = (await newLeader.status()).raftTerm;
    expect(term2).toBeGreaterThan(term1);
    // Check-quorum: the cut-off leader notices it lost its quorum and steps down.
    await waitFor('the partitioned leader to step down', async () => (await leader.status()).leader !== leader.id, {
      timeoutMs: 5 * ELECTION_TIMEOUT_MS,
    });
    const steppedDownAfterMs = Date.now() - cutAtMs;
    // A write it cannot see must not be hidden by a stale read: the read fails instead.
    await newLeader.client().unary('KV', 'Put', { key: Buffer.from('marker'), value: Buffer.from('majority') }, 5_000);
    let staleOutcome = 'error';
    try {
      const r = await leader.client().unary('KV', 'Range', { key: Buffer.from('marker') }, 3_000);
      staleOutcome = `answered rev ${revisionOf(r)} with ${(r['kvs'] as unknown[]).length} kvs`;
    } catch (e) {
      staleOutcome = `error ${(e as Error).message.slice(0, 80)}`;
    }
    expect(staleOutcome, 'linearizable read on the partitioned old leader').toMatch(/^error/);
    // Writes sent to the cut-off member fail with an error rather than hang.
    const putT0 = Date.now();
    const putErr = await leader.client().unary('KV', 'Put', { key: Buffer.from('cut/put'), value: Buffer.from('x') }, 20_000).then(
      () => 'acknowledged',
      (e: Error) => e.message,
    );
    const putFailMs = Date.now() - putT0;
    expect(putErr, 'a put on the partitioned member').not.toBe('acknowledged');
    const ackedBefore = load.log.acked.size;
    await waitFor('writes acknowledged by the majority side', () => load.log.acked.size > ackedBefore + 10, { timeoutMs: 10_000 });
    const termOfCutLeader = (await leader.status()).raftTerm;
    expect(termOfCutLeader, 'the cut-off leader does not raise its term (pre-vote)').toBe(term1);

    c.heal();
    isolated.delete(leader);
    await waitFor(
      'the old leader to follow the new leader',
      async () => {
        const st = await leader.status();
        return st.leader === newLeader.id;
      },
      { timeoutMs: 10 * ELECTION_TIMEOUT_MS },
    );
    await sleepMs(2 * ELECTION_TIMEOUT_MS);
    const afterHeal = await terms(c.members);
    for (const m of c.members) {
      const st = await m.status();
      expect(st.leader, `${m.name}'s leader after the old leader rejoined (${afterHeal})`).toBe(newLeader.id);
      expect(st.raftTerm, `${m.name}'s term after the old leader rejoined (${afterHeal})`).toBe(term2);
    }

    const log = await load.stop();
    await c.waitConverged(c.members, 20_000);
    for (const m of c.members) {
      const all = await readPrefix(m.client(), 'load/');
      expect(lostWrites(log, all.kvs), `acknowledged writes lost on ${m.name}`).toEqual([]);
    }
    expect(log.acked.size).toBeGreaterThan(ackedBeforeHeal1);
    const dropped = c.members.map((m) => m.proxy!.droppedConnections);
    console.log(
      `[cluster-partition] follower ${f1.name} cut ${PARTITION_MS} ms: ${duringFollower}; leader ${leader.name} cut: ` +
        `${newLeader.name} led term ${term2} after ${electedAfterMs} ms, old leader stepped down after ${steppedDownAfterMs} ms, ` +
        `its linearizable read: ${staleOutcome}, its put failed after ${putFailMs} ms with "${putErr.slice(0, 80)}"; ` +
        `after healing: ${afterHeal}; ${log.acked.size} acked, ${log.failures} failed; connections cut per proxy ${dropped.join(',')}`,
    );
  }, 85_000);
});
