import { describe, expect, it } from 'vitest';
import { AppliedWaiter, WaitRegistry } from '../../../src/server/wait';

const timeoutError = (): Error => new Error('request timed out');

/** Settles to 'pending' if p has not settled within ms. */
async function stateAfter<T>(p: Promise<T>, ms: number): Promise<{ state: 'resolved'; value: T } | { state: 'rejected'; error: Error } | { state: 'pending' }> {
  return Promise.race([
    p.then(
      (value) => ({ state: 'resolved' as const, value }),
      (error: Error) => ({ state: 'rejected' as const, error }),
    ),
    new Promise<{ state: 'pending' }>((resolve) => setTimeout(() => resolve({ state: 'pending' }), ms)),
  ]);
}

describe('WaitRegistry', () => {
  it('resolves a wait when its result arrives, and no timeout fires for it afterwards', async () => {
    const reg = new WaitRegistry<string, number>(10, 40);
    const w = reg.register('a', timeoutError);
    expect(w).not.toBeNull();
    expect(reg.trigger('a', 7)).toBe(true);
    expect(await w).toBe(7);
    expect(reg.size).toBe(0);
    expect(reg.trigger('a', 8)).toBe(false);
  });

  it('fails a wait with the timeout error once the timeout has passed, not before', async () => {
    const reg = new WaitRegistry<string, number>(10, 60);
    const t0 = performance.now();
    const w = reg.register('a', timeoutError) as Promise<number>;
    expect((await stateAfter(w, 20)).state).toBe('pending');
    const r = await stateAfter(w, 2000);
    expect(r.state).toBe('rejected');
    expect(r.state === 'rejected' && r.error.message).toBe('request timed out');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(59);
    expect(reg.has('a')).toBe(false);
  });

  it('times out each wait a full timeout after its own registration, in order', async () => {
    const reg = new WaitRegistry<string, number>(10, 80);
    const failedAt = new Map<string, number>();
    const t0 = performance.now();
    const first = (reg.register('first', timeoutError) as Promise<number>).catch(() => failedAt.set('first', performance.now() - t0));
    await new Promise((r) => setTimeout(r, 40));
    const second = (reg.register('second', timeoutError) as Promise<number>).catch(() => failedAt.set('second', performance.now() - t0));
    // The first one's timer must not take the second one with it.
    await first;
    expect(reg.has('second')).toBe(true);
    await second;
    expect(failedAt.get('first')).toBeGreaterThanOrEqual(79);
    expect(failedAt.get('second')).toBeGreaterThanOrEqual(119);
  });

  it('gives a wait registered after the registry emptied its full timeout (the earlier timer lapses)', async () => {
    const reg = new WaitRegistry<string, number>(10, 80);
    const a = reg.register('a', timeoutError) as Promise<number>;
    reg.trigger('a', 1);
    expect(await a).toBe(1);
    await new Promise((r) => setTimeout(r, 50));
    const t0 = performance.now();
    const b = reg.register('b', timeoutError) as Promise<number>;
    // The timer armed for 'a' fires ~30 ms from here: 'b' must outlive it.
    expect((await stateAfter(b, 60)).state).toBe('pending');
    const r = await stateAfter(b, 2000);
    expect(r.state).toBe('rejected');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(79);
  });

  it('keeps timing out the others when the oldest wait is answered', async () => {
    const reg = new WaitRegistry<number, string>(10, 50);
    const waits = [0, 1, 2].map((i) => reg.register(i, timeoutError) as Promise<string>);
    reg.trigger(0, 'done');
    expect(await waits[0]).toBe('done');
    const rest = await Promise.all(waits.slice(1).map((w) => stateAfter(w, 2000)));
    expect(rest.map((r) => r.state)).toEqual(['rejected', 'rejected']);
  });

  it('refuses waits beyond its bound, and a duplicate ID', () => {
    const reg = new WaitRegistry<number, number>(2, 1000);
    const a = reg.register(1, timeoutError);
    const b = reg.register(2, timeoutError);
    expect(reg.register(3, timeoutError)).toBeNull();
    reg.trigger(1, 0);
    expect(() => reg.register(2, timeoutError)).toThrow(/duplicate wait id/);
    reg.failAll(new Error('stopped'));
    return Promise.all([a, expect(b).rejects.toThrow('stopped')]);
  });

  it('fails every wait on failAll and leaves nothing pending', async () => {
    const reg = new WaitRegistry<number, number>(10, 1000);
    const ws = [1, 2, 3].map((i) => reg.register(i, timeoutError) as Promise<number>);
    reg.fail(2, new Error('dropped'));
    reg.failAll(new Error('stopped'));
    const errors = await Promise.all(ws.map((w) => w.then(() => '', (e: Error) => e.message)));
    expect(errors).toEqual(['stopped', 'dropped', 'stopped']);
    expect(reg.size).toBe(0);
  });
});

describe('AppliedWaiter', () => {
  it('releases waiters once the applied index reaches theirs', async () => {
    const aw = new AppliedWaiter(10);
    const at5 = aw.wait(5, 3) as Promise<void>;
    const at4 = aw.wait(4, 3) as Promise<void>;
    aw.appliedTo(4);
    expect((await stateAfter(at4, 1000)).state).toBe('resolved');
    expect((await stateAfter(at5, 20)).state).toBe('pending');
    aw.appliedTo(5);
    expect((await stateAfter(at5, 1000)).state).toBe('resolved');
  });
});
