// The KV methods bypass grpc-js's call machinery (src/api/fast_unary.ts): what a client sees must
// not change, including the awkward cases grpc-js handles for every other method.
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { clientConstructor } from '../../../src/pb/load';
import { encodeMessage } from '../../../src/pb/internal';
import type * as pb from '../../../src/pb/types';
import type { CallAuth } from '../../../src/server/types';
import { call, startHarness, waitFor, type Harness } from './harness';
import { FakeServer } from './fake_server';

class RecordingServer extends FakeServer {
  lastAuth: CallAuth | undefined;
  putDelayMs = 0;
  putsStarted = 0;
  override async put(req: pb.PutRequest, ctx?: CallAuth): Promise<pb.PutResponse> {
    this.lastAuth = ctx;
    this.putsStarted++;
    if (this.putDelayMs > 0) await new Promise((r) => setTimeout(r, this.putDelayMs));
    return super.put(req);
  }
}

let h: Harness;
let fake: RecordingServer;
const b = (s: string): Buffer => Buffer.from(s);

beforeAll(async () => {
  fake = new RecordingServer();
  h = await startHarness({ fake });
});
afterAll(async () => {
  await h.close();
});

interface RawAnswer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
}

/** One request on a raw HTTP/2 stream, so the test controls every byte of the gRPC framing. */
function raw(path: string, body: Buffer, extra: http2.OutgoingHttpHeaders = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${h.endpoint}`);
    session.on('error', reject);
    const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extra });
    const chunks: Buffer[] = [];
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    req.on('response', (hs) => (headers = hs));
    req.on('trailers', (ts) => (trailers = ts));
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      session.close();
      resolve({ headers, trailers, body: Buffer.concat(chunks) });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function frame(msg: Buffer, compressed = false): Buffer {
  const f = Buffer.alloc(5 + msg.length);
  f[0] = compressed ? 1 : 0;
  f.writeUInt32BE(msg.length, 1);
  msg.copy(f, 5);
  return f;
}

const putBytes = (key: string): Buffer => encodeMessage('etcdserverpb.PutRequest', { key: b(key), value: b('v') });

describe('fast unary path for KV', () => {
  it('answers with the headers and trailers grpc-js sends', async () => {
    const a = await raw('/etcdserverpb.KV/Put', frame(putBytes('raw1')));
    expect(a.headers[':status']).toBe(200);
    expect(a.headers['content-type']).toBe('application/grpc+proto');
    expect(a.headers['grpc-encoding']).toBe('identity');
    expect(a.trailers['grpc-status']).toBe('0');
    expect(a.body.length).toBeGreaterThan(5);
    expect(a.body.readUInt32BE(1)).toBe(a.body.length - 5);
  });

  it("passes the caller's metadata (auth token) to the server", async () => {
    const kv = h.client('etcdserverpb.KV');
    const md = new grpc.Metadata();
    md.set('token', 'tok123');
    await new Promise<void>((resolve, reject) =>
      (kv as unknown as { Put: (r: unknown, m: grpc.Metadata, cb: (e: unknown) => void) => void }).Put({ key: b('a'), value: b('b') }, md, (e) => (e ? reject(e) : resolve())),
    );
    expect(fake.lastAuth?.token).toBe('tok123');
  });

  it('still serves compressed requests (through grpc-js)', async () => {
    const Ctor = clientConstructor('etcdserverpb.KV');
    const kv = new Ctor(h.endpoint, grpc.credentials.createInsecure(), { 'grpc.default_compression_algorithm': 2, 'grpc.use_local_subchannel_pool': 1 });
    try {
      await call(kv, 'Put', { key: b('gz'), value: Buffer.alloc(4000, 'x') });
      const r = await call<{ kvs: { value: Buffer }[] }>(kv, 'Range', { key: b('gz') });
      expect(r.kvs[0]!.value.length).toBe(4000);
    } finally {
      kv.close();
    }
  });

  it("answers a compressed flag without grpc-encoding, two messages, no message and half a message as grpc-go does (etcd's)", async () => {
    const compressed = await raw('/etcdserverpb.KV/Put', frame(putBytes('c'), true));
    expect(compressed.trailers['grpc-status'] ?? compressed.headers['grpc-status']).toBe(String(grpc.status.INTERNAL));
    expect(decodeURI(String(compressed.headers['grpc-message']))).toBe('grpc: compressed flag set with identity or empty encoding');
    // grpc-go reads a unary call's first message and answers it; what follows is ignored.
    const two = await raw('/etcdserverpb.KV/Put', Buffer.concat([frame(putBytes('x')), frame(putBytes('y'))]));
    expect(two.trailers['grpc-status']).toBe(String(grpc.status.OK));
    const none = await raw('/etcdserverpb.KV/Put', Buffer.alloc(0));
    expect(none.headers['grpc-status']).toBe(String(grpc.status.UNKNOWN));
    expect(decodeURI(String(none.headers['grpc-message']))).toBe('EOF');
    const torn = await raw('/etcdserverpb.KV/Put', frame(putBytes('t')).subarray(0, 7));
    expect(torn.headers['grpc-status']).toBe(String(grpc.status.UNKNOWN));
    expect(decodeURI(String(torn.headers['grpc-message']))).toBe('unexpected EOF');
  });

  it("refuses a message above the receive limit from its frame header, with grpc-go's text (what etcd's clients see)", async () => {
    const head = Buffer.alloc(5);
    head.writeUInt32BE(512 * 1024 * 1024, 1);
    const a = await raw('/etcdserverpb.KV/Put', head);
    expect(a.headers['grpc-status']).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
    expect(decodeURI(String(a.headers['grpc-message']))).toMatch(/^grpc: received message larger than max \(536870912 vs\. \d+\)$/);
  });

  it('survives a client that cancels while the server works, and keeps serving', async () => {
    fake.putDelayMs = 100;
    const kv = h.client('etcdserverpb.KV');
    try {
      const started = fake.putsStarted;
      const c = (kv as unknown as { Put: (r: unknown, cb: (e: grpc.ServiceError | null) => void) => grpc.ClientUnaryCall }).Put({ key: b('slow'), value: b('v') }, () => undefined);
      await waitFor(() => fake.putsStarted > started, 5000, 'the server to start the put');
      c.cancel();
      // The server finishes the write it began; its answer goes nowhere.
      await waitFor(() => fake.kvs.has('slow'), 5000, 'the cancelled put to complete on the server');
    } finally {
      fake.putDelayMs = 0;
    }
    const r = await call<{ kvs: unknown[] }>(kv, 'Range', { key: b('slow') });
    expect(r.kvs.length).toBe(1);
  });

  it('answers an unknown method with Unimplemented, through grpc-js', async () => {
    const a = await raw('/etcdserverpb.KV/Nope', frame(Buffer.alloc(0)));
    expect(a.headers['grpc-status']).toBe(String(grpc.status.UNIMPLEMENTED));
  });
});
