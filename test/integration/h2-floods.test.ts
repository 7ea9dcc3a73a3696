// One client must not take a member down (issue 51): floods on one HTTP/2 connection, from nothing
// but a TCP socket, against a running member.
// - SETTINGS (client port) and PING (peer port: the client port's keepalive policy already sends a
//   PING flood away) from a client that never reads: each got an ACK queued, and the member kept
//   them all (~500 MB resident from one connection, honest clients timing out meanwhile).
// - Rapid reset (CVE-2023-44487): streams opened and reset at once, 500k of them.
// - Empty DATA frames, 20M of them.
// Each flooding connection now gets GOAWAY ENHANCE_YOUR_CALM and is closed; the member stays up
// within a resident-size bound, and an honest gRPC client on another connection keeps getting its
// Range answers meanwhile, every one within its deadline.
import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, FrameType, PREFACE, frame, u32Frame } from '../../src/h2/frames';
import { encodeHeaders } from '../../src/h2/hpack';
import { startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc } from '../helpers/grpc';
import { sampleValue, scrapeMetrics } from '../helpers/prom';
import { childPids } from '../helpers/proxy';
import { waitFor } from '../helpers/wait';

/** How long one flooding connection may last before the test gives up on its cut-off. */
const CLOSE_TIMEOUT_MS = 30_000;
/**
 * How often a client that never reads asks the member's metrics whether it was cut off, to read at
 * last and see the GOAWAY (the member drops a socket that takes none of its bytes for 1 s after
 * its GOAWAY). Stalled writes tell nothing: loopback TCP stalls a sender for a while by itself.
 */
const CUT_OFF_POLL_MS = 50;
/** Floods reconnect after each cut-off for this long, as an attacker would. */
const READING_ATTACK_MS = 2_000;
/** Each honest Range's deadline: one that fails fails the test. */
const HONEST_DEADLINE_MS = 2_000;
/** Honest Ranges kept in flight at once. */
const HONEST_CONCURRENCY = 4;
/** The member's peak resident size (VmHWM) through all the floods: it idles at ~100-140 MiB. */
const MAX_PEAK_RSS_BYTES = 256 * 1024 * 1024;

const METRIC = 'etcdts_http2_connections_cut_off_total';

let m: EtcdMember | undefined;
beforeAll(async () => {
  m = await startEtcd();
}, 60_000);
afterAll(async () => {
  await m?.stop();
});

function member(): EtcdMember {
  if (m === undefined) throw new Error('member not started');
  return m;
}

const clientPort = (): number => Number(member().clientHostPort.split(':')[1]);
const peerPort = (): number => Number(new URL(member().peerUrl).port);

/** The member's peak resident size so far (VmHWM of the node process, under the helper's `timeout`). */
function peakRssBytes(): number {
  const pid = childPids(member().proc.pid!).find((p) => fs.readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'node');
  if (pid === undefined) throw new Error('no node process under the member');
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmHWM:\s+(\d+) kB$/m.exec(status);
  if (kb === null) throw new Error('no VmHWM in /proc/<pid>/status');
  return Number(kb[1]) * 1024;
}

async function cutOffs(listener: 'client' | 'peer', reason: string): Promise<number> {
  return sampleValue(await scrapeMetrics(member().clientUrl), METRIC, { listener, reason }) ?? 0;
}

interface Answer {
  startMs: number;
  endMs: number;
}

/** Ranges on a connection of its own, HONEST_CONCURRENCY at a time, until stopped. */
function honestClient(): { answeredBetween(fromMs: number, toMs: number): number; stop(): Promise<{ answers: Answer[]; errors: string[] }> } {
  const client = new EtcdGrpc(member().clientHostPort);
  const answers: Answer[] = [];
  const errors: string[] = [];
  let stopped = false;
  const loop = async (): Promise<void> => {
    while (!stopped) {
      const startMs = performance.now();
      try {
        await client.unary('KV', 'Range', { key: Buffer.from('honest') }, HONEST_DEADLINE_MS);
        answers.push({ startMs, endMs: performance.now() });
      } catch (e) {
        errors.push((e as Error).message);
      }
    }
  };
  const loops = Array.from({ length: HONEST_CONCURRENCY }, () => loop());
  return {
    answeredBetween: (fromMs, toMs) => answers.filter((a) => a.endMs >= fromMs && a.endMs <= toMs).length,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
      client.close();
      return { answers, errors };
    },
  };
}

function quantile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Runs `attack` beside an honest client; checks the honest client's answers and returns its latencies. */
async function withHonestClient<T>(name: string, attack: () => Promise<T>): Promise<T> {
  const honest = honestClient();
  await waitFor('a first honest answer', () => honest.answeredBetween(0, Infinity) > 0);
  const fromMs = performance.now();
  const result = await attack();
  const toMs = performance.now();
  const answeredDuring = honest.answeredBetween(fromMs, toMs);
  const { answers, errors } = await honest.stop();
  const during = answers.filter((a) => a.endMs >= fromMs && a.endMs <= toMs).map((a) => a.endMs - a.startMs);
  during.sort((a, b) => a - b);
  console.log(
    `${name}: attack ${(toMs - fromMs).toFixed(0)} ms; honest Ranges answered meanwhile ${during.length}, ` +
      `p50 ${quantile(during, 0.5).toFixed(1)} ms, p99 ${quantile(during, 0.99).toFixed(1)} ms, max ${quantile(during, 1).toFixed(1)} ms`,
  );
  expect(errors).toEqual([]);
  expect(answeredDuring).toBeGreaterThan(0);
  return result;
}

interface FloodResult {
  goawayCodes: number[];
  /** From connecting to the socket's close. */
  closedAfterMs: number;
  /** From connecting to the first GOAWAY read (NaN without one). */
  goawayAfterMs: number;
  sentBytes: number;
}

/** Collects the frames a flood's socket reads: GOAWAY codes and when the first came. */
function frameReader(startMs: number): { onData: (d: Buffer) => void; goawayCodes: number[]; goawayAfterMs: () => number } {
  let inbound = Buffer.alloc(0);
  const goawayCodes: number[] = [];
  let goawayAt = NaN;
  return {
    goawayCodes,
    goawayAfterMs: () => goawayAt,
    onData: (d: Buffer) => {
      inbound = Buffer.concat([inbound, d]);
      while (inbound.length >= 9) {
        const len = inbound.readUIntBE(0, 3);
        if (inbound.length < 9 + len) break;
        if (inbound[3] === FrameType.GOAWAY) {
          goawayCodes.push(inbound.readUInt32BE(9 + 4));
          if (Number.isNaN(goawayAt)) goawayAt = performance.now() - startMs;
        }
        inbound = inbound.subarray(9 + len);
      }
    },
  };
}

/**
 * A client that never reads: the preface, then `chunk` over and over, at most `maxBytes`, until
 * `cutOff()` (polled) says the member cut it off; then it reads what the member sent and waits
 * for the close.
 */
function floodWithoutReading(port: number, chunk: Buffer, maxBytes: number, cutOff: () => Promise<boolean>): Promise<FloodResult> {
  return new Promise((resolve, reject) => {
    const startMs = performance.now();
    const socket = net.connect(port, '127.0.0.1');
    const reader = frameReader(startMs);
    let sentBytes = 0;
    let reading = false;
    let closed = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${CLOSE_TIMEOUT_MS} ms (${sentBytes} bytes sent, reading: ${reading})`));
    }, CLOSE_TIMEOUT_MS);
    const read = (): void => {
      if (reading) return;
      reading = true;
      socket.on('data', reader.onData);
      socket.resume();
    };
    const poll = async (): Promise<void> => {
      while (!closed && !reading) {
        if (await cutOff().catch(() => false)) return read();
        await new Promise((r) => setTimeout(r, CUT_OFF_POLL_MS));
      }
    };
    socket.pause();
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ goawayCodes: reader.goawayCodes, closedAfterMs: performance.now() - startMs, goawayAfterMs: reader.goawayAfterMs(), sentBytes });
    });
    socket.on('connect', () => {
      socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0))]));
      void poll();
      const pump = (): void => {
        while (!reading && !socket.destroyed) {
          if (sentBytes >= maxBytes) return read();
          sentBytes += chunk.length;
          if (!socket.write(chunk)) {
            socket.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
  });
}

/** A client that reads all along: the preface and `first`, then `chunk` until closed, at most `maxBytes`. */
function floodReading(port: number, first: Buffer, chunk: () => Buffer, maxBytes: number): Promise<FloodResult> {
  return new Promise((resolve, reject) => {
    const startMs = performance.now();
    const socket = net.connect(port, '127.0.0.1');
    const reader = frameReader(startMs);
    let sentBytes = 0;
    let closed = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${CLOSE_TIMEOUT_MS} ms (${sentBytes} bytes sent)`));
    }, CLOSE_TIMEOUT_MS);
    socket.on('data', reader.onData);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ goawayCodes: reader.goawayCodes, closedAfterMs: performance.now() - startMs, goawayAfterMs: reader.goawayAfterMs(), sentBytes });
    });
    socket.on('connect', () => {
      socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), first]));
      const pump = (): void => {
        if (closed || socket.destroyed || sentBytes >= maxBytes) return;
        const c = chunk();
        sentBytes += c.length;
        // Each write waits for the loop's next turn, so that what the server sends is read meanwhile.
        if (socket.write(c)) setImmediate(pump);
        else socket.once('drain', pump);
      };
      pump();
    });
  });
}

/** The same flood on new connections, one after the other, for `forMs`: each connection's result. */
async function reconnecting(forMs: number, flood: () => Promise<FloodResult>): Promise<FloodResult[]> {
  const results: FloodResult[] = [];
  const until = performance.now() + forMs;
  do results.push(await flood());
  while (performance.now() < until);
  return results;
}

function expectCutOff(results: FloodResult[], maxBytes: number): void {
  for (const r of results) {
    expect(r.goawayCodes).toEqual([ErrorCode.ENHANCE_YOUR_CALM]);
    expect(r.sentBytes).toBeLessThan(maxBytes);
  }
  const goawayMs = results.map((r) => r.goawayAfterMs).sort((a, b) => a - b);
  const closeMs = results.map((r) => r.closedAfterMs).sort((a, b) => a - b);
  console.log(
    `  ${results.length} connection(s) cut off; GOAWAY after ${quantile(goawayMs, 0.5).toFixed(0)} ms (median), ` +
      `${quantile(goawayMs, 1).toFixed(0)} ms (max); closed after ${quantile(closeMs, 1).toFixed(0)} ms (max)`,
  );
}

function expectMemberUp(): void {
  expect(member().proc.exitCode).toBeNull();
  expect(member().proc.signalCode).toBeNull();
  const peak = peakRssBytes();
  console.log(`  member peak resident size ${(peak / 2 ** 20).toFixed(0)} MiB`);
  expect(peak).toBeLessThan(MAX_PEAK_RSS_BYTES);
}

const RANGE_HEADERS = encodeHeaders({
  ':method': 'POST',
  ':scheme': 'http',
  ':path': '/etcdserverpb.KV/Range',
  ':authority': 'x',
  'content-type': 'application/grpc',
  te: 'trailers',
});

describe('HTTP/2 floods on a running member', () => {
  it('SETTINGS from a client that never reads: GOAWAY ENHANCE_YOUR_CALM, closed, member within its memory bound', { timeout: 120_000 }, async () => {
    const MAX_BYTES = 256 * 1024 * 1024;
    const before = await cutOffs('client', 'control_frames');
    const chunk = Buffer.concat(Array.from({ length: 1000 }, () => frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0))));
    const cutOff = async (): Promise<boolean> => (await cutOffs('client', 'control_frames')) > before;
    const r = await withHonestClient('SETTINGS flood, never read', () => floodWithoutReading(clientPort(), chunk, MAX_BYTES, cutOff));
    expectCutOff([r], MAX_BYTES);
    expectMemberUp();
    expect(await cutOffs('client', 'control_frames')).toBe(before + 1);
  });

  it('PING from a client that never reads, on the peer port: GOAWAY ENHANCE_YOUR_CALM, closed', { timeout: 120_000 }, async () => {
    const MAX_BYTES = 256 * 1024 * 1024;
    const before = await cutOffs('peer', 'control_frames');
    const chunk = Buffer.concat(Array.from({ length: 1000 }, (_, i) => frame(FrameType.PING, 0, 0, Buffer.alloc(8, i))));
    const cutOff = async (): Promise<boolean> => (await cutOffs('peer', 'control_frames')) > before;
    const r = await withHonestClient('PING flood on the peer port, never read', () => floodWithoutReading(peerPort(), chunk, MAX_BYTES, cutOff));
    expectCutOff([r], MAX_BYTES);
    expectMemberUp();
    expect(await cutOffs('peer', 'control_frames')).toBe(before + 1);
  });

  it('rapid reset: each connection gets GOAWAY ENHANCE_YOUR_CALM long before 500k streams', { timeout: 120_000 }, async () => {
    const PAIRS_PER_WRITE = 500;
    const MAX_STREAMS = 500_000;
    const rst = (id: number): Buffer => u32Frame(FrameType.RST_STREAM, id, ErrorCode.CANCEL);
    const headers = (id: number): Buffer => frame(FrameType.HEADERS, 0x4, id, RANGE_HEADERS);
    const pairBytes = headers(1).length + rst(1).length;
    const maxBytes = MAX_STREAMS * pairBytes;
    const before = await cutOffs('client', 'rapid_reset');
    const flood = (): Promise<FloodResult> => {
      let id = 1;
      return floodReading(
        clientPort(),
        Buffer.alloc(0),
        () => {
          const parts: Buffer[] = [];
          for (let i = 0; i < PAIRS_PER_WRITE; i++, id += 2) parts.push(headers(id), rst(id));
          return Buffer.concat(parts);
        },
        maxBytes,
      );
    };
    const results = await withHonestClient('rapid reset', () => reconnecting(READING_ATTACK_MS, flood));
    expectCutOff(results, maxBytes);
    expectMemberUp();
    expect(await cutOffs('client', 'rapid_reset')).toBe(before + results.length);
  });

  it('empty DATA frames: each connection gets GOAWAY ENHANCE_YOUR_CALM long before 20M frames', { timeout: 120_000 }, async () => {
    const FRAMES_PER_WRITE = 2000;
    const MAX_FRAMES = 20_000_000;
    const maxBytes = MAX_FRAMES * 9;
    const chunk = Buffer.concat(Array.from({ length: FRAMES_PER_WRITE }, () => frame(FrameType.DATA, 0, 1, Buffer.alloc(0))));
    const before = await cutOffs('client', 'empty_frames');
    const flood = (): Promise<FloodResult> => floodReading(clientPort(), frame(FrameType.HEADERS, 0x4, 1, RANGE_HEADERS), () => chunk, maxBytes);
    const results = await withHonestClient('empty DATA flood', () => reconnecting(READING_ATTACK_MS, flood));
    expectCutOff(results, maxBytes);
    expectMemberUp();
    expect(await cutOffs('client', 'empty_frames')).toBe(before + results.length);
  });
});
