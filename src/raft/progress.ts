import assert from 'node:assert';

export const ProgressState = { Probe: 0, Replicate: 1, Snapshot: 2 } as const;
export const ProgressStateName: Record<number, string> = { 0: 'StateProbe', 1: 'StateReplicate', 2: 'StateSnapshot' };

/**
 * Ring buffer of the last indexes of MsgApps in flight to one follower, with their entries' bytes;
 * the pipelining bounds are its capacity (maxInflightMsgs) and, when not 0, maxBytes
 * (maxInflightBytes: full once the bytes in flight reach it, as etcd-raft's).
 */
export class Inflights {
  private start = 0;
  private count = 0;
  private bytes = 0;
  private readonly buffer: number[];
  private readonly sizes: number[];

  constructor(
    readonly size: number,
    readonly maxBytes = 0,
  ) {
    assert(size > 0, 'inflights size must be positive');
    assert(Number.isSafeInteger(maxBytes) && maxBytes >= 0, 'inflights byte bound must be a non-negative integer');
    this.buffer = new Array<number>(size).fill(0);
    this.sizes = new Array<number>(size).fill(0);
  }

  add(inflight: number, bytes = 0): void {
    assert(!this.full(), 'cannot add into a full inflights');
    const next = (this.start + this.count) % this.size;
    if (this.count > 0) {
      const prev = this.buffer[(next - 1 + this.size) % this.size]!;
      if (!(inflight > prev)) assert.fail(`inflights must increase: ${inflight} after ${prev}`);
    }
    this.buffer[next] = inflight;
    this.sizes[next] = bytes;
    this.count++;
    this.bytes += bytes;
  }

  /** Entry bytes of the messages in flight. */
  get inflightBytes(): number {
    return this.bytes;
  }

  /** Frees every inflight message whose last index is <= to. */
  freeLE(to: number): void {
    if (this.count === 0 || to < this.buffer[this.start]!) return;
    let idx = this.start;
    let i = 0;
    let freed = 0;
    for (; i < this.count; i++) {
      if (to < this.buffer[idx]!) break;
      freed += this.sizes[idx]!;
      idx = (idx + 1) % this.size;
    }
    this.count -= i;
    this.bytes -= freed;
    assert(this.bytes >= 0, 'inflight bytes went negative');
    this.start = idx;
    if (this.count === 0) this.start = 0;
  }

  freeFirstOne(): void {
    if (this.count === 0) return;
    this.freeLE(this.buffer[this.start]!);
  }

  full(): boolean {
    return this.count === this.size || (this.maxBytes !== 0 && this.bytes >= this.maxBytes);
  }

  get length(): number {
    return this.count;
  }

  reset(): void {
    this.count = 0;
    this.start = 0;
    this.bytes = 0;
  }
}

/**
 * The leader's view of one follower. Probe: one MsgApp per heartbeat until a match is found.
 * Replicate: optimistic pipelining bounded by inflights. Snapshot: wait for the snapshot to be applied.
 */
export class Progress {
  match = 0;
  next: number;
  state: number = ProgressState.Probe;
  /** Probe state: a MsgApp was sent and not yet answered (pauses further probes). */
  probeSent = false;
  /** Snapshot state: index of the snapshot being sent. */
  pendingSnapshot = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  readonly inflights: Inflights;

  constructor(next: number, maxInflight: number, public isLearner: boolean, maxInflightBytes = 0) {
    this.next = next;
    this.inflights = new Inflights(maxInflight, maxInflightBytes);
  }

  private resetState(state: number): void {
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.state = state;
    this.inflights.reset();
  }

  becomeProbe(): void {
    if (this.state === ProgressState.Snapshot) {
      const pendingSnapshot = this.pendingSnapshot;
      this.resetState(ProgressState.Probe);
      this.next = Math.max(this.match + 1, pendingSnapshot + 1);
    } else {
      this.resetState(ProgressState.Probe);
      this.next = this.match + 1;
    }
  }

  becomeReplicate(): void {
    this.resetState(ProgressState.Replicate);
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState(ProgressState.Snapshot);
    this.pendingSnapshot = snapshotIndex;
  }

  /** An ack for index n arrived; returns whether match advanced. */
  maybeUpdate(n: number): boolean {
    let updated = false;
    if (this.match < n) {
      this.match = n;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, n + 1);
    return updated;
  }

  optimisticUpdate(n: number): void {
    this.next = n + 1;
  }

  /**
   * A MsgApp at `rejected` was refused; `matchHint` is the follower's guess of the last index it may
   * share with us. Returns false for stale rejections.
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === ProgressState.Replicate) {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), 1);
    this.probeSent = false;
    return true;
  }

  isPaused(): boolean {
    switch (this.state) {
      case ProgressState.Probe:
        return this.probeSent;
      case ProgressState.Replicate:
        return this.inflights.full();
      case ProgressState.Snapshot:
        return true;
      default:
        assert.fail(`unexpected progress state ${this.state}`);
    }
  }

  toString(): string {
    return `${ProgressStateName[this.state]} match=${this.match} next=${this.next}${this.isLearner ? ' learner' : ''}`;
  }
}
