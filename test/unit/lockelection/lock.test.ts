import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type * as pb from '../../../src/pb/types';
import { prefixEnd } from '../../../src/api/v3lock';
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

describe('v3lockpb.Lock', () => {
  it('takes a free lock at once under <name>/<lease hex>, and again for the same lease', async () => {
    const lease = await grant();
    const first = (await h.call<pb.LockResponse>('lock', 'Lock', { name: Buffer.from('L'), lease })) as pb.LockResponse;
    expect(first.key.toString()).toBe(`L/${hexOf(lease)}`);
    expect(first.header?.revision).toBe('2');
    expect(first.header?.clusterId).toBe('17');
    const again = (await h.call<pb.LockResponse>('lock', 'Lock', { name: Buffer.from('L'), lease })) as pb.LockResponse;
    expect(again.key).toEqual(first.key);
    expect(again.header?.revision).toBe('2'); // no write: the key was already queued
    expect(h.fake.keysUnder('L/')).toEqual([`L/${hexOf(lease)}`]);
  });

  it('makes a second holder wait until the first unlocks', async () => {
    const a = await grant();
    const b = await grant();
    const la = (await h.call<pb.LockResponse>('lock', 'Lock', { name: Buffer.from('L'), lease: a })) as pb.LockResponse;
    let bDone = false;
    const lb = h.call<pb.LockResponse>('lock', 'Lock', { name: Buffer.from('L'), lease: b }).then((r) => {
      bDone = true;
      return r;
    });
    await waitFor(() => h.fake.keysUnder('L/').length === 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(bDone).toBe(false);
    const un = (await h.call<pb.UnlockResponse>('lock', 'Unlock', { key: la.key })) as pb.UnlockResponse;
    expect(un.header?.revision).toBe('4');
    const got = (await lb) as pb.LockResponse;
    expect(got.key.toString()).toBe(`L/${hexOf(b)}`);
    expect(Number(got.header?.revision)).toBeGreaterThanOrEqual(4);
  });

  it('hands the lock on when the holder lease is revoked', async () => {
    const a = await grant();
    const b = await grant();
    await h.call('lock', 'Lock', { name: Buffer.from('L'), lease: a });
    const lb = h.call<pb.LockResponse>('lock', 'Lock', { name: Buffer.from('L'), lease: b });
    await waitFor(() => h.fake.keysUnder('L/').length === 2);
    await h.fake.leaseRevoke({ ID: a });
    expect(((await lb) as pb.LockResponse).key.toString()).toBe(`L/${hexOf(b)}`);
  });

  it('removes a waiter whose caller gives up', async () => {
    const a = await grant();
    const b = await grant();
    await h.call('lock', 'Lock', { name: Buffer.from('L'), lease: a });
    const r = await h.call('lock', 'Lock', { name: Buffer.from('L'), lease: b }, 200);
    expect(isError(r) && r.code).toBe(4); // DEADLINE_EXCEEDED, decided by the client
    await waitFor(() => h.fake.keysUnder('L/').length === 1);
    expect(h.fake.keysUnder('L/')).toEqual([`L/${hexOf(a)}`]);
    await waitFor(() => h.fake.openStreams === 0);
  });

  it('answers etcd errors with code Unknown and etcd text', async () => {
    const r = await h.call('lock', 'Lock', { name: Buffer.from('L'), lease: '12345' });
    expect(r).toEqual({ code: 2, details: 'etcdserver: requested lease not found' });
    expect(h.fake.keysUnder('L/')).toEqual([]);
  });

  it('grants a 60 s lease when the request carries none', async () => {
    const r = (await h.call<pb.LockResponse>('lock', 'Lock', { name: Buffer.from('Z') })) as pb.LockResponse;
    const leases = (await h.fake.leaseLeases()).leases.map((l) => l.ID);
    expect(leases).toHaveLength(1);
    expect(r.key.toString()).toBe(`Z/${hexOf(leases[0])}`);
  });

  it('unlocks a missing key without error', async () => {
    const r = (await h.call<pb.UnlockResponse>('lock', 'Unlock', { key: Buffer.from('nope') })) as pb.UnlockResponse;
    expect(r.header?.revision).toBe('1');
  });
});

describe('prefixEnd', () => {
  it('increments the last byte below 0xff', () => {
    expect(prefixEnd(Buffer.from('a/'))).toEqual(Buffer.from('a0'));
    expect(prefixEnd(Buffer.from([0x61, 0xff]))).toEqual(Buffer.from([0x62]));
    expect(prefixEnd(Buffer.from([0xff, 0xff]))).toEqual(Buffer.from([0]));
  });
});
