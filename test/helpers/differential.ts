// The seed runner of the randomized differential tests (differential-random, differential-auth-
// random): one fresh real etcd and one fresh server under test per seed, the same generated steps
// sent to both, each step's normalised outcomes compared; the first difference the test does not
// allow fails the seed with the request, both outcomes, the steps before it and a replay command.
// Each test brings its own steps, sides (how a step is sent and normalised) and allowed differences.
import fs from 'node:fs';
import path from 'node:path';
import { EtcdMember, etcdBin, startEtcd } from './etcd-process';
import { isRpcError, type Msg } from './grpc';
import { lineDiff } from './normalize';
import { REFERENCE_LINES, referenceEtcd, type ReferenceLine } from './reference';

/**
 * The etcd the differential tests compare with: etcd 3.6 (scripts/reference/install.sh's build)
 * unless `DIFF_REFERENCE` names another line (`3.7`) or a binary (`/usr/bin/etcd`, Debian's 3.4.23).
 */
export function referenceBin(): string {
  const v = process.env['DIFF_REFERENCE'] || '3.6';
  if ((REFERENCE_LINES as readonly string[]).includes(v)) return referenceEtcd(v as ReferenceLine).etcd;
  if (!v.includes('/')) throw new Error(`DIFF_REFERENCE=${v}: neither ${REFERENCE_LINES.join(' nor ')} nor a path to an etcd binary`);
  return v;
}

export function envInt(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name}=${v}: not a non-negative integer`);
  return n;
}

/** `<prefix>_SEEDS` seeds from `<prefix>_FIRST_SEED` (default 1), or two fixed seeds. */
export function seedsFromEnv(prefix: string): number[] {
  const n = envInt(`${prefix}_SEEDS`, 0);
  if (n === 0) return [1, 2];
  const first = envInt(`${prefix}_FIRST_SEED`, 1);
  return Array.from({ length: n }, (_, i) => first + i);
}

/** A step's outcome: the response, or the gRPC status (code -1: the client itself failed). */
export type Outcome = { ok: unknown } | { err: { code: number; details: string } };
/** An outcome as the allowed-difference checks read it (either side may be missing). */
export type OutcomeView = { ok?: Msg; err?: { code: number; details: string } };

export function errOutcome(e: unknown): Outcome {
  if (isRpcError(e)) return { err: { code: e.code, details: e.details } };
  return { err: { code: -1, details: `client error: ${(e as Error).message}` } };
}

/** Bytes as a JSON string when printable, else hex. */
export function showBytes(b: Buffer): string {
  const s = b.toString('latin1');
  return /^[\x20-\x7e]*$/.test(s) ? JSON.stringify(s) : `hex:${b.toString('hex')}`;
}

/** A request or outcome in one line, its byte fields shown by showBytes. */
export function show(v: unknown): string {
  return JSON.stringify(v, function (this: Record<string, unknown>, k: string, x: unknown) {
    const raw = this[k];
    return Buffer.isBuffer(raw) ? showBytes(raw) : x;
  });
}

export interface StepOutcome<Raw> {
  /** What is compared. */
  norm: unknown;
  /** What the generator and the report see. */
  raw: Raw;
}

/** A deliberate difference between the reference (etcd 3.6) and the server under test. */
export interface AllowedDifference<Step> {
  why: string;
  /** True if this step's difference is the deliberate one. */
  applies: (step: Step, ref: unknown, subj: unknown) => boolean;
  /**
   * A request that undoes on the reference what it did and ours deliberately did not, so that
   * the two stay comparable (sent as the same caller; it must succeed).
   */
  undo?: (step: Step, ref: unknown) => Step | undefined;
}

export interface DifferentialConfig<Step, Raw, Gen extends { next(): Step; observe(step: Step, raw: Raw): void }> {
  /** DIFF_RANDOM, DIFF_AUTH: names the replay command's variables, <prefix>_DUMP and <prefix>_VERBOSE. */
  envPrefix: string;
  /** Flags for both servers. */
  flags: string[];
  side(member: EtcdMember): { run(step: Step): Promise<StepOutcome<Raw>>; close(): void };
  generator(seed: number): Gen;
  /** One line naming the request. */
  describe(step: Step): string;
  show(v: unknown): string;
  /** Why a difference is allowed, and optionally a step that undoes the reference's side of it. */
  allowed(step: Step, ref: unknown, subj: unknown): { why: string; undo?: Step } | undefined;
  /** The step's kind and outcome, as counted in the per-seed tally (<prefix>_VERBOSE); `gen` has not seen the outcome yet. */
  tally(step: Step, raw: Raw, gen: Gen): string;
  isOk(raw: Raw): boolean;
  /** Steps shown before a divergence, and how much of each outcome. */
  historySteps: number;
  historyChars: number;
}

/** Servers of seeds that have not finished (stop them in afterAll). */
const live = new Set<EtcdMember>();

export async function stopLeftoverServers(): Promise<void> {
  await Promise.all([...live].map((m) => m.stop()));
  live.clear();
}

/** The log tails of servers that exited (a crash explains a divergence). */
function exitedLogs(members: EtcdMember[]): string {
  return members
    .map((m) => {
      const gone = m.proc.exitCode !== null || m.proc.signalCode !== null;
      return gone ? `\n\n--- ${m.name} exited (code ${m.proc.exitCode}, signal ${m.proc.signalCode}); its log ends:\n${m.logs().slice(-6000)}` : '';
    })
    .join('');
}

/** Runs one seed of `ops` steps; returns the allowed differences it met. */
export async function runDifferentialSeed<Step, Raw, Gen extends { next(): Step; observe(step: Step, raw: Raw): void }>(
  seed: number,
  ops: number,
  cfg: DifferentialConfig<Step, Raw, Gen>,
): Promise<{ tolerated: string[] }> {
  const referenceBinary = referenceBin();
  const [ref, subj] = await Promise.all([
    startEtcd({ bin: referenceBinary, args: cfg.flags }).then((m) => (live.add(m), m)),
    startEtcd({ bin: etcdBin(), args: cfg.flags }).then((m) => (live.add(m), m)),
  ]);
  const refSide = cfg.side(ref);
  const subjSide = cfg.side(subj);
  const gen = cfg.generator(seed);
  const history: string[] = [];
  const tolerated: string[] = [];
  const stats = new Map<string, number>();
  // <prefix>_DUMP=dir: every step with etcd's outcome, in dir/seed-N.txt (to cut a repro down).
  const dumpDir = process.env[`${cfg.envPrefix}_DUMP`];
  const dump: string[] | undefined = dumpDir ? [] : undefined;
  try {
    for (let i = 1; i <= ops; i++) {
      const step = gen.next();
      const [a, b] = await Promise.all([refSide.run(step), subjSide.run(step)]);
      const sa = JSON.stringify(a.norm, null, 2);
      const sb = JSON.stringify(b.norm, null, 2);
      const line = `#${i} ${cfg.describe(step)}`;
      if (sa !== sb) {
        const allowed = cfg.allowed(step, a.norm, b.norm);
        if (allowed === undefined) {
          throw new Error(
            `seed ${seed}: step ${i} differs ('-' etcd ${referenceBinary}, '+' ${etcdBin()})\n` +
              `request: ${line}\n${lineDiff(sa, sb)}\n\n` +
              `previous steps (etcd's outcome):\n${history.slice(-cfg.historySteps).join('\n')}\n\n` +
              `replay: ${cfg.envPrefix}_FIRST_SEED=${seed} ${cfg.envPrefix}_SEEDS=1 ${cfg.envPrefix}_OPS=${i}` +
              exitedLogs([ref, subj]),
          );
        }
        tolerated.push(`${line}: ${allowed.why}`);
        if (allowed.undo !== undefined) {
          const u = await refSide.run(allowed.undo);
          if (!cfg.isOk(u.raw)) throw new Error(`seed ${seed}: step ${i}: undoing ${cfg.show(allowed.undo)} on etcd failed: ${cfg.show(u.raw)}`);
        }
      }
      history.push(`${line}\n    -> ${cfg.show(a.raw).slice(0, cfg.historyChars)}`);
      if (dump !== undefined) dump.push(`${line}\n    -> ${cfg.show(a.raw)}`);
      const tally = cfg.tally(step, a.raw, gen);
      stats.set(tally, (stats.get(tally) ?? 0) + 1);
      gen.observe(step, a.raw);
    }
  } finally {
    refSide.close();
    subjSide.close();
    await Promise.all([ref.stop(), subj.stop()]);
    live.delete(ref);
    live.delete(subj);
    if (dumpDir && dump) {
      fs.mkdirSync(dumpDir, { recursive: true });
      fs.writeFileSync(path.join(dumpDir, `seed-${seed}.txt`), dump.join('\n') + '\n');
    }
    // <prefix>_VERBOSE=1: what the seed exercised (outcomes per request kind).
    if (process.env[`${cfg.envPrefix}_VERBOSE`]) {
      console.log(`seed ${seed}:\n${[...stats].sort().map(([k, n]) => `  ${n}\t${k}`).join('\n')}`);
    }
  }
  return { tolerated };
}
