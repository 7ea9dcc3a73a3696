// Deterministic PRNG (mulberry32) for tests: a failure can be replayed from its seed, and no test
// depends on Math.random.
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Seeded choices for the randomized tests' generators (the same draws as mulberry32(seed) in order). */
export class SeededChoices {
  private readonly r: () => number;

  constructor(seed: number) {
    this.r = mulberry32(seed);
  }

  /** A number in [0, 1). */
  next(): number {
    return this.r();
  }
  chance(p: number): boolean {
    return this.r() < p;
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.r() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)]!;
  }
  /** One of `choices`, each as likely as its weight. */
  weighted<T>(choices: ReadonlyArray<readonly [number, T]>): T {
    const total = choices.reduce((s, [w]) => s + w, 0);
    let x = this.r() * total;
    for (const [w, c] of choices) {
      x -= w;
      if (x < 0) return c;
    }
    return choices[choices.length - 1]![1];
  }
}
