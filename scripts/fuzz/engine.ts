// A coverage-guided fuzzer for the parsers that face untrusted bytes (issue 51), of our own:
// Jazzer.js, the well-kept one on npm, does not load on these machines (its 4.x native part needs
// glibc 2.38, Debian 12 has 2.36; 2.x builds from GitHub at install). The guidance is V8's own
// block coverage, read through the inspector after every execution (no instrumentation step):
// an input that reaches a block, or a block a new number of times (in AFL's buckets), joins the
// corpus and is mutated further. ~1-2k executions a second on small targets here.
//
// A target swallows the errors its parser is allowed to throw and throws anything else (a bug, a
// disagreement, a bound broken); the engine records such throws, executions over the hang bound,
// and allocation failures as findings, with the input.
import inspector from 'node:inspector';

export interface FuzzTarget {
  readonly name: string;
  /** Valid inputs to start from (the corpus is never empty: an empty input is added). */
  readonly seeds: readonly Buffer[];
  readonly maxInputBytes: number;
  /** Substrings of the script URLs whose coverage guides this target (its parser's files). */
  readonly coverage: readonly string[];
  /** Runs one input; throws only for a finding. */
  run(input: Buffer): void;
}

export interface Finding {
  readonly input: Buffer;
  readonly error: string;
}

export interface FuzzOptions {
  /** Stop after this many executions... */
  maxExecs: number;
  /** ...or this long, whichever comes first. */
  budgetMs: number;
  seed: number;
  /** An execution taking longer is a finding (a hang, or work out of proportion to the input). */
  hangMs?: number;
  /** Findings kept before stopping early. */
  maxFindings?: number;
  /** Called every ~progressEveryMs with the running figures. */
  onProgress?: (r: FuzzResult) => void;
  progressEveryMs?: number;
}

export interface FuzzResult {
  readonly target: string;
  execs: number;
  corpus: number;
  features: number;
  findings: Finding[];
  ms: number;
}

const DEFAULT_HANG_MS = 500;
const DEFAULT_MAX_FINDINGS = 8;
/** Mutations stacked on one input per execution: 1..MAX_STACKED. */
const MAX_STACKED = 8;
const INTERESTING_BYTES = [0x00, 0x01, 0x7f, 0x80, 0xff, 0x0a, 0x12, 0x08, 0x10, 0x1a, 0x22];

/** xorshift32: the same mutations for the same seed. */
class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 0x9e3779b9;
  }
  next(): number {
    let x = this.s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.s = x >>> 0;
    return this.s;
  }
  below(n: number): number {
    return n <= 0 ? 0 : this.next() % n;
  }
}

interface CoverageRange {
  startOffset: number;
  endOffset: number;
  count: number;
}
interface CoverageScript {
  url: string;
  functions: Array<{ ranges: CoverageRange[] }>;
}

/** V8's block coverage since the last take (counters reset at each take). */
class CoverageProbe {
  private readonly session = new inspector.Session();
  private result: CoverageScript[] = [];
  private readonly onTaken = (err: Error | null, res: { result: CoverageScript[] }): void => {
    if (err) throw err;
    this.result = res.result;
  };

  constructor(private readonly filters: readonly string[]) {
    this.session.connect();
    this.post('Profiler.enable');
    this.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });
  }

  private post(method: string, params?: object): void {
    let failed: Error | null = null;
    // The in-process session answers synchronously.
    this.session.post(method, params ?? {}, (err) => {
      failed = err;
    });
    if (failed) throw failed;
  }

  /** The features of the last execution: a block of a guided script and its hit-count bucket. */
  take(into: string[]): void {
    into.length = 0;
    this.session.post('Profiler.takePreciseCoverage', this.onTaken as never);
    for (const script of this.result) {
      if (!this.filters.some((f) => script.url.includes(f))) continue;
      for (const fn of script.functions) {
        // V8 reports a function's range with its count, and inside it the ranges that ran a
        // different number of times, the ones that did not run among them (count 0): the shape
        // of those ranges is the path taken, so every range is a feature, zero counts included.
        if (fn.ranges.length === 1 && fn.ranges[0]!.count === 0) continue;
        for (const r of fn.ranges) into.push(`${script.url}:${r.startOffset}:${r.endOffset}:${bucket(r.count)}`);
      }
    }
  }

  close(): void {
    this.post('Profiler.stopPreciseCoverage');
    this.session.disconnect();
  }
}

function bucket(count: number): number {
  if (count <= 3) return count; // 0 (did not run), 1, 2, 3
  if (count <= 7) return 4;
  if (count <= 15) return 5;
  if (count <= 31) return 6;
  if (count <= 127) return 7;
  return 8;
}

function mutate(rng: Rng, input: Buffer, corpus: readonly Buffer[], maxBytes: number): Buffer {
  let b = Buffer.from(input);
  const n = 1 + rng.below(MAX_STACKED);
  for (let i = 0; i < n; i++) {
    switch (rng.below(9)) {
      case 0: // flip a bit
        if (b.length > 0) b[rng.below(b.length)]! ^= 1 << rng.below(8);
        break;
      case 1: // set a byte
        if (b.length > 0) b[rng.below(b.length)] = rng.below(256);
        break;
      case 2: // an interesting byte
        if (b.length > 0) b[rng.below(b.length)] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.length)]!;
        break;
      case 3: {
        // insert random bytes
        const at = rng.below(b.length + 1);
        const add = Buffer.alloc(1 + rng.below(8));
        for (let j = 0; j < add.length; j++) add[j] = rng.below(256);
        b = Buffer.concat([b.subarray(0, at), add, b.subarray(at)]);
        break;
      }
      case 4: {
        // delete a range
        if (b.length === 0) break;
        const at = rng.below(b.length);
        const len = 1 + rng.below(Math.min(16, b.length - at));
        b = Buffer.concat([b.subarray(0, at), b.subarray(at + len)]);
        break;
      }
      case 5: {
        // duplicate a range
        if (b.length === 0) break;
        const at = rng.below(b.length);
        const len = 1 + rng.below(Math.min(32, b.length - at));
        b = Buffer.concat([b.subarray(0, at + len), b.subarray(at, at + len), b.subarray(at + len)]);
        break;
      }
      case 6: {
        // splice with another corpus entry
        const other = corpus[rng.below(corpus.length)]!;
        const cut = rng.below(b.length + 1);
        const from = rng.below(other.length + 1);
        b = Buffer.concat([b.subarray(0, cut), other.subarray(from)]);
        break;
      }
      case 7: {
        // a length-ish value: a varint or a big-endian u32 written over the input
        if (b.length < 4) break;
        const at = rng.below(b.length - 3);
        const v = [0, 1, 0x7f, 0x80, 0xff, 0x3fff, 0x4000, 0xffff, 0x7fffffff, 0xffffffff][rng.below(10)]!;
        b.writeUInt32BE(v >>> 0, at);
        break;
      }
      default: {
        // truncate
        if (b.length > 0) b = b.subarray(0, rng.below(b.length));
      }
    }
  }
  return b.length > maxBytes ? b.subarray(0, maxBytes) : b;
}

/** Runs `target` until the budget is spent; returns what it found. */
export function fuzz(target: FuzzTarget, opts: FuzzOptions): FuzzResult {
  const rng = new Rng(opts.seed);
  const hangMs = opts.hangMs ?? DEFAULT_HANG_MS;
  const maxFindings = opts.maxFindings ?? DEFAULT_MAX_FINDINGS;
  const probe = new CoverageProbe(target.coverage);
  const seen = new Set<string>();
  const corpus: Buffer[] = [Buffer.alloc(0), ...target.seeds];
  const findings: Finding[] = [];
  const features: string[] = [];
  const t0 = performance.now();
  const result: FuzzResult = { target: target.name, execs: 0, corpus: 0, features: 0, findings, ms: 0 };
  let lastProgress = t0;
  const execute = (input: Buffer): boolean => {
    const start = performance.now();
    let error: string | null = null;
    try {
      target.run(input);
    } catch (e) {
      error = e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ''}` : `non-Error thrown: ${String(e)}`;
    }
    const took = performance.now() - start;
    if (error === null && took > hangMs) error = `took ${took.toFixed(0)} ms (bound ${hangMs} ms)`;
    result.execs++;
    probe.take(features);
    let fresh = false;
    for (const f of features) {
      if (!seen.has(f)) {
        seen.add(f);
        fresh = true;
      }
    }
    if (error !== null && findings.length < maxFindings && !findings.some((x) => x.error.split('\n')[0] === error!.split('\n')[0])) {
      findings.push({ input: Buffer.from(input), error });
    }
    return fresh && error === null;
  };
  try {
    for (const s of [...corpus]) execute(s);
    while (result.execs < opts.maxExecs && findings.length < maxFindings) {
      const now = performance.now();
      if (now - t0 > opts.budgetMs) break;
      if (opts.onProgress && now - lastProgress > (opts.progressEveryMs ?? 10_000)) {
        lastProgress = now;
        result.corpus = corpus.length;
        result.features = seen.size;
        result.ms = now - t0;
        opts.onProgress(result);
      }
      const parent = corpus[rng.below(corpus.length)]!;
      const child = mutate(rng, parent, corpus, target.maxInputBytes);
      if (execute(child)) corpus.push(child);
    }
  } finally {
    probe.close();
  }
  result.corpus = corpus.length;
  result.features = seen.size;
  result.ms = performance.now() - t0;
  return result;
}
