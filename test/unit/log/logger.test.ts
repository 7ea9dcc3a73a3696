// Timestamps are printed in local time, as Go does; pin the zone for exact expectations.
process.env.TZ = 'UTC';

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { memorySink } from '../../helpers/log_sink';
import { testTempDir } from '../../helpers/temp_dir';
import {
  createLogger,
  formatGoDuration,
  formatGoDurationMs,
  formatLogTime,
  hexId,
  parseLogLevel,
} from '../../../src/log';

// 2026-11-30T01:02:03.456789Z
const FIXED_MS = Date.UTC(2026, 10, 30, 1, 2, 3, 456) + 0.789;

describe('logger output shape', () => {
  it('writes zap-shaped JSON lines: level, ts, msg, then fields in order', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink], nowMs: () => FIXED_MS });
    lg.info('starting an etcd server', { 'etcd-version': '3.6.14', 'max-txn-ops': 128, 'is-leader': false });
    lg.flush();
    const raw = sink.text();
    expect(raw).toBe(
      '{"level":"info","ts":"2026-11-30T01:02:03.456789Z","msg":"starting an etcd server",' +
        '"etcd-version":"3.6.14","max-txn-ops":128,"is-leader":false}\n',
    );
  });

  it('encodes errors as their message, bigints as numbers, arrays and nested objects', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink], nowMs: () => FIXED_MS });
    lg.warn('failed to verify flags', {
      error: new Error('bad flag'),
      term: 18446744073709551615n,
      urls: ['http://a:1', 'http://b:2'],
      nested: { x: null, y: NaN },
      id: hexId(0x8e9e05c52164694dn),
    });
    lg.flush();
    const [e] = sink.lines();
    expect(e.level).toBe('warn');
    expect(e.error).toBe('bad flag');
    expect(sink.text()).toContain('"term":18446744073709551615');
    expect(e.urls).toEqual(['http://a:1', 'http://b:2']);
    expect(e.nested).toEqual({ x: null, y: 'NaN' });
    expect(e.id).toBe('8e9e05c52164694d');
  });

  it('filters by level and child loggers carry context fields before entry fields', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink], level: 'warn', nowMs: () => FIXED_MS });
    lg.info('hidden');
    lg.debug('hidden');
    const c = lg.child({ 'local-member-id': hexId(1n) });
    expect(c.enabled('info')).toBe(false);
    expect(c.enabled('error')).toBe(true);
    c.error('shown', { k: 'v' });
    lg.flush();
    expect(sink.text()).toBe(
      '{"level":"error","ts":"2026-11-30T01:02:03.456789Z","msg":"shown","local-member-id":"1","k":"v"}\n',
    );
  });

  it('flushes on its own on the next event-loop turn', async () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink] });
    lg.info('later');
    expect(sink.text()).toBe('');
    const deadline = Date.now() + 2000;
    while (sink.text() === '' && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    expect(sink.lines()[0].msg).toBe('later');
  });

  it('samples repeated messages like zap (100 per second, then every 100th)', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink], nowMs: () => FIXED_MS });
    for (let i = 0; i < 350; i++) lg.info('same');
    lg.info('other');
    lg.flush();
    const msgs = sink.lines().map((l) => l.msg);
    expect(msgs.filter((m) => m === 'same').length).toBe(102);
    expect(msgs).toContain('other');
  });

  it('bounds its buffer and reports dropped entries', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink], sampling: false, maxBufferedBytes: 1000, nowMs: () => FIXED_MS });
    for (let i = 0; i < 100; i++) lg.info('entry', { i });
    lg.flush();
    const lines = sink.lines();
    expect(lines.length).toBeLessThan(100);
    const last = lines[lines.length - 1];
    expect(last.level).toBe('warn');
    expect(Number(last.dropped)).toBe(100 - (lines.length - 1));
  });

  it('console format is tab separated', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink], format: 'console', nowMs: () => FIXED_MS });
    lg.info('hello', { a: 1 });
    lg.info('plain');
    lg.flush();
    expect(sink.text()).toBe(
      '2026-11-30T01:02:03.456789Z\tinfo\thello\t{"a":1}\n2026-11-30T01:02:03.456789Z\tinfo\tplain\n',
    );
  });

  it('adds a caller when asked', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink], caller: true });
    lg.info('where');
    lg.flush();
    expect(String(sink.lines()[0].caller)).toMatch(/^log\/logger\.test\.ts:\d+$/);
  });

  it('panic logs then throws', () => {
    const sink = memorySink();
    const lg = createLogger({ sinks: [sink] });
    expect(() => lg.panic('boom')).toThrow('boom');
    expect(sink.lines()[0].level).toBe('panic');
  });

  it('writes to a file output (append)', () => {
    const dir = testTempDir('etcd-log-');
    const file = path.join(dir, 'etcd.log');
    fs.writeFileSync(file, 'existing\n');
    const lg = createLogger({ outputs: [file, file] });
    lg.info('to file');
    lg.flush();
    const content = fs.readFileSync(file, 'utf8').split('\n');
    expect(content[0]).toBe('existing');
    expect(JSON.parse(content[1]).msg).toBe('to file');
    expect(content.length).toBe(3); // duplicate outputs are merged, as zap does
  });

  it('/dev/null discards everything', () => {
    const lg = createLogger({ outputs: ['stderr', '/dev/null'] });
    lg.info('nothing');
    lg.flush();
  });
});

describe('value formats', () => {
  it('Go durations', () => {
    expect(formatGoDuration(0n)).toBe('0s');
    expect(formatGoDuration(1n)).toBe('1ns');
    expect(formatGoDuration(1500n)).toBe('1.5µs');
    expect(formatGoDuration(1_500_000n)).toBe('1.5ms');
    expect(formatGoDuration(100_000_000n)).toBe('100ms');
    expect(formatGoDuration(5_000_000_000n)).toBe('5s');
    expect(formatGoDuration(90_000_000_000n)).toBe('1m30s');
    expect(formatGoDuration(600_000_000_000n)).toBe('10m0s');
    expect(formatGoDuration(7_200_000_000_000n)).toBe('2h0m0s');
    expect(formatGoDuration(-1_500_000_000n)).toBe('-1.5s');
    expect(formatGoDurationMs(2.5)).toBe('2.5ms');
  });

  it('hex IDs as etcd prints types.ID', () => {
    expect(hexId(0x8e9e05c52164694dn)).toBe('8e9e05c52164694d');
    expect(hexId(0xabn)).toBe('ab');
    expect(hexId(-1n)).toBe('ffffffffffffffff');
  });

  it('timestamps with microseconds', () => {
    expect(formatLogTime(FIXED_MS)).toBe('2026-11-30T01:02:03.456789Z');
  });

  it('levels as zap parses them', () => {
    expect(parseLogLevel('debug')).toBe('debug');
    expect(parseLogLevel('WARN')).toBe('warn');
    expect(parseLogLevel('')).toBe('info');
    expect(parseLogLevel('Warn')).toBeUndefined();
    expect(parseLogLevel('verbose')).toBeUndefined();
  });
});

describe('timestamp edges', () => {
  it('never rounds into the next second', () => {
    expect(formatLogTime(Date.UTC(2026, 10, 30, 1, 2, 3, 999) + 0.999)).toBe('2026-11-30T01:02:03.999999Z');
    expect(formatLogTime(Date.UTC(2026, 10, 30, 1, 2, 4, 0))).toBe('2026-11-30T01:02:04.000000Z');
    expect(formatLogTime(Date.UTC(2026, 10, 30, 1, 2, 3, 0) + 0.001)).toBe('2026-11-30T01:02:03.000001Z');
  });
});
