// Failpoints as etcd's failpoint builds have them (gofail): GOFAIL_FAILPOINTS="name=term;name=term"
// arms named points in the server, so a test can crash a member at an exact step of a protocol
// (say, between saving a leader's snapshot in the WAL and installing its database) instead of
// hoping a kill -9 lands there. The names are etcd's where etcd has the same point.
//
// Terms: `panic` (the process dies on the spot: SIGKILL to itself, so nothing is flushed, as a
// crash), `sleep(MS)` (waits MS milliseconds), `off`. A count prefix `N*term` acts N times, then off.
import fs from 'node:fs';

export type FailpointName =
  /** A leader's snapshot database is saved in the snap directory; the WAL does not record the snapshot yet. */
  | 'raftBeforeSaveSnap'
  /** The WAL recorded (and fsynced) the leader's snapshot; the backend is not replaced yet. */
  | 'raftAfterSaveSnap'
  /** Before a Ready's entries and hard state are written to the WAL. */
  | 'raftBeforeSave'
  /** After a Ready's entries and hard state are in the WAL (fsynced when they must be). */
  | 'raftAfterSave';

const NAMES: ReadonlySet<string> = new Set<FailpointName>(['raftBeforeSaveSnap', 'raftAfterSaveSnap', 'raftBeforeSave', 'raftAfterSave']);
/** A sleep term longer than this is a typo, not a test. */
const MAX_SLEEP_MS = 600_000;

interface Armed {
  action: { kind: 'panic' } | { kind: 'sleep'; ms: number };
  /** Times left to act; Infinity without a count prefix. */
  left: number;
}

const armed = new Map<FailpointName, Armed>();

/** Whether any failpoint is armed (callers skip the await on the hot path otherwise). */
export let failpointsArmed = false;

/** Arms the points in `spec` (GOFAIL_FAILPOINTS' syntax); throws on a name or term it does not know. */
export function armFailpoints(spec: string | undefined): void {
  armed.clear();
  failpointsArmed = false;
  if (spec === undefined || spec.trim() === '') return;
  for (const part of spec.split(';')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const name = (eq < 0 ? part : part.slice(0, eq)).trim();
    const term = eq < 0 ? '' : part.slice(eq + 1).trim();
    if (!NAMES.has(name)) throw new Error(`failpoint: unknown failpoint "${name}" in GOFAIL_FAILPOINTS (known: ${[...NAMES].join(', ')})`);
    const m = /^(?:(\d+)\*)?(panic|off|sleep\((\d+)\))$/.exec(term);
    if (!m) throw new Error(`failpoint: bad term "${term}" for ${name} in GOFAIL_FAILPOINTS (panic, sleep(MS), off, with an optional N* prefix)`);
    if (m[2] === 'off') continue;
    const left = m[1] === undefined ? Infinity : Number(m[1]);
    if (m[3] !== undefined) {
      const ms = Number(m[3]);
      if (ms > MAX_SLEEP_MS) throw new Error(`failpoint: sleep of ${ms} ms for ${name} is over ${MAX_SLEEP_MS} ms`);
      armed.set(name as FailpointName, { action: { kind: 'sleep', ms }, left });
    } else {
      armed.set(name as FailpointName, { action: { kind: 'panic' }, left });
    }
  }
  failpointsArmed = armed.size > 0;
}

/** Acts on `name` if it is armed. */
export async function failpoint(name: FailpointName): Promise<void> {
  const a = armed.get(name);
  if (a === undefined || a.left <= 0) return;
  a.left--;
  if (a.action.kind === 'sleep') {
    await new Promise((r) => setTimeout(r, (a.action as { ms: number }).ms));
    return;
  }
  // Written synchronously: the process does not get another turn.
  fs.writeSync(2, `panic: failpoint panic: ${name}\n`);
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL is not delivered synchronously everywhere: never run past the point.
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
}
