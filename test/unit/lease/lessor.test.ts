import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { open } from 'lmdb';
import { Lessor, type LeaseDb, LEASE_REVOKE_RATE_PER_SEC, MAX_LEASE_TTL_SEC } from '../../../src/lease/lessor';
import { LeaseIdGenerator } from '../../../src/lease/lease-id';
import { ExpiryHeap } from '../../../src/lease/expiry-heap';
import { decodeLeaseRecord, encodeLeaseRecord, leaseKey } from '../../../src/lease/lease-record';
import { EtcdError, Errors } from '../../../src/errors';

class MemDb implements LeaseDb {
  readonly m = new Map<string, Buffer>();
  get(key: Buffer): Buffer | undefined {
    return this.m.get(key.toString('hex'));
  }
  putSync(key: Buffer, value: Buffer): void {
    this.m.set(key.toString('hex'), Buffer.from(value));
  }
  removeSync(key: Buffer): boolean {
    return this.m.delete(key.toString('hex'));
  }
  *getRange(): Iterable<{ key: Buffer; value: Buffer }> {
    const keys = [...this.m.keys()].sort();
    for (const k of keys) yield { key: Buffer.from(k, 'hex'), value: this.m.get(k)! };
  }
}

function setup(opts: { minTtlSec?: number; checkpointIntervalMs?: number } = {}) {
  const clock = { ms: 1_000_000 };
  const db = new MemDb();
  const lessor = new Lessor({
    db,
    nowMs: () => clock.ms,
    minTtlSec: opts.minTtlSec ?? 2,
    checkpointIntervalMs: opts.checkpointIntervalMs,
  });
  return { clock, db, lessor };
}

function errName(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof EtcdError) {
      for (const [name, d] of Object.entries(Errors)) if (d.message === e.message && d.code === e.code) return name;
      return `unknown EtcdError ${e.message}`;
    }
    throw e;
  }
  return 'no error';
}

const k = (s: string) => Buffer.from(s);

describe('Lessor grant/revoke', () => {
  it('grants, raises short TTLs to the minimum, rejects duplicates and huge TTLs', () => {
    const { lessor } = setup({ minTtlSec: 3 });
    expect(lessor.grant(1n, 10)).toEqual({ id: 1n, ttlSec: 10 });
    expect(lessor.grant(2n, 1)).toEqual({ id: 2n, ttlSec: 3 });
    expect(errName(() => lessor.grant(1n, 10))).toBe('LeaseExist');
    expect(errName(() => lessor.grant(5n, MAX_LEASE_TTL_SEC + 1))).toBe('LeaseTTLTooLarge');
    expect(lessor.grant(6n, MAX_LEASE_TTL_SEC).ttlSec).toBe(MAX_LEASE_TTL_SEC);
    expect(lessor.count()).toBe(3);
    expect(() => lessor.grant(0n, 10)).toThrow();
  });

  it('revoke returns the attached keys sorted bytewise and forgets the lease', () => {
    const { lessor, db } = setup();
    lessor.grant(7n, 10);
    lessor.attach(7n, k('b'));
    lessor.attach(7n, k('a'));
    lessor.attach(7n, Buffer.from([0x00, 0xff]));
    lessor.attach(7n, k('c'));
    lessor.detach(7n, k('c'));
    expect(lessor.leaseOf(k('a'))).toBe(7n);
    expect(lessor.revoke(7n)).toEqual([Buffer.from([0x00, 0xff]), k('a'), k('b')]);
    expect(lessor.exists(7n)).toBe(false);
    expect(lessor.leaseOf(k('a'))).toBe(0n);
    expect(db.m.size).toBe(0);
    expect(errName(() => lessor.revoke(7n))).toBe('LeaseNotFound');
    // Detaching from a revoked lease (the store deleting its keys afterwards) is harmless.
    expect(() => lessor.detach(7n, k('a'))).not.toThrow();
  });

  it('attach to an unknown lease is LeaseNotFound; moving a key between leases keeps maps consistent', () => {
    const { lessor } = setup();
    expect(errName(() => lessor.attach(9n, k('x')))).toBe('LeaseNotFound');
    lessor.grant(1n, 10);
    lessor.grant(2n, 10);
    lessor.attach(1n, k('x'));
    lessor.attach(2n, k('x'));
    lessor.detach(1n, k('x')); // late detach from the old lease must not unlink the new one
    expect(lessor.leaseOf(k('x'))).toBe(2n);
    expect(lessor.timeToLive(1n)!.keys).toEqual([]);
    expect(lessor.timeToLive(2n)!.keys).toEqual([k('x')]);
  });
});

describe('Lessor expiry (leader only)', () => {
  it('followers never expire leases and refuse renewals', () => {
    const { lessor, clock } = setup();
    lessor.grant(1n, 5);
    clock.ms += 1_000_000;
    expect(lessor.expired(100)).toEqual([]);
    expect(errName(() => lessor.renew(1n))).toBe('NotLeader');
    expect(lessor.timeToLive(1n)).toEqual({ grantedTtlSec: 5, remainingTtlSec: 5, keys: [] });
  });

  it('expires in order of expiry, at most limit per call, and holds returned leases back for the retry interval', () => {
    const { lessor, clock } = setup();
    lessor.promote(0);
    lessor.grant(1n, 10);
    lessor.grant(2n, 5);
    lessor.grant(3n, 7);
    clock.ms += 4_999;
    expect(lessor.expired(10)).toEqual([]);
    clock.ms += 1; // lease 2 due exactly now
    expect(lessor.expired(10)).toEqual([2n]);
    expect(lessor.expired(10)).toEqual([]); // held back
    clock.ms += 5_000; // t=10s: 3 due since 7s, 2 retried since 8s, 1 due now
    expect(lessor.expired(2)).toEqual([3n, 2n]);
    expect(lessor.expired(2)).toEqual([1n]);
    lessor.revoke(2n);
    clock.ms += 3_000;
    expect(lessor.expired(10)).toEqual([1n, 3n]);
  });

  it('renew restarts the clock; expired or unknown leases are not found', () => {
    const { lessor, clock } = setup();
    lessor.promote(0);
    lessor.grant(1n, 10);
    clock.ms += 9_000;
    expect(lessor.timeToLive(1n)!.remainingTtlSec).toBe(1);
    expect(lessor.renew(1n)).toBe(10);
    expect(lessor.timeToLive(1n)!.remainingTtlSec).toBe(10);
    clock.ms += 9_999;
    expect(lessor.expired(10)).toEqual([]);
    clock.ms += 1;
    expect(errName(() => lessor.renew(1n))).toBe('LeaseNotFound');
    expect(lessor.expired(10)).toEqual([1n]);
    expect(errName(() => lessor.renew(42n))).toBe('LeaseNotFound');
  });

  it('promote extends every lease; demote stops expiry', () => {
    const { lessor, clock } = setup();
    lessor.grant(1n, 10);
    clock.ms += 100_000;
    lessor.promote(2_000);
    clock.ms += 11_999;
    expect(lessor.expired(10)).toEqual([]);
    clock.ms += 1;
    lessor.demote();
    expect(lessor.expired(10)).toEqual([]);
    lessor.promote(0);
    clock.ms += 10_000;
    expect(lessor.expired(10)).toEqual([1n]);
  });

  it('promote spreads a mass expiry so at most 3/4 of the revoke rate falls due per second', () => {
    const { lessor, clock } = setup();
    const n = 3000;
    for (let i = 1; i <= n; i++) lessor.grant(BigInt(i), 10);
    lessor.promote(0);
    const perSecond: number[] = [];
    for (let s = 0; s < 20; s++) {
      clock.ms += 1000;
      const due = lessor.expired(n);
      for (const id of due) lessor.revoke(id);
      perSecond.push(due.length);
    }
    expect(perSecond.reduce((a, b) => a + b, 0)).toBe(n);
    const target = (3 * LEASE_REVOKE_RATE_PER_SEC) / 4;
    for (const c of perSecond) expect(c).toBeLessThanOrEqual(target + 1);
  });

  it('leases() lists soonest expiry first; timeToLive of unknown is null', () => {
    const { lessor } = setup();
    lessor.promote(0);
    lessor.grant(1n, 30);
    lessor.grant(2n, 10);
    lessor.grant(3n, 20);
    expect(lessor.leases()).toEqual([2n, 3n, 1n]);
    expect(lessor.timeToLive(99n)).toBeNull();
  });
});

describe('Lessor checkpoints', () => {
  it('checkpoint persists the remaining TTL and the next leader starts from it', () => {
    const { lessor, clock, db } = setup();
    lessor.grant(1n, 100);
    lessor.checkpoint(1n, 30);
    expect(decodeLeaseRecord(db.get(leaseKey(1n))!)).toEqual({ id: 1n, ttlSec: 100, remainingTtlSec: 30 });
    lessor.promote(0);
    expect(lessor.timeToLive(1n)).toMatchObject({ grantedTtlSec: 100, remainingTtlSec: 30 });
    clock.ms += 30_000;
    expect(lessor.expired(10)).toEqual([1n]);
    lessor.checkpoint(99n, 5); // unknown: ignored
  });

  it('the leader reports due checkpoints and resets after a renew', () => {
    const { lessor, clock } = setup({ checkpointIntervalMs: 10_000 });
    lessor.promote(0);
    lessor.grant(1n, 60);
    lessor.grant(2n, 5); // shorter than the interval: never checkpointed
    expect(lessor.dueCheckpoints(10)).toEqual([]);
    clock.ms += 10_000;
    expect(lessor.dueCheckpoints(10)).toEqual([{ id: 1n, remainingTtlSec: 50 }]);
    lessor.checkpoint(1n, 50); // applied through the log
    expect(lessor.renew(1n)).toBe(60);
    expect(lessor.dueCheckpoints(10)).toEqual([{ id: 1n, remainingTtlSec: 0 }]);
  });
});

describe('Lessor persistence', () => {
  it('recover reloads leases from the db and re-attaches keys', () => {
    const { lessor, db, clock } = setup({ minTtlSec: 2 });
    lessor.grant(1n, 10);
    lessor.grant(-5n, 20); // clients may choose any int64
    lessor.grant(BigInt('9223372036854775807'), 1);
    const again = new Lessor({ db, nowMs: () => clock.ms, minTtlSec: 2 });
    const orphans = again.recover([
      { key: k('a'), lease: 1n },
      { key: k('b'), lease: 77n },
      { key: k('c'), lease: 0n },
    ]);
    expect(orphans).toBe(1);
    expect(new Set(again.leases())).toEqual(new Set([1n, -5n, BigInt('9223372036854775807')]));
    expect(again.timeToLive(1n)).toEqual({ grantedTtlSec: 10, remainingTtlSec: 10, keys: [k('a')] });
    expect(again.timeToLive(BigInt('9223372036854775807'))!.grantedTtlSec).toBe(2);
  });

  it('works on a real lmdb sub-database inside a transaction', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lessor-'));
    const root = open({ path: dir });
    try {
      const sub = root.openDB<Buffer, Buffer>({ name: 'lease', keyEncoding: 'binary', encoding: 'binary' });
      const lessor = new Lessor({ db: sub, nowMs: () => 0, minTtlSec: 1 });
      root.transactionSync(() => {
        lessor.grant(3n, 7);
        lessor.grant(4n, 8);
      });
      root.transactionSync(() => {
        lessor.revoke(4n);
      });
      const again = new Lessor({ db: sub, nowMs: () => 0, minTtlSec: 1 });
      again.recover([]);
      expect(again.leases()).toEqual([3n]);
      expect(again.timeToLive(3n)!.grantedTtlSec).toBe(7);
    } finally {
      await new Promise((r) => setTimeout(r, 20));
      await root.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('encodes records as leasepb.Lease', () => {
    // ID=1, TTL=10 -> 08 01 10 0a
    expect(encodeLeaseRecord({ id: 1n, ttlSec: 10, remainingTtlSec: 0 }).toString('hex')).toBe('0801100a');
    const neg = encodeLeaseRecord({ id: -1n, ttlSec: 5, remainingTtlSec: 3 });
    expect(decodeLeaseRecord(neg)).toEqual({ id: -1n, ttlSec: 5, remainingTtlSec: 3 });
    expect(leaseKey(1n).toString('hex')).toBe('0000000000000001');
  });
});

describe('LeaseIdGenerator', () => {
  it('gives positive, increasing, member-distinct IDs that survive a restart', () => {
    let now = 1_700_000_000_000;
    const a = new LeaseIdGenerator(0xabcdn, () => now);
    const b = new LeaseIdGenerator(0x1234n, () => now);
    const seen = new Set<bigint>();
    let prev = 0n;
    for (let i = 0; i < 1000; i++) {
      const id = a.next();
      expect(id > 0n && id < 1n << 63n).toBe(true);
      expect(id > prev).toBe(true);
      prev = id;
      seen.add(id);
      const other = b.next();
      expect(seen.has(other)).toBe(false);
      seen.add(other);
    }
    now += 10; // restart 10 ms later, after 1000 IDs (~4 ms worth of counter)
    const a2 = new LeaseIdGenerator(0xabcdn, () => now);
    expect(a2.next() > prev).toBe(true);
  });
});

describe('ExpiryHeap', () => {
  it('behaves like a sorted map under random upserts and removals', () => {
    let seed = 12345;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const heap = new ExpiryHeap();
    const model = new Map<bigint, number>();
    for (let i = 0; i < 20000; i++) {
      const id = BigInt(Math.floor(rnd() * 200));
      const op = rnd();
      if (op < 0.6) {
        const d = Math.floor(rnd() * 1000);
        heap.upsert(id, d);
        model.set(id, d);
      } else if (op < 0.8) {
        expect(heap.remove(id)).toBe(model.delete(id));
      } else {
        const top = heap.peek();
        if (model.size === 0) {
          expect(top).toBeUndefined();
        } else {
          const min = Math.min(...model.values());
          const minIds = [...model].filter(([, d]) => d === min).map(([k]) => k).sort((a, b) => (a < b ? -1 : 1));
          expect(top).toEqual({ id: minIds[0], deadlineMs: min });
        }
      }
      expect(heap.size).toBe(model.size);
    }
  });
});
