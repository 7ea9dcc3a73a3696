// A restarted member starts its Raft core from what its backend has applied, not from its last
// snapshot: the membership changes the log holds since that snapshot are applied to the core at
// start-up, and the rest of the log stays in the WAL. A member that two removals left as the only
// voter must still know that after a crash, or it could never elect itself; its data must all be
// there, and it must take writes.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, readPrefix, revisionOf } from '../helpers/cluster';

const KEYS = 50;
const REMOVED_EXIT_TIMEOUT_MS = 10_000;

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
}, 30_000);

describe('restart after membership changes', () => {
  it('the one voter left by two removals leads alone after kill -9, with every write', async () => {
    cluster = await Cluster.start({ size: 3 });
    const c = cluster;
    const leader = await c.waitLeader();
    for (let i = 0; i < KEYS; i++) {
      await leader.client().unary('KV', 'Put', { key: Buffer.from(`k/${i}`), value: Buffer.from(`before-${i}`) }, 5_000);
    }
    for (const m of c.members.filter((x) => x !== leader)) {
      const st = await m.status();
      await leader.client().unary('Cluster', 'MemberRemove', { ID: st.memberId }, 10_000);
      // A removed member stops by itself once it learns of its removal.
      if (!(await m.waitExited(REMOVED_EXIT_TIMEOUT_MS))) await m.stop();
    }
    const put = await leader.client().unary('KV', 'Put', { key: Buffer.from('alone'), value: Buffer.from('1') }, 5_000);
    const revBefore = revisionOf(put);
    const before = await leader.status();

    await leader.kill9();
    leader.relaunch();
    await leader.waitReady(20_000);
    const alone = await c.waitLeader({ among: [leader], timeoutMs: 10_000 });
    expect(alone).toBe(leader);
    const after = await leader.status();
    expect(after.raftAppliedIndex).toBeGreaterThanOrEqual(before.raftAppliedIndex);
    const list = await leader.client().unary('Cluster', 'MemberList', {}, 5_000);
    expect((list['members'] as unknown[]).length).toBe(1);

    const got = await readPrefix(leader.client(), 'k/', { serializable: false, deadlineMs: 10_000 });
    expect(got.kvs.size).toBe(KEYS);
    for (let i = 0; i < KEYS; i++) expect(got.kvs.get(`k/${i}`)).toBe(`before-${i}`);
    const next = await leader.client().unary('KV', 'Put', { key: Buffer.from('after'), value: Buffer.from('ok') }, 5_000);
    expect(revisionOf(next)).toBe(revBefore + 1);
  }, 90_000);
});
