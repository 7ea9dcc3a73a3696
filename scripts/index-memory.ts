// Bytes per key and put/get cost of the in-memory key index (src/mvcc/tree_index.ts).
//
// Usage (after `npx tsc -p tsconfig.json`):
//   node --expose-gc dist/scripts/index-memory.js [--keys=100000,1000000] [--revs-per-key=1]
// Keys are ~10 bytes ("k" + 9 digits) inserted in a scrambled order, one revision each unless
// --revs-per-key says more. Bytes per key = heap growth after a full GC / keys.
import assert from 'node:assert';
import { TreeIndex } from '../src/mvcc/tree_index';

interface IndexLike {
  put(key: string, main: number, sub: number): void;
  get(key: string, atRev: number): unknown;
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  assert(g, 'run node with --expose-gc');
  g();
  g();
}

function keyOf(i: number): string {
  return `k${i.toString().padStart(9, '0')}`;
}

function measure(n: number, revsPerKey: number, make: () => IndexLike): void {
  // Keys built up front so their strings count separately from the index's own structure.
  let stride = 2_654_435_761 % n || 1;
  const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);
  while (gcd(stride, n) !== 1) stride++;
  const order = new Array<string>(n);
  for (let i = 0; i < n; i++) order[i] = keyOf(Number((BigInt(i) * BigInt(stride)) % BigInt(n)));
  gc();
  const before = process.memoryUsage().heapUsed;
  const idx = make();
  let rev = 1;
  const t0 = process.hrtime.bigint();
  for (let r = 0; r < revsPerKey; r++) for (let i = 0; i < n; i++) idx.put(order[i], ++rev, 0);
  const putNs = Number(process.hrtime.bigint() - t0);
  gc();
  const indexBytes = process.memoryUsage().heapUsed - before;
  const t1 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) idx.get(order[i], rev);
  const getNs = Number(process.hrtime.bigint() - t1);
  // The key strings: the index shares the caller's strings, so count them as part of its cost.
  // A one-byte string: 16 bytes of header on Node (no pointer compression), 8-byte aligned.
  const keyBytes = n * (16 + Math.ceil(order[0].length / 8) * 8);
  process.stdout.write(
    `keys=${n} revs/key=${revsPerKey}: index structure ${(indexBytes / n).toFixed(1)} B/key (+ ~${(keyBytes / n).toFixed(0)} B/key key strings), ` +
      `put ${(putNs / (n * revsPerKey)).toFixed(0)} ns, get ${(getNs / n).toFixed(0)} ns\n`,
  );
  assert(idx.get(order[0], rev) !== null);
}

function main(): void {
  let sizes = [100_000, 1_000_000];
  let revsPerKey = 1;
  for (const a of process.argv.slice(2)) {
    const [k, v = ''] = a.split('=');
    if (k === '--keys') sizes = v.split(',').map(Number);
    else if (k === '--revs-per-key') revsPerKey = Number(v);
    else throw new Error(`unknown option ${a}`);
  }
  for (const n of sizes) measure(n, revsPerKey, () => new TreeIndex());
}

main();
