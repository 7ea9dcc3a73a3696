// The warm-up runs the write path on a scratch store of its own while the member serves: it must
// leave nothing behind, let requests through between its steps, stop when the member stops, and a
// failure must cost only the warm-up, never the member.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log';
import { warmUpWritePath, WARM_UP_DEFAULTS } from '../../../src/server/warmup';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function capturingLogger(): { log: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const sink = { write: (s: string) => void lines.push(s), writeSync: (s: string) => void lines.push(s) };
  return { log: createLogger({ sinks: [sink], level: 'debug', sampling: false }), lines };
}

describe('warm-up of the write path', () => {
  it('applies its puts on a scratch store and removes it', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'warmup-test-'));
    dirs.push(tmp);
    const { log, lines } = capturingLogger();
    const r = await warmUpWritePath({ tmpDir: tmp, ...WARM_UP_DEFAULTS, log });
    expect(r).not.toBeNull();
    expect(r!.puts).toBe(WARM_UP_DEFAULTS.txns * (WARM_UP_DEFAULTS.putsPerTxn + 1));
    expect(fs.readdirSync(tmp)).toEqual([]);
    log.flush();
    expect(lines.filter((l) => l.includes('"level":"warn"'))).toEqual([]);
  });

  it('a directory it cannot write costs the warm-up only, with a warning', async () => {
    const { log, lines } = capturingLogger();
    const r = await warmUpWritePath({ tmpDir: '/nonexistent/warm-up-dir', ...WARM_UP_DEFAULTS, log });
    expect(r).toBeNull();
    log.flush();
    expect(lines.some((l) => l.includes('skipped the warm-up of the write path') && l.includes('ENOENT'))).toBe(true);
  });

  it('lets the event loop run between its steps', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'warmup-test-'));
    dirs.push(tmp);
    const { log } = capturingLogger();
    let turns = 0;
    let warming = true;
    // What a client's request needs to be served: turns of the event loop while the warm-up runs.
    const count = (): void => {
      turns++;
      if (warming) setImmediate(count);
    };
    setImmediate(count);
    const r = await warmUpWritePath({ tmpDir: tmp, ...WARM_UP_DEFAULTS, log });
    warming = false;
    expect(r).not.toBeNull();
    expect(turns).toBeGreaterThanOrEqual(WARM_UP_DEFAULTS.txns);
  });

  it('stops between steps when told, and removes its store without a warning', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'warmup-test-'));
    dirs.push(tmp);
    const { log, lines } = capturingLogger();
    const stop = new AbortController();
    const running = warmUpWritePath({ tmpDir: tmp, ...WARM_UP_DEFAULTS, log, signal: stop.signal });
    // Let it make its store and take a step or two, then stop it as a shutdown does.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    stop.abort();
    expect(await running).toBeNull();
    expect(fs.readdirSync(tmp)).toEqual([]);
    log.flush();
    expect(lines.filter((l) => l.includes('"level":"warn"'))).toEqual([]);
  });

  it('holds the warm-up to its bound', async () => {
    const { log } = capturingLogger();
    await expect(warmUpWritePath({ tmpDir: os.tmpdir(), txns: 1000, putsPerTxn: 100, valueBytes: 8, log })).rejects.toThrow(/out of bounds/);
  });
});

describe('warm-up scratch directories', () => {
  it('removes the scratch store of a process that is gone and leaves a live one alone', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'warmup-test-'));
    dirs.push(tmp);
    // A pid above the kernel's limit is never alive; our parent's is.
    const gone = path.join(tmp, 'etcd-ts-warm-up-4194305-abc123');
    const live = path.join(tmp, `etcd-ts-warm-up-${process.ppid}-def456`);
    const other = path.join(tmp, 'unrelated-4194305');
    for (const d of [gone, live, other]) {
      fs.mkdirSync(d);
      fs.writeFileSync(path.join(d, 'db'), 'x');
    }
    const { log } = capturingLogger();
    expect(await warmUpWritePath({ tmpDir: tmp, ...WARM_UP_DEFAULTS, log })).not.toBeNull();
    expect(fs.readdirSync(tmp).sort()).toEqual([path.basename(live), path.basename(other)].sort());
  });
});
