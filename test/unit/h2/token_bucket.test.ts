// The token bucket behind the HTTP/2 connection's rate budgets (rapid reset, frames doing nothing).
import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../../src/h2/token_bucket';

describe('TokenBucket', () => {
  it('gives its burst at once, then nothing until it refills', () => {
    const b = new TokenBucket(3, 1, 0);
    expect([b.take(0), b.take(0), b.take(0), b.take(0)]).toEqual([true, true, true, false]);
    // One token a second: none at 999 ms, one at 1000 ms.
    expect(b.take(999)).toBe(false);
    expect(b.take(1000)).toBe(true);
    expect(b.take(1000)).toBe(false);
  });

  it('refills at its rate, fractions included, and never past its burst', () => {
    const b = new TokenBucket(10, 4, 0);
    for (let i = 0; i < 10; i++) expect(b.take(0)).toBe(true);
    // 4 a second: 2 tokens after 500 ms (taken as 250 + 250).
    expect(b.take(250)).toBe(true);
    expect(b.take(500)).toBe(true);
    expect(b.take(500)).toBe(false);
    // A long idle time fills it to its burst, no more.
    let taken = 0;
    while (b.take(1_000_000)) taken++;
    expect(taken).toBe(10);
  });

  it('ignores a clock going back', () => {
    const b = new TokenBucket(1, 1, 1000);
    expect(b.take(1000)).toBe(true);
    expect(b.take(500)).toBe(false);
    expect(b.take(2000)).toBe(true);
  });

  it('refuses a bucket that could never give a token', () => {
    expect(() => new TokenBucket(0, 1, 0)).toThrow(RangeError);
    expect(() => new TokenBucket(1, -1, 0)).toThrow(RangeError);
  });
});
