// A token bucket, as nghttp2's rate limiters (nghttp2_ratelim): `burst` tokens to start with and at
// most, `refillPerSec` more each second. Budgets on what a peer can make us do (streams it resets,
// frames that do nothing) take one token per event; an empty bucket means the peer is over budget.

export class TokenBucket {
  private tokens: number;
  private lastMs: number;

  /** `nowMs`: the clock's reading at creation (performance.now() in the connection). */
  constructor(
    private readonly burst: number,
    private readonly refillPerSec: number,
    nowMs: number,
  ) {
    if (!(burst >= 1 && refillPerSec >= 0)) throw new RangeError(`bad token bucket (burst ${burst}, refill ${refillPerSec}/s)`);
    this.tokens = burst;
    this.lastMs = nowMs;
  }

  /** Takes one token at `nowMs`; false (and nothing taken) when none is left. */
  take(nowMs: number): boolean {
    if (nowMs > this.lastMs) {
      this.tokens = Math.min(this.burst, this.tokens + ((nowMs - this.lastMs) * this.refillPerSec) / 1000);
      this.lastMs = nowMs;
    }
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
