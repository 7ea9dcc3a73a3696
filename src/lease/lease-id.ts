// Lease IDs for LeaseGrant requests that leave ID at 0. Like etcd's idutil.Generator, an ID is
//   bits 62..48: the low 15 bits of the member ID       (different members -> different IDs)
//   bits 47..8 : milliseconds since the epoch at start  (a restart starts past every old ID)
//   bits  7..0 : a counter; it carries into the time bits, so the sequence never repeats
// Bit 63 stays 0, so every ID is a positive int64 (etcd masks it the same way). IDs are only
// unique while a member grants fewer than 256 leases per millisecond on average since start;
// a collision is caught anyway: the logged grant fails with LeaseExist.
import assert from 'node:assert';

const SUFFIX_BITS = 48n;
const SUFFIX_MASK = (1n << SUFFIX_BITS) - 1n;
const TIME_BITS = 40n;
const COUNTER_BITS = 8n;
const MEMBER_MASK = (1n << 15n) - 1n;

export class LeaseIdGenerator {
  private readonly prefix: bigint;
  private suffix: bigint;

  constructor(memberId: bigint, nowMs: () => number) {
    const ms = nowMs();
    assert(Number.isSafeInteger(ms) && ms >= 0, 'nowMs must be a non-negative integer');
    this.prefix = (memberId & MEMBER_MASK) << SUFFIX_BITS;
    this.suffix = (BigInt(ms) & ((1n << TIME_BITS) - 1n)) << COUNTER_BITS;
  }

  /** A new positive int64 lease ID (never 0). */
  next(): bigint {
    for (;;) {
      this.suffix = (this.suffix + 1n) & SUFFIX_MASK;
      const id = this.prefix | this.suffix;
      if (id !== 0n) return id;
    }
  }
}
