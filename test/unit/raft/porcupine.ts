// A linearizability checker for a single-register-per-key KV history: the Wing–Gong search with
// Porcupine's memoization of (set of linearized ops, model state). Keys are independent registers, so the
// history is partitioned by key and each part searched alone (P-compositionality), which keeps the
// search small.
import assert from 'node:assert';

export type KvInput =
  | { kind: 'put'; key: string; value: string }
  | { kind: 'get'; key: string }
  | { kind: 'cas'; key: string; expected: string | null; value: string };

/** What the client saw; `unknown` for an op that timed out or whose member crashed before answering. */
export type KvOutput = { kind: 'value'; value: string | null } | { kind: 'ok'; ok: boolean } | { kind: 'unknown' };

export interface KvOp {
  clientId: number;
  input: KvInput;
  output: KvOutput;
  /** Logical times from one global counter, so real-time order is exact. */
  callAt: number;
  /** Infinity for an unknown outcome: it may take effect at any point after its call, or never. */
  returnAt: number;
}

export type CheckResult = { ok: true } | { ok: false; key: string; reason: string };

/** One register's transition: null when the observed output is impossible from `state`. */
function step(state: string | null, input: KvInput, output: KvOutput): { next: string | null } | null {
  switch (input.kind) {
    case 'put':
      return { next: input.value };
    case 'get':
      if (output.kind === 'unknown') return { next: state };
      assert(output.kind === 'value');
      return output.value === state ? { next: state } : null;
    case 'cas': {
      const applies = state === input.expected;
      // An unknown CAS behaves as the register dictates wherever it is placed; "never happened" is
      // placing it after every other op, which the search also explores.
      if (output.kind === 'unknown') return { next: applies ? input.value : state };
      assert(output.kind === 'ok');
      if (output.ok !== applies) return null;
      return { next: applies ? input.value : state };
    }
  }
}

interface Event {
  op: number; // index into the key's op list
  isCall: boolean;
  at: number;
  match: Event | null; // a call's return event
  prev: Event | null;
  next: Event | null;
}

/**
 * Searches for a linearization of one key's ops, starting from an absent key. Returns true, false,
 * or 'budget' when more than `maxSteps` search steps were needed.
 */
export function checkKey(ops: KvOp[], maxSteps: number): boolean | 'budget' {
  if (ops.length === 0) return true;
  const events: Event[] = [];
  ops.forEach((o, i) => {
    assert(o.returnAt > o.callAt, 'an op returns after its call');
    const ret: Event = { op: i, isCall: false, at: o.returnAt, match: null, prev: null, next: null };
    const call: Event = { op: i, isCall: true, at: o.callAt, match: ret, prev: null, next: null };
    events.push(call, ret);
  });
  // Times are unique per completed event; infinite returns tie and sort by op index, after all calls.
  events.sort((a, b) => a.at - b.at || (a.isCall === b.isCall ? a.op - b.op : a.isCall ? -1 : 1));
  const head: Event = { op: -1, isCall: false, at: -Infinity, match: null, prev: null, next: null };
  let prev = head;
  for (const e of events) {
    prev.next = e;
    e.prev = prev;
    prev = e;
  }

  // Removing a linearized op's call and return from the list, and putting them back on backtrack.
  const lift = (call: Event): void => {
    call.prev!.next = call.next;
    if (call.next) call.next.prev = call.prev;
    const ret = call.match!;
    ret.prev!.next = ret.next;
    if (ret.next) ret.next.prev = ret.prev;
  };
  const unlift = (call: Event): void => {
    const ret = call.match!;
    ret.prev!.next = ret;
    if (ret.next) ret.next.prev = ret;
    call.prev!.next = call;
    if (call.next) call.next.prev = call;
  };

  const seen = new Set<string>();
  const stack: { call: Event; state: string | null }[] = [];
  let linearized = 0n;
  let state: string | null = null;
  let entry: Event | null = head.next;
  for (let steps = 0; head.next !== null; steps++) {
    if (steps > maxSteps) return 'budget';
    assert(entry !== null, 'the list always ends with a return event while ops remain');
    if (entry.isCall) {
      const o = ops[entry.op]!;
      const r = step(state, o.input, o.output);
      if (r) {
        const nextLin = linearized | (1n << BigInt(entry.op));
        const memo = `${nextLin.toString(36)}|${r.next === null ? '\u0000' : r.next}`;
        if (!seen.has(memo)) {
          seen.add(memo);
          stack.push({ call: entry, state });
          state = r.next;
          linearized = nextLin;
          lift(entry);
          entry = head.next;
          continue;
        }
      }
      entry = entry.next;
    } else {
      // An op returned before any placement of the pending ones worked: backtrack.
      const top = stack.pop();
      if (!top) return false;
      state = top.state;
      linearized &= ~(1n << BigInt(top.call.op));
      unlift(top.call);
      entry = top.call.next;
    }
  }
  return true;
}

/** Checks a whole history, key by key. */
export function checkHistory(ops: KvOp[], maxStepsPerKey = 2_000_000): CheckResult {
  const byKey = new Map<string, KvOp[]>();
  for (const o of ops) {
    // A read that never answered constrains nothing.
    if (o.input.kind === 'get' && o.output.kind === 'unknown') continue;
    const list = byKey.get(o.input.key) ?? [];
    list.push(o);
    byKey.set(o.input.key, list);
  }
  for (const [key, list] of byKey) {
    const r = checkKey(list, maxStepsPerKey);
    if (r === 'budget') return { ok: false, key, reason: `search budget of ${maxStepsPerKey} steps exceeded (${list.length} ops)` };
    if (!r) return { ok: false, key, reason: `no linearization of ${list.length} ops` };
  }
  return { ok: true };
}
