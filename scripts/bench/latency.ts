// Latency samples of the harness's own load generator, and the bounded waits every step uses.
import assert from 'node:assert';

/** Enough for any run here (a 1M-key load is 10k txns); beyond it samples are counted but not kept. */
const MAX_SAMPLES = 2_000_000;

export class LatencyRecorder {
  private readonly samplesMs: number[] = [];
  /** Completed operations, including those beyond MAX_SAMPLES. */
  count = 0;
  errors = 0;
  lastError = '';

  record(ms: number): void {
    this.count++;
    if (this.samplesMs.length < MAX_SAMPLES) this.samplesMs.push(ms);
  }

  fail(e: unknown): void {
    this.errors++;
    this.lastError = e instanceof Error ? e.message : String(e);
  }

  /** Times `op` and records it (or counts its failure and rethrows). */
  async time<T>(op: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      const r = await op();
      this.record(performance.now() - t0);
      return r;
    } catch (e) {
      this.fail(e);
      throw e;
    }
  }

  /** Nearest-rank percentile in ms (NaN without samples). */
  percentile(p: number): number {
    assert(p > 0 && p <= 100);
    if (this.samplesMs.length === 0) return NaN;
    const sorted = [...this.samplesMs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Rejects after `ms` if `p` has not settled; `what` names the step in the error. */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${(ms / 1000).toFixed(0)} s`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `cond` every `intervalMs` until it holds; rejects after `timeoutMs`. */
export async function waitFor(cond: () => boolean, timeoutMs: number, what: string, intervalMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${(timeoutMs / 1000).toFixed(1)} s`);
    await sleep(intervalMs);
  }
}

/** Runs `worker(i)` for i in [0, n) with at most `concurrency` in flight; stops at the first failure. */
export async function pool(n: number, concurrency: number, worker: (i: number) => Promise<void>): Promise<void> {
  assert(concurrency >= 1);
  let next = 0;
  let failed: unknown;
  const lane = async (): Promise<void> => {
    while (next < n && failed === undefined) {
      const i = next++;
      try {
        await worker(i);
      } catch (e) {
        failed ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, lane));
  if (failed !== undefined) throw failed;
}
