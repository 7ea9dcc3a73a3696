// Watch/Watch and Lease/LeaseKeepAlive bypass grpc-js's call machinery (src/api/fast_stream.ts).
// A call carrying a grpc-timeout header still goes through grpc-js, which lets these tests send
// the same bytes both ways on one server and require the same answer: headers, messages,
// trailers, status texts and metrics.
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { Etcd3 } from 'etcd3';
import { encodeMessage, decodeMessage } from '../../../src/pb/internal';
import { createMetrics, type EtcdMetrics } from '../../../src/metrics';
import { FrameReader, WRITE_HIGH_WATER_BYTES, WRITE_HIGH_WATER_MESSAGES } from '../../../src/api/fast_stream';
import type { MvccEvent } from '../../../src/mvcc/types';
import type * as pb from '../../../src/pb/types';
import { startHarness, waitFor, type Harness } from './harness';
import { FakeServer, type FakeWatchStream } from './fake_server';

let h: Harness;
let fake: FakeServer;
let metrics: EtcdMetrics;
const b = (s: string): Buffer => Buffer.from(s);

beforeAll(async () => {
  fake = new FakeServer();
  metrics = createMetrics({ serverVersion: '3.6.0', defaultMetrics: false });
  h = await startHarness({ fake, grpc: { metrics, memberState: { refreshMs: 0, electionTimeoutMs: 50 } } });
});
afterAll(async () => {
  await h.close();
});

const WATCH = '/etcdserverpb.Watch/Watch';
const KEEPALIVE = '/etcdserverpb.Lease/LeaseKeepAlive';
/** Sends a call through grpc-js instead of the fast path (see fastStreamRoutes). */
const VIA_GRPC_JS: http2.OutgoingHttpHeaders = { 'grpc-timeout': '100S' };

function frame(msg: Buffer, flag = 0): Buffer {
  const f = Buffer.alloc(5 + msg.length);
  f[0] = flag;
  f.writeUInt32BE(msg.length, 1);
  msg.copy(f, 5);
  return f;
}

function unframe(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let pos = 0; pos < body.length; ) {
    const n = body.readUInt32BE(pos + 1);
    out.push(body.subarray(pos + 5, pos + 5 + n));
    pos += 5 + n;
  }
  return out;
}

interface RawStream {
  req: http2.ClientHttp2Stream;
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body(): Buffer;
  messages(): Buffer[];
  /** Resolves when the server ended the stream (trailers or trailers-only). */
  ended: Promise<void>;
  session: http2.ClientHttp2Session;
}

/** A raw HTTP/2 gRPC stream, so a test controls every byte of the framing. */
function rawStream(path: string, extra: http2.OutgoingHttpHeaders = {}): RawStream {
  const session = http2.connect(`http://${h.endpoint}`);
  session.on('error', () => undefined);
  const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extra });
  const chunks: Buffer[] = [];
  const out: RawStream = {
    req,
    headers: {},
    trailers: {},
    body: () => Buffer.concat(chunks),
    messages: () => unframe(Buffer.concat(chunks)),
    ended: new Promise<void>((resolve) => {
      req.on('end', resolve);
      req.on('close', resolve);
    }),
    session,
  };
  req.on('response', (hs) => (out.headers = hs));
  req.on('trailers', (ts) => (out.trailers = ts));
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('error', () => undefined);
  return out;
}

/** Status as the client sees it, from trailers or a trailers-only response. */
function statusOf(r: RawStream): { code: string | undefined; message: string } {
  const src = r.trailers['grpc-status'] !== undefined ? r.trailers : r.headers;
  return { code: src['grpc-status'] as string | undefined, message: decodeURI(String(src['grpc-message'] ?? '')) };
}

/** The response headers without the ones that differ per connection. */
function stableHeaders(hs: http2.IncomingHttpHeaders): Record<string, unknown> {
  const { date: _d, ...rest } = hs;
  return rest;
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((_, reject) => (t = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms)))]);
  } finally {
    clearTimeout(t);
  }
}

async function scrapeValue(name: string, labels: Record<string, string>): Promise<number> {
  const text = (await metrics.metricsText()).body;
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = m[2]!.split(',').sort();
    if (got.length === want.length && got.every((g, i) => g === want[i])) return Number(m[3]);
  }
  return 0;
}

const watchLabels = { grpc_method: 'Watch', grpc_service: 'etcdserverpb.Watch', grpc_type: 'bidi_stream' };
const kaLabels = { grpc_method: 'LeaseKeepAlive', grpc_service: 'etcdserverpb.Lease', grpc_type: 'bidi_stream' };

async function counts(labels: Record<string, string>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const n of ['grpc_server_started_total', 'grpc_server_msg_received_total', 'grpc_server_msg_sent_total']) out[n] = await scrapeValue(n, labels);
  for (const c of ['OK', 'Canceled', 'Unavailable', 'Internal', 'ResourceExhausted', 'Unknown']) {
    out[c] = await scrapeValue('grpc_server_handled_total', { ...labels, grpc_code: c });
  }
  return out;
}

function delta(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(b)) if (b[k] !== a[k]) out[k] = b[k]! - (a[k] ?? 0);
  return out;
}

const watchCreate = (key: string, extra: Record<string, unknown> = {}): Buffer =>
  encodeMessage('etcdserverpb.WatchRequest', { createRequest: { key: b(key), ...extra } });
const keepAlive = (id: string): Buffer => encodeMessage('etcdserverpb.LeaseKeepAliveRequest', { ID: id });

/**
 * Runs one scenario through grpc-js and through the fast path and returns both outcomes:
 * status, response headers, response messages and the metrics it added.
 */
async function both(
  path: string,
  labels: Record<string, string>,
  run: (r: RawStream) => Promise<void>,
): Promise<{ slow: Outcome; fast: Outcome }> {
  const once = async (extra: http2.OutgoingHttpHeaders): Promise<Outcome> => {
    const before = await counts(labels);
    const r = rawStream(path, extra);
    try {
      await run(r);
      await withTimeout(r.ended, 5000, 'the stream to end');
    } finally {
      r.session.close();
    }
    const { 'grpc-status': _s, 'grpc-message': _m, ...hs } = stableHeaders(r.headers);
    const after = await settledCounts(labels);
    return { status: statusOf(r), headers: hs, messages: r.messages().map((m) => m.toString('hex')), metrics: delta(before, after) };
  };
  const slow = await once(VIA_GRPC_JS);
  const fast = await once({});
  return { slow, fast };
}

interface Outcome {
  status: { code: string | undefined; message: string };
  headers: Record<string, unknown>;
  messages: string[];
  metrics: Record<string, number>;
}

/** The counts once they stop changing for a moment (a stream's close lands after its trailers). */
async function settledCounts(labels: Record<string, string>): Promise<Record<string, number>> {
  let prev = JSON.stringify(await counts(labels));
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 30));
    const now = await counts(labels);
    if (JSON.stringify(now) === prev) return now;
    prev = JSON.stringify(now);
  }
  throw new Error('metrics did not settle');
}

describe('fast bidi path: same bytes and metrics as grpc-js', () => {
  it('LeaseKeepAlive: several requests in one chunk, then a half-close', async () => {
    const id = (await fake.leaseGrant({ TTL: '30', ID: '0' } as pb.LeaseGrantRequest)).ID;
    const { slow, fast } = await both(KEEPALIVE, kaLabels, async (r) => {
      r.req.end(Buffer.concat([frame(keepAlive(id)), frame(keepAlive(id)), frame(keepAlive('12345'))]));
    });
    expect(fast.status).toEqual({ code: '0', message: 'OK' });
    expect(fast).toEqual(slow);
    expect(fast.messages.length).toBe(3);
    const last = decodeMessage('etcdserverpb.LeaseKeepAliveResponse', Buffer.from(fast.messages[2]!, 'hex'));
    // An unknown lease answers TTL 0, not an error.
    expect(last.ID).toBe('12345');
    expect(last.TTL).toBe('0');
    expect(fast.metrics).toMatchObject({ grpc_server_started_total: 1, grpc_server_msg_received_total: 3, grpc_server_msg_sent_total: 3, OK: 1 });
  });

  it('LeaseKeepAlive: messages split at every byte', async () => {
    const id = (await fake.leaseGrant({ TTL: '30', ID: '0' } as pb.LeaseGrantRequest)).ID;
    const bytes = Buffer.concat([frame(keepAlive(id)), frame(keepAlive(id))]);
    const { slow, fast } = await both(KEEPALIVE, kaLabels, async (r) => {
      for (let i = 0; i < bytes.length; i++) {
        r.req.write(bytes.subarray(i, i + 1));
        // Separate DATA frames, not one coalesced write.
        await new Promise((res) => setImmediate(res));
      }
      r.req.end();
    });
    expect(fast).toEqual(slow);
    expect(fast.messages.length).toBe(2);
  });

  it('LeaseKeepAlive: a client that resets the stream', async () => {
    const id = (await fake.leaseGrant({ TTL: '30', ID: '0' } as pb.LeaseGrantRequest)).ID;
    const { slow, fast } = await both(KEEPALIVE, kaLabels, async (r) => {
      r.req.write(frame(keepAlive(id)));
      await waitFor(() => r.messages().length === 1, 5000, 'the keepalive response');
      r.req.close(http2.constants.NGHTTP2_CANCEL);
    });
    expect(fast).toEqual(slow);
    // Node ends the server stream's input on a reset, so the handler ends the call itself.
    expect(fast.metrics).toMatchObject({ grpc_server_started_total: 1, grpc_server_msg_sent_total: 1 });
  });

  it('LeaseKeepAlive: a burst the handler pauses on is answered completely and in order', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await fake.leaseGrant({ TTL: String(10 + i), ID: '0' } as pb.LeaseGrantRequest)).ID);
    // 200 requests in one write: more than lease.ts queues before it pauses the call (64).
    const reqs = Array.from({ length: 200 }, (_, i) => ids[i % 3]!);
    fake.keepAliveDelayMs = 2;
    try {
      const { slow, fast } = await both(KEEPALIVE, kaLabels, async (r) => {
        r.req.end(Buffer.concat(reqs.map((id) => frame(keepAlive(id)))));
      });
      expect(fast).toEqual(slow);
      const got = fast.messages.map((m) => decodeMessage('etcdserverpb.LeaseKeepAliveResponse', Buffer.from(m, 'hex')).ID);
      expect(got).toEqual(reqs);
      expect(fast.metrics).toMatchObject({ grpc_server_msg_received_total: 200, grpc_server_msg_sent_total: 200, OK: 1 });
    } finally {
      fake.keepAliveDelayMs = 0;
    }
  });

  it('refuses a message over the receive limit with ResourceExhausted', async () => {
    const head = Buffer.alloc(5);
    head.writeUInt32BE(512 * 1024 * 1024, 1);
    const { slow, fast } = await both(WATCH, watchLabels, async (r) => {
      r.req.write(frame(watchCreate('big')));
      await waitFor(() => r.messages().length === 1, 5000, 'the created response');
      r.req.write(head);
    });
    expect(fast.status.code).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
    expect(fast.status.message).toMatch(/^grpc: received message larger than max \(536870912 vs\. \d+\)$/);
    expect(fast).toEqual(slow);
  });

  it('refuses an undecodable request and a compressed flag as grpc-js does', async () => {
    const garbage = await both(WATCH, watchLabels, async (r) => {
      r.req.write(frame(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f])));
    });
    expect(garbage.fast.status.code).toBe(String(grpc.status.INTERNAL));
    expect(garbage.fast).toEqual(garbage.slow);
    const compressed = await both(KEEPALIVE, kaLabels, async (r) => {
      r.req.end(frame(keepAlive('5'), 1));
    });
    // grpc-js reads the flagged message as uncompressed (the stream's encoding is identity).
    expect(compressed.fast.status).toEqual({ code: '0', message: 'OK' });
    expect(compressed.fast).toEqual(compressed.slow);
  });

  it('Watch: creates, events, progress, cancel, then the client resets the stream', async () => {
    const { slow, fast } = await both(WATCH, watchLabels, async (r) => {
      r.req.write(Buffer.concat([frame(watchCreate('d1')), frame(watchCreate('d2', { prevKv: true }))]));
      await waitFor(() => r.messages().length === 2, 5000, 'two created responses');
      await fake.put({ key: b('d1'), value: b('x') } as pb.PutRequest);
      await fake.put({ key: b('d2'), value: b('y') } as pb.PutRequest);
      await waitFor(() => r.messages().length === 4, 5000, 'two events');
      r.req.write(frame(encodeMessage('etcdserverpb.WatchRequest', { progressRequest: {} })));
      await waitFor(() => r.messages().length === 5, 5000, 'the progress response');
      r.req.write(frame(encodeMessage('etcdserverpb.WatchRequest', { cancelRequest: { watchId: '1' } })));
      await waitFor(() => r.messages().length === 6, 5000, 'the cancel response');
      r.req.close(http2.constants.NGHTTP2_CANCEL);
    });
    // Revisions move between the two runs; the shapes and everything else must match.
    const shape = (o: Outcome): unknown => ({
      ...o,
      messages: o.messages.map((m) => {
        const w = decodeMessage('etcdserverpb.WatchResponse', Buffer.from(m, 'hex'));
        // The second run sees the first run's keys as previous values.
        return { ...w, header: null, events: w.events.map((e) => ({ ...e, kv: { ...e.kv, modRevision: '', createRevision: '', version: '' }, prevKv: null })) };
      }),
    });
    expect(shape(fast)).toEqual(shape(slow));
    expect(fast.metrics).toMatchObject({ grpc_server_started_total: 1, grpc_server_msg_received_total: 4, grpc_server_msg_sent_total: 6, Canceled: 1 });
    await waitFor(() => fake.streams.size === 0, 5000, 'the hub streams to close');
  });
});

describe('fast bidi path with real clients', () => {
  it('serves the etcd3 npm watcher and lease keepalive', async () => {
    const client = new Etcd3({ hosts: `http://${h.endpoint}` });
    try {
      const watcher = await client.watch().key('npm1').create();
      const seen: string[] = [];
      watcher.on('put', (kv) => seen.push(kv.value.toString()));
      for (let i = 0; i < 20; i++) await client.put('npm1').value(`v${i}`);
      await waitFor(() => seen.length === 20, 5000, '20 events');
      expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => `v${i}`));
      await watcher.cancel();
      const lease = client.lease(30, { autoKeepAlive: false });
      const id = await lease.grant();
      const ka = await lease.keepaliveOnce();
      expect(ka.ID).toBe(id);
      expect(ka.TTL).toBe('30');
      await lease.revoke();
    } finally {
      client.close();
    }
  });

  it('many watches on one stream, each seeing its own events in order', async () => {
    const before = fake.streams.size;
    const w = (h.client('etcdserverpb.Watch') as unknown as { Watch(): grpc.ClientDuplexStream<unknown, pb.WatchResponse> }).Watch();
    const got: pb.WatchResponse[] = [];
    w.on('data', (r: pb.WatchResponse) => got.push(r));
    w.on('error', () => undefined);
    const WATCHES = 50;
    for (let i = 0; i < WATCHES; i++) w.write({ createRequest: { key: b(`many${i % 5}`) } });
    await waitFor(() => got.length === WATCHES, 5000, 'all created');
    for (let round = 0; round < 10; round++) {
      for (let k = 0; k < 5; k++) await fake.put({ key: b(`many${k}`), value: b(`r${round}`) } as pb.PutRequest);
    }
    await waitFor(() => got.length === WATCHES + WATCHES * 10, 5000, 'every event');
    const byWatcher = new Map<string, string[]>();
    for (const r of got.slice(WATCHES)) byWatcher.set(r.watchId, [...(byWatcher.get(r.watchId) ?? []), r.events[0]!.kv!.value.toString()]);
    expect(byWatcher.size).toBe(WATCHES);
    for (const vals of byWatcher.values()) expect(vals).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
    w.cancel();
    await waitFor(() => fake.streams.size === before, 5000, 'the stream to close on the server');
  });

  it("takes etcd's 128 small responses in one turn before asking the hub to wait, and delivers them all", async () => {
    // etcd buffers 128 responses per watch stream (mvcc's chanBufLen) before its watchers become
    // victims; 100 watchers of one key on one stream get their event live in etcd, so here too.
    expect(WRITE_HIGH_WATER_MESSAGES).toBe(128);
    const w = (h.client('etcdserverpb.Watch') as unknown as { Watch(): grpc.ClientDuplexStream<unknown, pb.WatchResponse> }).Watch();
    const got: pb.WatchResponse[] = [];
    w.on('data', (r: pb.WatchResponse) => got.push(r));
    w.on('error', () => undefined);
    w.write({ createRequest: { key: b('turn') } });
    await waitFor(() => got.length === 1, 5000, 'created');
    const stream = [...fake.streams].at(-1) as FakeWatchStream;
    const accepted: boolean[] = [];
    for (let i = 0; i < 130; i++) {
      fake.rev++;
      const ev: MvccEvent = { type: 0, kv: { key: b('turn'), value: b('v'), createRevision: 2, modRevision: fake.rev, version: i + 1, lease: 0n }, prevKv: null };
      accepted.push(stream.emit({ watchId: Number(got[0]!.watchId), events: [ev] }));
    }
    // The 128th response of the turn fills the call's buffer: it and the ones after say wait.
    expect(accepted.indexOf(false)).toBe(WRITE_HIGH_WATER_MESSAGES - 1);
    await waitFor(() => got.length === 131, 5000, 'every response');
    expect(got.slice(1).map((r) => Number(r.events[0]!.kv!.version))).toEqual(Array.from({ length: 130 }, (_, i) => i + 1));
    w.cancel();
  });

  it('a slow reader: the server stops pushing, memory stays bounded, nothing is lost or reordered', async () => {
    const session = http2.connect(`http://${h.endpoint}`, { settings: { initialWindowSize: 65535 } });
    session.on('error', () => undefined);
    const req = session.request({ ':method': 'POST', ':path': WATCH, 'content-type': 'application/grpc', te: 'trailers' });
    req.on('error', () => undefined);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.write(frame(watchCreate('slow')));
    await waitFor(() => Buffer.concat(chunks).length > 0, 5000, 'created');
    const stream = [...fake.streams].at(-1) as FakeWatchStream;
    req.pause();
    // Push events, a few per turn, until the server's sink says stop: the client reads nothing,
    // so HTTP/2 flow control fills and the call's buffer reaches its high-water mark.
    const value = Buffer.alloc(1000, 'v');
    let pushed = 0;
    let accepted = true;
    while (accepted && pushed < 10_000) {
      for (let i = 0; i < 8 && accepted; i++) {
        pushed++;
        fake.rev++;
        const ev: MvccEvent = { type: 0, kv: { key: b('slow'), value, createRevision: 2, modRevision: fake.rev, version: pushed, lease: 0n }, prevKv: null };
        accepted = stream.emit({ watchId: 1, events: [ev] });
      }
      await new Promise((r) => setImmediate(r));
    }
    expect(accepted).toBe(false);
    // Stopped at the flow-control windows (64 KiB stream, 64 KiB session by default) plus the
    // call's high-water mark, not after everything: that is the server's memory bound.
    expect(pushed * 1000).toBeLessThan(4 * 65535 + 2 * WRITE_HIGH_WATER_BYTES);
    await new Promise((r) => setTimeout(r, 50));
    expect(stream.resumed).toBe(0);
    const resumedBefore = stream.resumed;
    req.resume();
    await waitFor(() => stream.resumed > resumedBefore, 5000, "the server's drain");
    await waitFor(() => unframe(Buffer.concat(chunks)).length === pushed + 1, 5000, 'every event');
    const revs = unframe(Buffer.concat(chunks))
      .slice(1)
      .map((m) => Number(decodeMessage('etcdserverpb.WatchResponse', m).events[0]!.kv!.version));
    expect(revs).toEqual(Array.from({ length: pushed }, (_, i) => i + 1));
    req.close(http2.constants.NGHTTP2_CANCEL);
    session.close();
    await waitFor(() => stream.closed, 5000, 'the hub stream to close');
  });

  it('passes the token metadata and refuses for a learner as grpc-js does', async () => {
    fake.isLearner = true;
    try {
      const { slow, fast } = await both(WATCH, watchLabels, async (r) => {
        r.req.write(frame(watchCreate('l')));
      });
      expect(fast.status.code).toBe(String(grpc.status.UNAVAILABLE));
      expect(fast).toEqual(slow);
    } finally {
      fake.isLearner = false;
    }
  });
});

describe('FrameReader', () => {
  it('reads messages across and within chunks, and refuses an oversized header early', () => {
    const msgs = [Buffer.alloc(0), b('a'), Buffer.alloc(300, 1), b('xyz')];
    const all = Buffer.concat(msgs.map((m) => frame(m)));
    for (const step of [1, 2, 3, 5, 7, 64, all.length]) {
      const r = new FrameReader(1000);
      const out: Buffer[] = [];
      for (let i = 0; i < all.length; i += step) r.push(all.subarray(i, i + step), (_f, body) => out.push(Buffer.from(body)));
      expect(out).toEqual(msgs);
      expect(r.idle).toBe(true);
    }
    const r = new FrameReader(10);
    expect(() => r.push(frame(Buffer.alloc(11)).subarray(0, 5), () => undefined)).toThrow('grpc: received message larger than max (11 vs. 10)');
  });
});
