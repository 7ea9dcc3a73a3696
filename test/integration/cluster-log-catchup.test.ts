// A member keeps only the last 4 MiB of applied Raft entries' data in memory (RESIDENT_LOG_BYTES)
// and reads older entries back from its WAL when a follower needs them. A follower that was down
// for 8 MiB of writes catches up from those entries (not from a snapshot: snapshot-count is far
// off), and so does the member restarted after that, whose log was read back at start-up.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, readPrefix, revisionOf } from '../helpers/cluster';

const VALUE_BYTES = 100 * 1024;
const PUTS = 80;

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
}, 30_000);

function valueOf(i: number, round: string): string {
  return `${round}:${i}:`.padEnd(VALUE_BYTES, String.fromCharCode(97 + (i % 26)));
}

describe('3-member cluster: catching up from entries read back from the WAL', () => {
  it('a follower down for 8 MiB of writes, then a restarted leader, catch up to the same values and HashKV', async () => {
    cluster = await Cluster.start({ size: 3 });
    const c = cluster;
    let leader = await c.waitLeader();
    const follower = c.members.find((m) => m !== leader)!;
    await follower.stop();
    for (let i = 0; i < PUTS; i++) {
      await leader.client().unary('KV', 'Put', { key: Buffer.from(`big/${i}`), value: Buffer.from(valueOf(i, 'one')) }, 10_000);
    }
    follower.relaunch();
    await follower.waitReady(30_000);
    let rev = await c.waitConverged(c.members, 30_000);
    let got = await readPrefix(follower.client(), 'big/', { serializable: true, deadlineMs: 20_000 });
    expect(got.revision).toBe(rev);
    expect(got.kvs.size).toBe(PUTS);
    for (let i = 0; i < PUTS; i++) expect(got.kvs.get(`big/${i}`) === valueOf(i, 'one'), `big/${i} on ${follower.name}`).toBe(true);

    // The leader restarts: its log is replayed from the WAL and released again; the others elect a
    // leader, take more writes, and the restarted member catches up from the new leader's log.
    await leader.kill9();
    const survivors = c.members.filter((m) => m !== leader);
    const newLeader = await c.waitLeader({ among: survivors, timeoutMs: 20_000 });
    for (let i = 0; i < PUTS; i++) {
      await newLeader.client().unary('KV', 'Put', { key: Buffer.from(`big/${i}`), value: Buffer.from(valueOf(i, 'two')) }, 10_000);
    }
    leader.relaunch();
    await leader.waitReady(30_000);
    rev = await c.waitConverged(c.members, 30_000);
    got = await readPrefix(leader.client(), 'big/', { serializable: true, deadlineMs: 20_000 });
    expect(got.revision).toBe(rev);
    for (let i = 0; i < PUTS; i++) expect(got.kvs.get(`big/${i}`) === valueOf(i, 'two'), `big/${i} on ${leader.name}`).toBe(true);
    const hashes = await Promise.all(
      c.members.map(async (m) => {
        const h = await m.client().unary('Maintenance', 'HashKV', { revision: String(rev) }, 10_000);
        return `${h['hash']}/${h['compact_revision']}`;
      }),
    );
    expect(new Set(hashes).size, `HashKV at revision ${rev}: ${hashes.join(' ')}`).toBe(1);
    leader = newLeader;
    const put = await leader.client().unary('KV', 'Put', { key: Buffer.from('after'), value: Buffer.from('ok') }, 5_000);
    expect(revisionOf(put)).toBe(rev + 1);
  }, 120_000);
});
