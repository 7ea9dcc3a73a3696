// Unique 64-bit IDs for requests and leases, built like etcd's idutil.Generator: the low 16
// bits of the member ID on top, then milliseconds since the epoch, then a counter. IDs from
// different members never collide and a restart (a later millisecond) never reuses one.
import assert from 'node:assert';

const SUFFIX_BITS = 48n;
const TS_BITS = 40n;
const CNT_BITS = 8n;
const SUFFIX_MASK = (1n << SUFFIX_BITS) - 1n;

export class IdGenerator {
  private readonly prefix: bigint;
  private suffix: bigint;

  constructor(memberId: bigint, nowMs: number) {
    this.prefix = (memberId & 0xffffn) << SUFFIX_BITS;
    const ts = BigInt(nowMs) & ((1n << TS_BITS) - 1n);
    this.suffix = ts << CNT_BITS;
  }

  next(): bigint {
    this.suffix = (this.suffix + 1n) & SUFFIX_MASK;
    return this.prefix | this.suffix;
  }

  /** Lease IDs must be positive int64: clear the sign bit as etcd does. */
  nextLeaseId(): bigint {
    const id = this.next() & ((1n << 63n) - 1n);
    assert(id > 0n);
    return id;
  }
}
