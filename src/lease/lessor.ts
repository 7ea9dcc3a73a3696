// The lessor: which leases exist, which keys each one holds, and (on the leader) when each
// expires. Semantics follow etcd's lease/lessor.go:
// - grant/revoke/attach/detach/checkpoint come through the Raft log, so they run on every
//   member in the same order and persist to the backend inside the applier's batch;
// - expiry is only tracked on the leader (promote); followers keep every lease "forever"
//   (demote), and keepalives are not logged: a new leader restarts every clock at promote,
//   extended by an election timeout so no lease dies during the handover;
// - the server asks `expired(limit)` each round and proposes LeaseRevoke for the result;
//   a lease handed out is held back for `expiredRetryIntervalMs` so a slow revoke is not
//   proposed twice per round.
// The lessor never reads a clock itself: `nowMs` is injected (tests drive it).
import assert from 'node:assert';
import { etcdError } from '../errors';
import { ExpiryHeap } from './expiry-heap';
import { decodeLeaseRecord, encodeLeaseRecord, isInt64, leaseIdFromKey, leaseKey } from './lease-record';

/** etcd's MaxLeaseTTL: about 285 years. */
export const MAX_LEASE_TTL_SEC = 9_000_000_000;
/** etcd's leaseRevokeRate: the server should revoke at most this many leases per second. */
export const LEASE_REVOKE_RATE_PER_SEC = 1000;
const DEFAULT_EXPIRED_RETRY_INTERVAL_MS = 3000;

/**
 * The part of an lmdb-js `Database<Buffer, Buffer>` the lessor uses (a sub-database opened with
 * binary keys and values). Writes are the synchronous forms so that, called inside the
 * applier's `transactionSync`, they join its transaction.
 */
export interface LeaseDb {
  get(key: Buffer): Buffer | undefined;
  putSync(key: Buffer, value: Buffer): void;
  removeSync(key: Buffer): boolean;
  getRange(): Iterable<{ key: Buffer; value: Buffer }>;
}

export interface LessorOptions {
  db: LeaseDb;
  nowMs: () => number;
  /**
   * Smallest TTL a lease gets; shorter requests are raised to it. etcd uses
   * ceil(1.5 * election timeout) seconds (etcdserver/server.go: minTTL = 3*ElectionTicks/2
   * heartbeats), i.e. 2 s with the default 1000 ms election timeout.
   */
  minTtlSec: number;
  /** Larger grants fail with LeaseTTLTooLarge. Default MAX_LEASE_TTL_SEC. */
  maxTtlSec?: number;
  /** Default 3000 (etcd's defaultExpiredleaseRetryInterval). */
  expiredRetryIntervalMs?: number;
  /**
   * Leader-side lease checkpointing (etcd's --experimental-enable-lease-checkpoint):
   * how often a long lease's remaining TTL is logged. Undefined: disabled (etcd's default).
   */
  checkpointIntervalMs?: number;
}

export interface LeaseTimeToLive {
  grantedTtlSec: number;
  remainingTtlSec: number;
  keys: Buffer[];
}

interface Lease {
  readonly id: bigint;
  ttlSec: number;
  /** 0: unset. A checkpointed remaining TTL that the next promote starts from. */
  remainingTtlSec: number;
  /** Infinity while this member is not the leader. */
  expiryMs: number;
  /** Attached keys by their latin1 spelling (one char per byte, lossless). */
  readonly keys: Map<string, Buffer>;
}

function keyId(key: Buffer): string {
  return key.toString('latin1');
}

export class Lessor {
  private readonly db: LeaseDb;
  private readonly nowMs: () => number;
  private readonly minTtlSec: number;
  private readonly maxTtlSec: number;
  private readonly expiredRetryIntervalMs: number;
  private readonly checkpointIntervalMs: number | undefined;

  private readonly leaseMap = new Map<bigint, Lease>();
  /** key -> the lease holding it (etcd's itemMap). */
  private readonly keyLease = new Map<string, bigint>();
  /** Leader only: one entry per lease, ordered by expiry (or by the retry time once handed out). */
  private readonly expiryHeap = new ExpiryHeap();
  /** Leader only, when checkpointing is on: when each long lease next reports its remaining TTL. */
  private readonly checkpointHeap = new ExpiryHeap();
  /** Leader only: renewed leases whose logged remaining TTL must be reset to 0 (bounded by leaseMap). */
  private readonly checkpointResets = new Set<bigint>();
  private primary = false;

  constructor(opts: LessorOptions) {
    assert(Number.isSafeInteger(opts.minTtlSec) && opts.minTtlSec >= 1, 'minTtlSec must be an integer >= 1');
    this.db = opts.db;
    this.nowMs = opts.nowMs;
    this.minTtlSec = opts.minTtlSec;
    this.maxTtlSec = opts.maxTtlSec ?? MAX_LEASE_TTL_SEC;
    this.expiredRetryIntervalMs = opts.expiredRetryIntervalMs ?? DEFAULT_EXPIRED_RETRY_INTERVAL_MS;
    this.checkpointIntervalMs = opts.checkpointIntervalMs;
    assert(this.maxTtlSec >= this.minTtlSec);
    assert(this.expiredRetryIntervalMs > 0);
    assert(this.checkpointIntervalMs === undefined || this.checkpointIntervalMs > 0);
  }

  isPrimary(): boolean {
    return this.primary;
  }

  // ---- applied through the Raft log ------------------------------------------------------

  /** Create a lease. TTLs below the minimum are raised to it. */
  grant(id: bigint, ttlSec: number): { id: bigint; ttlSec: number } {
    // The server replaces a requested ID 0 before logging; a 0 here is a bug upstream.
    assert(id !== 0n, 'a logged LeaseGrant must carry a non-zero ID');
    assert(isInt64(id), 'lease ID out of int64 range');
    assert(Number.isSafeInteger(ttlSec), 'ttlSec must be an integer');
    if (ttlSec > this.maxTtlSec) throw etcdError('LeaseTTLTooLarge');
    if (this.leaseMap.has(id)) throw etcdError('LeaseExist');
    const lease: Lease = {
      id,
      ttlSec: Math.max(ttlSec, this.minTtlSec),
      remainingTtlSec: 0,
      expiryMs: Infinity,
      keys: new Map(),
    };
    this.leaseMap.set(id, lease);
    this.persist(lease);
    if (this.primary) {
      this.refresh(lease, 0);
      this.scheduleCheckpoint(lease);
    }
    return { id, ttlSec: lease.ttlSec };
  }

  /**
   * Forget a lease. Returns its keys sorted bytewise; the applier deletes them in the same
   * revision (and may call detach for them afterwards: that is a no-op then).
   */
  revoke(id: bigint): Buffer[] {
    const lease = this.leaseMap.get(id);
    if (lease === undefined) throw etcdError('LeaseNotFound');
    const keys = [...lease.keys.values()].sort(Buffer.compare);
    for (const k of lease.keys.keys()) {
      if (this.keyLease.get(k) === id) this.keyLease.delete(k);
    }
    this.leaseMap.delete(id);
    this.expiryHeap.remove(id);
    this.checkpointHeap.remove(id);
    this.checkpointResets.delete(id);
    this.db.removeSync(leaseKey(id));
    return keys;
  }

  /** Record that `key` is held by lease `id`. LeaseNotFound when the lease does not exist. */
  attach(id: bigint, key: Buffer): void {
    const lease = this.leaseMap.get(id);
    if (lease === undefined) throw etcdError('LeaseNotFound');
    const k = keyId(key);
    const previous = this.keyLease.get(k);
    if (previous !== undefined && previous !== id) {
      // The store normally detaches first; keep the two maps consistent either way.
      this.leaseMap.get(previous)?.keys.delete(k);
    }
    lease.keys.set(k, Buffer.from(key));
    this.keyLease.set(k, id);
  }

  /**
   * Drop `key` from lease `id`. Unknown leases are ignored: etcd's store only logs that case,
   * and it happens legitimately when a revoke's key deletions detach from the revoked lease.
   */
  detach(id: bigint, key: Buffer): void {
    const lease = this.leaseMap.get(id);
    if (lease === undefined) return;
    const k = keyId(key);
    lease.keys.delete(k);
    if (this.keyLease.get(k) === id) this.keyLease.delete(k);
  }

  exists(id: bigint): boolean {
    return this.leaseMap.has(id);
  }

  /** The lease holding `key`, 0n when none. */
  leaseOf(key: Buffer): bigint {
    return this.keyLease.get(keyId(key)) ?? 0n;
  }

  /** etcd's LeaseCheckpoint: remember (and persist) the remaining TTL a new leader starts from. */
  checkpoint(id: bigint, remainingTtlSec: number): void {
    assert(Number.isSafeInteger(remainingTtlSec), 'remainingTtlSec must be an integer');
    const lease = this.leaseMap.get(id);
    if (lease === undefined) return;
    lease.remainingTtlSec = remainingTtlSec;
    this.persist(lease);
    if (this.primary) this.scheduleCheckpoint(lease);
  }

  // ---- leader only, in memory --------------------------------------------------------------

  /**
   * A keepalive: restart the lease's clock; returns the TTL in seconds. Throws NotLeader when
   * this member is not the leader (the server forwards the keepalive), LeaseNotFound when the
   * lease does not exist or has already expired (etcd makes that renew wait for the revoke and
   * then answers "not found"; the client sees the same TTL 0).
   */
  renew(id: bigint): number {
    if (!this.primary) throw etcdError('NotLeader');
    const lease = this.leaseMap.get(id);
    if (lease === undefined) throw etcdError('LeaseNotFound');
    if (lease.expiryMs <= this.nowMs()) throw etcdError('LeaseNotFound');
    if (lease.remainingTtlSec > 0) {
      // A checkpointed remaining TTL no longer applies; followers learn it via dueCheckpoints().
      lease.remainingTtlSec = 0;
      if (this.checkpointIntervalMs !== undefined) this.checkpointResets.add(id);
    }
    this.refresh(lease, 0);
    return lease.ttlSec;
  }

  /**
   * Become the leader: every lease expires no earlier than now + its (remaining) TTL +
   * extendMs. With many leases, expiries bunched into the same second are spread so that at
   * most 3/4 of LEASE_REVOKE_RATE_PER_SEC fall due per second (as etcd does).
   */
  promote(extendMs: number): void {
    assert(Number.isFinite(extendMs) && extendMs >= 0);
    this.primary = true;
    this.checkpointResets.clear();
    for (const lease of this.leaseMap.values()) {
      this.refresh(lease, extendMs);
      this.scheduleCheckpoint(lease);
    }
    if (this.leaseMap.size < LEASE_REVOKE_RATE_PER_SEC) return;

    const now = this.nowMs();
    const leases = [...this.leaseMap.values()].sort((a, b) => a.expiryMs - b.expiryMs);
    const targetPerSec = Math.floor((3 * LEASE_REVOKE_RATE_PER_SEC) / 4);
    let baseWindowMs = leases[0].expiryMs - now;
    let nextWindowMs = baseWindowMs + 1000;
    let inWindow = 0;
    for (const lease of leases) {
      const remainingMs = lease.expiryMs - now;
      if (remainingMs > nextWindowMs) {
        baseWindowMs = remainingMs;
        nextWindowMs = baseWindowMs + 1000;
        inWindow = 1;
        continue;
      }
      inWindow++;
      if (inWindow <= targetPerSec) continue;
      const delayMs = (1000 * inWindow) / targetPerSec - (remainingMs - baseWindowMs);
      nextWindowMs = baseWindowMs + delayMs;
      this.refresh(lease, delayMs + extendMs);
      this.scheduleCheckpoint(lease);
    }
  }

  /** Stop being the leader: leases no longer expire here. */
  demote(): void {
    this.primary = false;
    for (const lease of this.leaseMap.values()) lease.expiryMs = Infinity;
    this.expiryHeap.clear();
    this.checkpointHeap.clear();
    this.checkpointResets.clear();
  }

  /**
   * Leases past their expiry, earliest first, at most `limit`. Each one returned is held back
   * for the retry interval, so calling this every round proposes each revoke once (again only
   * if the revoke has not been applied by then).
   */
  expired(limit: number): bigint[] {
    assert(Number.isSafeInteger(limit) && limit >= 0);
    const out: bigint[] = [];
    if (!this.primary) return out;
    const now = this.nowMs();
    // Each step either stops or pushes the top entry into the future: at most size steps.
    for (let steps = this.expiryHeap.size; steps > 0 && out.length < limit; steps--) {
      const top = this.expiryHeap.peek();
      if (top === undefined || top.deadlineMs > now) break;
      const lease = this.leaseMap.get(top.id);
      if (lease === undefined) {
        this.expiryHeap.remove(top.id);
        continue;
      }
      this.expiryHeap.upsert(top.id, now + this.expiredRetryIntervalMs);
      if (lease.expiryMs <= now) out.push(top.id);
    }
    return out;
  }

  /**
   * Leader with checkpointing on: remaining TTLs to log as one LeaseCheckpointRequest
   * (at most `limit`), including resets to 0 for leases renewed since their last checkpoint.
   * The logged checkpoint comes back through `checkpoint()`, which schedules the next one.
   */
  dueCheckpoints(limit: number): Array<{ id: bigint; remainingTtlSec: number }> {
    assert(Number.isSafeInteger(limit) && limit >= 0);
    const out: Array<{ id: bigint; remainingTtlSec: number }> = [];
    if (!this.primary || this.checkpointIntervalMs === undefined) return out;
    for (const id of this.checkpointResets) {
      if (out.length >= limit) return out;
      this.checkpointResets.delete(id);
      if (this.leaseMap.has(id)) out.push({ id, remainingTtlSec: 0 });
    }
    const now = this.nowMs();
    while (out.length < limit) {
      const top = this.checkpointHeap.peek();
      if (top === undefined || top.deadlineMs > now) break;
      this.checkpointHeap.remove(top.id);
      const lease = this.leaseMap.get(top.id);
      if (lease === undefined || now >= lease.expiryMs) continue;
      const remainingTtlSec = Math.ceil((lease.expiryMs - now) / 1000);
      if (remainingTtlSec >= lease.ttlSec) continue;
      out.push({ id: top.id, remainingTtlSec });
    }
    return out;
  }

  // ---- queries -------------------------------------------------------------------------------

  /**
   * TTL figures as LeaseTimeToLive reports them; null when the lease does not exist.
   * On the leader remainingTtlSec counts down (truncated to whole seconds like etcd; it can go
   * negative for an expired lease whose revoke is still in flight). Elsewhere no clock runs, so
   * it is the TTL the lease would restart from (etcd forwards this request to the leader).
   */
  timeToLive(id: bigint): LeaseTimeToLive | null {
    const lease = this.leaseMap.get(id);
    if (lease === undefined) return null;
    const remainingTtlSec = Number.isFinite(lease.expiryMs)
      ? Math.trunc((lease.expiryMs - this.nowMs()) / 1000)
      : effectiveTtlSec(lease);
    return {
      grantedTtlSec: lease.ttlSec,
      remainingTtlSec,
      keys: [...lease.keys.values()].sort(Buffer.compare),
    };
  }

  /** Every lease ID, soonest expiry first (etcd's order for LeaseLeases). */
  leases(): bigint[] {
    return [...this.leaseMap.values()]
      .sort((a, b) => (a.expiryMs !== b.expiryMs ? (a.expiryMs < b.expiryMs ? -1 : 1) : a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map((l) => l.id);
  }

  count(): number {
    return this.leaseMap.size;
  }

  /**
   * Start-up or snapshot restore: reload every lease from the db and re-attach the keys the
   * store holds. Keys naming a lease that no longer exists are skipped (etcd logs them).
   * Returns how many such keys there were.
   */
  recover(keysWithLease: Iterable<{ key: Buffer; lease: bigint }>): number {
    this.leaseMap.clear();
    this.keyLease.clear();
    this.expiryHeap.clear();
    this.checkpointHeap.clear();
    this.checkpointResets.clear();
    for (const { key, value } of this.db.getRange()) {
      const rec = decodeLeaseRecord(value);
      const id = leaseIdFromKey(key);
      assert.strictEqual(rec.id, id, 'lease record ID does not match its key');
      const lease: Lease = {
        id,
        ttlSec: Math.max(rec.ttlSec, this.minTtlSec),
        remainingTtlSec: rec.remainingTtlSec,
        expiryMs: Infinity,
        keys: new Map(),
      };
      this.leaseMap.set(id, lease);
      if (this.primary) {
        this.refresh(lease, 0);
        this.scheduleCheckpoint(lease);
      }
    }
    let orphans = 0;
    for (const { key, lease } of keysWithLease) {
      if (lease === 0n) continue;
      if (this.leaseMap.has(lease)) this.attach(lease, key);
      else orphans++;
    }
    return orphans;
  }

  // ---- internals -----------------------------------------------------------------------------

  private refresh(lease: Lease, extendMs: number): void {
    lease.expiryMs = this.nowMs() + extendMs + effectiveTtlSec(lease) * 1000;
    this.expiryHeap.upsert(lease.id, lease.expiryMs);
  }

  private scheduleCheckpoint(lease: Lease): void {
    if (this.checkpointIntervalMs === undefined || !this.primary) return;
    if (effectiveTtlSec(lease) * 1000 > this.checkpointIntervalMs) {
      this.checkpointHeap.upsert(lease.id, this.nowMs() + this.checkpointIntervalMs);
    }
  }

  private persist(lease: Lease): void {
    this.db.putSync(
      leaseKey(lease.id),
      encodeLeaseRecord({ id: lease.id, ttlSec: lease.ttlSec, remainingTtlSec: lease.remainingTtlSec }),
    );
  }
}

function effectiveTtlSec(lease: Lease): number {
  return lease.remainingTtlSec > 0 ? lease.remainingTtlSec : lease.ttlSec;
}
