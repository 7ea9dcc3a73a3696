import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type * as pb from '../../../src/pb/types';
import { type Harness, isError, startHarness, waitFor } from './harness';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => {
  await h.close();
});

async function grant(): Promise<string> {
  return (await h.fake.leaseGrant({ TTL: '30', ID: '0' })).ID;
}
const hexOf = (lease: string): string => BigInt(lease).toString(16);
const E = Buffer.from('E');

async function campaign(lease: string, value: string, deadlineMs?: number): Promise<pb.CampaignResponse> {
  const r = await h.call<pb.CampaignResponse>('election', 'Campaign', { name: E, lease, value: Buffer.from(value) }, deadlineMs);
  if (isError(r)) throw new Error(`campaign failed: ${r.details}`);
  return r;
}

describe('v3electionpb.Election', () => {
  it('elects, proclaims, reports the leader and resigns', async () => {
    expect(await h.call('election', 'Leader', { name: E })).toEqual({ code: 2, details: 'election: no leader' });
    const lease = await grant();
    const c = await campaign(lease, 'v1');
    expect(c.leader).toEqual({ name: E, key: Buffer.from(`E/${hexOf(lease)}`), rev: '2', lease });
    expect(c.header?.revision).toBe('2');

    // Campaigning again with another value keeps the place and updates the value.
    const again = await campaign(lease, 'v2');
    expect(again.leader).toEqual(c.leader);
    const l = (await h.call<pb.LeaderResponse>('election', 'Leader', { name: E })) as pb.LeaderResponse;
    expect(l.kv?.value.toString()).toBe('v2');
    expect(l.kv?.createRevision).toBe('2');
    expect(l.kv?.lease).toBe(lease);

    const p = (await h.call<pb.ProclaimResponse>('election', 'Proclaim', { leader: c.leader, value: Buffer.from('v3') })) as pb.ProclaimResponse;
    expect(p.header?.revision).toBe('4');
    const r = (await h.call<pb.ResignResponse>('election', 'Resign', { leader: c.leader })) as pb.ResignResponse;
    expect(r.header?.revision).toBe('5');
    expect(await h.call('election', 'Leader', { name: E })).toEqual({ code: 2, details: 'election: no leader' });
    // Resigning twice is fine; proclaiming without leadership is not.
    expect(isError(await h.call('election', 'Resign', { leader: c.leader }))).toBe(false);
    expect(await h.call('election', 'Proclaim', { leader: c.leader, value: Buffer.from('x') })).toEqual({
      code: 2,
      details: 'election: not leader',
    });
  });

  it('rejects Proclaim and Resign without a leader key, with etcd text', async () => {
    const want = { code: 2, details: '"leader" field must be provided' };
    expect(await h.call('election', 'Proclaim', { value: Buffer.from('x') })).toEqual(want);
    expect(await h.call('election', 'Resign', {})).toEqual(want);
  });

  it('makes a second candidate wait until the leader resigns', async () => {
    const a = await grant();
    const b = await grant();
    const ca = await campaign(a, 'a');
    let bDone = false;
    const cb = campaign(b, 'b').then((r) => {
      bDone = true;
      return r;
    });
    await waitFor(() => h.fake.keysUnder('E/').length === 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(bDone).toBe(false);
    await h.call('election', 'Resign', { leader: ca.leader });
    const won = await cb;
    expect(won.leader?.key.toString()).toBe(`E/${hexOf(b)}`);
    const l = (await h.call<pb.LeaderResponse>('election', 'Leader', { name: E })) as pb.LeaderResponse;
    expect(l.kv?.value.toString()).toBe('b');
  });

  it('withdraws a candidate whose caller gives up', async () => {
    const a = await grant();
    const b = await grant();
    await campaign(a, 'a');
    const r = await h.call('election', 'Campaign', { name: E, lease: b, value: Buffer.from('b') }, 200);
    expect(isError(r) && r.code).toBe(4);
    await waitFor(() => h.fake.keysUnder('E/').length === 1);
    expect(h.fake.keysUnder('E/')).toEqual([`E/${hexOf(a)}`]);
  });

  it('answers a campaign on a missing lease with Unknown and etcd text', async () => {
    expect(await h.call('election', 'Campaign', { name: E, lease: '999', value: Buffer.from('v') })).toEqual({
      code: 2,
      details: 'etcdserver: requested lease not found',
    });
  });

  it('streams leader values in order through Observe', async () => {
    const stream = h.observe({ name: E });
    const seen: pb.LeaderResponse[] = [];
    stream.on('data', (m: pb.LeaderResponse) => seen.push(m));
    stream.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, 30)); // Observe starts with no leader: nothing sent
    expect(seen).toEqual([]);

    const a = await grant();
    const b = await grant();
    const ca = await campaign(a, 'a1');
    await waitFor(() => seen.length === 1);
    expect(seen[0].kv?.value.toString()).toBe('a1');
    expect(seen[0].header?.revision).toBe(seen[0].kv?.modRevision);

    const p = (await h.call<pb.ProclaimResponse>('election', 'Proclaim', { leader: ca.leader, value: Buffer.from('a2') })) as pb.ProclaimResponse;
    await waitFor(() => seen.length === 2);
    expect(seen[1].kv?.value.toString()).toBe('a2');
    expect(seen[1].header?.revision).toBe(p.header?.revision);

    const cb = campaign(b, 'b1');
    await waitFor(() => h.fake.keysUnder('E/').length === 2);
    const r = (await h.call<pb.ResignResponse>('election', 'Resign', { leader: ca.leader })) as pb.ResignResponse;
    const won = await cb;
    // As etcd 3.4 answers: Campaign carries its own txn's header, Observe the read after the resign.
    expect(Number(won.header?.revision)).toBeLessThan(Number(r.header?.revision));
    await waitFor(() => seen.length === 3);
    expect(seen[2].kv?.key.toString()).toBe(`E/${hexOf(b)}`);
    expect(seen[2].kv?.value.toString()).toBe('b1');
    expect(seen[2].header?.revision).toBe(r.header?.revision);
    expect(seen.map((s) => s.kv?.value.toString())).toEqual(['a1', 'a2', 'b1']);

    stream.cancel();
    await waitFor(() => h.fake.openStreams === 0);
  });

  it('Observe starts from the current leader when there is one', async () => {
    const a = await grant();
    await campaign(a, 'now');
    const stream = h.observe({ name: E });
    const first = await new Promise<pb.LeaderResponse>((resolve) => stream.once('data', resolve));
    expect(first.kv?.value.toString()).toBe('now');
    stream.on('error', () => undefined);
    stream.cancel();
  });
});
