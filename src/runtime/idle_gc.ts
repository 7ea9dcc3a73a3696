// Gives a burst's garbage back once the server goes idle.
//
// V8 arms its memory reducer (the idle-time collections that shrink the heap) only after a
// mark-compact. bin/etcd sets a 64 MiB floor on the old generation's limit (so that a small heap is
// not mark-compacted back to back), and a load that ends below that limit never triggers one: its
// garbage then stays resident for as long as the server is quiet. Loading 100k keys in 1000
// transactions left 191 MiB resident 45 s later (113 MiB anonymous), against 154 MiB without the
// floor; with this check, 159 MiB. One full collection, once the event loop has been nearly idle for
// a few seconds after the heap grew (minIdleMs), costs a busy server nothing and an idle one a few
// tens of ms.
import assert from 'node:assert';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import v8 from 'node:v8';

export interface IdleGcOptions {
  /** How often idleness is judged (over the window since the last check). */
  checkIntervalMs: number;
  /** Idle: the event loop was busy at most this fraction of the window. */
  maxLoopUtilization: number;
  /** Collect only once the used heap has grown this much above where the last collection left it. */
  minGrowthBytes: number;
  /**
   * After start-up has read its state back, windows this short are judged until the collection
   * owed to its first idle stretch (IdleGc.recovered) has run, at most MAX_SHORT_WINDOWS of them.
   * That collection gives back the young generation start-up grew: a fresh, quiet server goes
   * 82 -> 72 MiB resident ~8 s after it starts (the first whole interval is rarely idle: it holds
   * start-up's work; V8's own memory reducer was not seen to run on an idle Node 20 at all).
   */
  firstCheckAfterRecoveryMs: number;
  /**
   * The loop must have been idle this long (over consecutive windows) before a collection. V8
   * judges its allocation rate over the last ~5 s, and gives back the young generation a load grew
   * only in a collection made while that rate is low: one made in the first quiet seconds after
   * 100k keys were loaded left them resident (166 MiB 45 s later, the same as right after the load).
   */
  minIdleMs: number;
}

/** Slots of the array allocated just before an idle collection (8 bytes each, below V8's large-object size). */
const NUDGE_SLOTS = 8192;
let allocationMarker: number[] | null = null;

/**
 * Collections that may follow one after which V8 still kept much more heap than it uses (see
 * IdleGc.collect): bounded, so that an idle server whose heap will not shrink is left alone.
 */
const MAX_FOLLOW_UPS = 2;

/** Short windows judged after start-up (see firstCheckAfterRecoveryMs) before the regular interval alone is left. */
const MAX_SHORT_WINDOWS = 15;

export const DEFAULT_IDLE_GC: IdleGcOptions = {
  checkIntervalMs: 10_000,
  maxLoopUtilization: 0.01,
  minGrowthBytes: 16 * 1024 * 1024,
  firstCheckAfterRecoveryMs: 2_000,
  minIdleMs: 6_000,
};

export interface IdleGcProbe {
  /**
   * V8's used heap now, garbage not yet collected included, plus the Buffers' memory it accounts
   * for: a dead Buffer's bytes go only when a collection finds its handle dead (a WAL segment read
   * at start-up is tens of MiB outside the JS heap).
   */
  usedHeapBytes(): number;
  /** Since the previous call: how long it was (ms) and the fraction of it the event loop was busy. */
  loopWindow(): { windowMs: number; utilization: number };
  /** V8's heap committed but not used (right after a collection: what it kept beyond the live data). */
  spareHeapBytes(): number;
  /** A full, synchronous collection. */
  collect(): void;
}

/** The decision, apart from timers and V8, so that it can be tested. */
export class IdleGc {
  /** Used heap right after the last collection we know of (ours, or V8's when it went lower). */
  private baselineBytes: number;
  /** A collection in the next idle stretch (minIdleMs) is owed whatever the growth (see recovered(), collect()). */
  private idleCollectionOwed = false;
  /** How long the loop has been idle, over the windows judged since it was last busy. */
  private idleMs = 0;
  /** Follow-up collections owed in a row so far (MAX_FOLLOW_UPS). */
  private followUps = 0;

  constructor(
    private readonly probe: IdleGcProbe,
    private readonly opts: IdleGcOptions = DEFAULT_IDLE_GC,
  ) {
    assert(opts.maxLoopUtilization >= 0 && opts.maxLoopUtilization < 1, 'maxLoopUtilization out of range');
    assert(opts.minGrowthBytes > 0, 'minGrowthBytes must be positive');
    assert(Number.isFinite(opts.minIdleMs) && opts.minIdleMs >= 0, 'minIdleMs out of range');
    this.baselineBytes = probe.usedHeapBytes();
  }

  /** One check at the end of a window; true when it collected. */
  check(): boolean {
    const { windowMs, utilization } = this.probe.loopWindow();
    const used = this.lowered(this.probe.usedHeapBytes());
    if (utilization > this.opts.maxLoopUtilization) {
      this.idleMs = 0;
      return false;
    }
    this.idleMs += windowMs;
    if (this.idleMs < this.opts.minIdleMs) return false;
    if (!this.idleCollectionOwed && used - this.baselineBytes < this.opts.minGrowthBytes) return false;
    this.collect();
    return true;
  }

  /**
   * Start-up has read the applied state back (WAL replay, index rebuild), before serving anyone:
   * when that grew the heap, its garbage (the segment buffers among it) goes now, busy or not. One
   * more collection is owed to the first idle stretch: V8 shrinks the young generation it grew for
   * the replay only in a collection that runs while allocation is slow (100k entries replayed:
   * 167 -> 137 MiB resident).
   */
  recovered(): boolean {
    const used = this.lowered(this.probe.usedHeapBytes());
    const grew = used - this.baselineBytes >= this.opts.minGrowthBytes;
    if (grew) this.collect();
    this.idleCollectionOwed = true;
    return grew;
  }

  /** V8's own collections lower the mark: growth counts from the lowest point seen. */
  private lowered(used: number): number {
    if (used < this.baselineBytes) this.baselineBytes = used;
    return used;
  }

  /**
   * One collection. When V8 kept much more heap than it uses after it (the young generation a load
   * or start-up grew, because the allocation it counted since its previous collection was still
   * high), one more is owed after the next minIdleMs of quiet: that one finds the rate low. After
   * a restart on 100k keys: 66 MiB of heap kept for 32 MiB used after the first idle collection.
   */
  private collect(): void {
    this.probe.collect();
    this.idleMs = 0;
    this.baselineBytes = this.probe.usedHeapBytes();
    if (this.probe.spareHeapBytes() >= this.opts.minGrowthBytes && this.followUps < MAX_FOLLOW_UPS) {
      this.followUps++;
      this.idleCollectionOwed = true;
    } else {
      this.followUps = 0;
      this.idleCollectionOwed = false;
    }
  }
}

export interface IdleGcHandle {
  /** Start-up has read its state back: see IdleGc.recovered(). */
  recovered(): void;
  stop(): void;
}

/**
 * Starts the periodic check when the process was started with `--expose-gc` (bin/etcd does);
 * otherwise does nothing.
 */
export function startIdleGc(opts: IdleGcOptions = DEFAULT_IDLE_GC): IdleGcHandle {
  const gc = (globalThis as { gc?: unknown }).gc;
  if (typeof gc !== 'function') return { recovered: () => {}, stop: () => {} };
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  const idle = new IdleGc(
    {
      usedHeapBytes: () => {
        const s = v8.getHeapStatistics();
        return s.used_heap_size + s.external_memory;
      },
      spareHeapBytes: () => {
        const s = v8.getHeapStatistics();
        return s.total_heap_size - s.used_heap_size;
      },
      loopWindow: () => {
        const now = performance.eventLoopUtilization();
        const window = performance.eventLoopUtilization(now, last);
        last = now;
        // The two timers below share `last`: each window is the time since either last judged.
        return { windowMs: window.idle + window.active, utilization: window.utilization };
      },
      collect: () => {
        // V8 gives back the young generation a load grew only in a collection that finds the
        // allocation rate low but not zero (Heap::ReduceNewSpaceSize). After seconds of quiet the
        // bytes allocated since the last collection can still sit in one allocation buffer and
        // count as none; this small allocation makes them count. Measured on 100k keys loaded,
        // 45 s later: resident 164-166 MiB in 2 of 3 runs without it.
        allocationMarker = new Array(NUDGE_SLOTS).fill(0);
        (gc as () => void)();
        allocationMarker = null;
      },
    },
    opts,
  );
  const timer = setInterval(() => idle.check(), opts.checkIntervalMs);
  timer.unref();
  let short: NodeJS.Timeout | undefined;
  return {
    recovered: () => {
      idle.recovered();
      if (short !== undefined) return;
      last = performance.eventLoopUtilization();
      let windows = 0;
      short = setInterval(() => {
        if (idle.check() || ++windows >= MAX_SHORT_WINDOWS) clearInterval(short);
      }, opts.firstCheckAfterRecoveryMs);
      short.unref();
    },
    stop: () => {
      clearInterval(timer);
      clearInterval(short);
    },
  };
}
