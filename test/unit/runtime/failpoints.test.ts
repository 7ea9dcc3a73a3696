import { afterEach, describe, expect, it } from 'vitest';
import { armFailpoints, failpoint, failpointsArmed } from '../../../src/runtime/failpoints';

afterEach(() => armFailpoints(undefined));

describe('GOFAIL_FAILPOINTS', () => {
  it('arms nothing when unset, empty, or all off', () => {
    for (const spec of [undefined, '', '  ', 'raftAfterSave=off', 'raftAfterSave=off;raftBeforeSave=off']) {
      armFailpoints(spec);
      expect(failpointsArmed, String(spec)).toBe(false);
    }
  });

  it('refuses names and terms it does not know, naming them', () => {
    expect(() => armFailpoints('raftAfterSave=panik')).toThrow('bad term "panik" for raftAfterSave');
    expect(() => armFailpoints('noSuchPoint=panic')).toThrow('unknown failpoint "noSuchPoint"');
    expect(() => armFailpoints('raftAfterSave')).toThrow('bad term ""');
    expect(() => armFailpoints('raftAfterSave=sleep(99999999)')).toThrow('over 600000 ms');
  });

  it('sleeps as many times as the count says, then is off', async () => {
    armFailpoints('raftBeforeSave=2*sleep(30)');
    expect(failpointsArmed).toBe(true);
    const took: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      await failpoint('raftBeforeSave');
      took.push(performance.now() - t0);
    }
    expect(took[0]).toBeGreaterThanOrEqual(25);
    expect(took[1]).toBeGreaterThanOrEqual(25);
    expect(took[2]).toBeLessThan(25);
    // Other points stay inert.
    const t0 = performance.now();
    await failpoint('raftAfterSave');
    expect(performance.now() - t0).toBeLessThan(25);
  });
});
