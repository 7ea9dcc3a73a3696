// The peer Stream call's own HTTP/2 client against Node's http2 server (nghttp2): what it sends
// must be what an HTTP/2 server takes, and it must follow what such a server says.
import * as http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RawClientStream, type StreamEnd } from '../../../src/transport/raw_client';
import { encodeFramedBatch } from '../../../src/transport/codec';
import { GrpcMessageReader } from '../../../src/transport/raw_stream';
import { waitFor } from '../../helpers/wait';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

interface Served {
  port: number;
  streams: { stream: http2.ServerHttp2Stream; headers: http2.IncomingHttpHeaders }[];
  sessions: http2.ServerHttp2Session[];
}

async function h2Server(settings: http2.Settings, onStream: (s: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders) => void): Promise<Served> {
  const served: Served = { port: 0, streams: [], sessions: [] };
  const srv = http2.createServer({ settings });
  srv.on('session', (s) => served.sessions.push(s));
  srv.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    served.streams.push({ stream, headers });
    onStream(stream, headers);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  served.port = (srv.address() as AddressInfo).port;
  closers.push(() => {
    for (const s of served.sessions) s.destroy();
    srv.close();
  });
  return served;
}

function client(port: number, keepaliveTimeMs = 60_000, keepaliveTimeoutMs = 60_000) {
  const events: { accepted: number; ended: StreamEnd | undefined } = { accepted: 0, ended: undefined };
  const c = new RawClientStream(
    { url: `http://127.0.0.1:${port}`, target: `127.0.0.1:${port}`, secure: false },
    { path: '/etcdserverpb.test/Stream', metadata: { 'x-from': 'a1' }, keepaliveTimeMs, keepaliveTimeoutMs },
    {
      onAccepted: () => events.accepted++,
      onEnded: (e) => {
        expect(events.ended).toBeUndefined();
        events.ended = e;
      },
    },
  );
  closers.push(() => c.cancel());
  return { c, events };
}

describe('RawClientStream', () => {
  it('sends the gRPC request headers and metadata, and messages larger than the flow-control windows intact', async () => {
    const got: Buffer[] = [];
    const served = await h2Server({ initialWindowSize: 1000 }, (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      const reader = new GrpcMessageReader(1 << 24);
      stream.on('data', (chunk: Buffer) => reader.push(chunk, (m) => got.push(Buffer.from(m))));
    });
    const { c, events } = client(served.port);
    const big = Buffer.alloc(300_000);
    for (let i = 0; i < big.length; i++) big[i] = i % 251;
    const written: number[] = [];
    c.write(encodeFramedBatch([Buffer.from('first')]), () => written.push(1));
    await waitFor('written.length === 1 && events.accepted === 1', () => written.length === 1 && events.accepted === 1, { timeoutMs: 5000 });
    c.write(encodeFramedBatch([big]), () => written.push(2));
    await waitFor('got.length === 2', () => got.length === 2, { timeoutMs: 5000 });
    expect(written).toEqual([1, 2]);
    const h = served.streams[0]!.headers;
    expect(h[':method']).toBe('POST');
    expect(h[':path']).toBe('/etcdserverpb.test/Stream');
    expect(h['content-type']).toBe('application/grpc');
    expect(h.te).toBe('trailers');
    expect(h['x-from']).toBe('a1');
    expect(got[0]).toEqual(encodeFramedBatch([Buffer.from('first')]).subarray(5));
    expect(got[1]).toEqual(encodeFramedBatch([big]).subarray(5));
    expect(events.ended).toBeUndefined();
  });

  it('reports a trailers-only refusal with its status and decoded message', async () => {
    const served = await h2Server({}, (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '9', 'grpc-message': encodeURI('cluster ID mismatch') }, { endStream: true });
    });
    const { events } = client(served.port);
    await waitFor('events.ended !== undefined', () => events.ended !== undefined, { timeoutMs: 5000 });
    expect(events.accepted).toBe(0);
    expect(events.ended).toMatchObject({ code: 9, details: 'cluster ID mismatch' });
  });

  it('is accepted on response headers and ends with the status of the trailers', async () => {
    const served = await h2Server({}, (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      setTimeout(() => stream.end(), 50);
    });
    const { events } = client(served.port);
    await waitFor('events.ended !== undefined', () => events.ended !== undefined, { timeoutMs: 5000 });
    expect(events.accepted).toBe(1);
    expect(events.ended).toMatchObject({ code: 0 });
  });

  it('ends UNAVAILABLE when the server resets the stream or goes away', async () => {
    const reset = await h2Server({}, (stream) => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM));
    const a = client(reset.port);
    await waitFor('a.events.ended !== undefined', () => a.events.ended !== undefined, { timeoutMs: 5000 });
    expect(a.events.ended).toMatchObject({ code: 14 });
    const away = await h2Server({}, (stream) => stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR));
    const b = client(away.port);
    await waitFor('b.events.ended !== undefined', () => b.events.ended !== undefined, { timeoutMs: 5000 });
    expect(b.events.ended).toMatchObject({ code: 14 });
  });

  it("answers the server's PINGs", async () => {
    const served = await h2Server({}, (stream) => stream.respond({ ':status': 200, 'content-type': 'application/grpc' }));
    const { events } = client(served.port);
    await waitFor('events.accepted === 1', () => events.accepted === 1, { timeoutMs: 5000 });
    const rtt = await new Promise<number>((resolve, reject) =>
      served.sessions[0]!.ping((err, ms) => (err ? reject(err) : resolve(ms))),
    );
    expect(rtt).toBeGreaterThanOrEqual(0);
  });

  it('gives up on a peer that accepts the connection but never answers (keepalive)', async () => {
    const silent = net.createServer((s) => {
      s.on('error', () => {});
      closers.push(() => s.destroy());
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    closers.push(() => silent.close());
    const { events } = client((silent.address() as AddressInfo).port, 50, 100);
    await waitFor('events.ended !== undefined', () => events.ended !== undefined, { timeoutMs: 5000 });
    expect(events.ended).toMatchObject({ code: 14, details: 'keepalive timeout' });
  });

  it('answers malformed frames from the server with GOAWAY and ends INTERNAL, without throwing', async () => {
    // RST_STREAM with a 1-byte payload (must be 4), then a split frame header (kept across reads).
    for (const bad of [Buffer.from([0, 0, 1, 0x3, 0, 0, 0, 0, 1, 7]), Buffer.from([0x40, 0, 0, 0x0, 0, 0, 0, 0, 1])]) {
      const got: Buffer[] = [];
      const srv = net.createServer((s) => {
        s.on('error', () => {});
        s.on('data', (d) => got.push(d));
        closers.push(() => s.destroy());
        // Split anywhere: the client must put the frame back together before judging it.
        s.write(bad.subarray(0, 5));
        setImmediate(() => s.write(bad.subarray(5)));
      });
      await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
      closers.push(() => srv.close());
      const { events } = client((srv.address() as AddressInfo).port);
      await waitFor('events.ended !== undefined', () => events.ended !== undefined, { timeoutMs: 5000 });
      expect(events.ended).toMatchObject({ code: 13 });
      // The last frame the client sent is a GOAWAY (type 7) with FRAME_SIZE_ERROR (6).
      const sent = Buffer.concat(got);
      const goaway = sent.subarray(sent.length - 17);
      expect(goaway[3]).toBe(0x7);
      expect(goaway.readUInt32BE(9 + 4)).toBe(6);
    }
  });

  it('ends UNAVAILABLE when nothing listens', async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const { events } = client(port);
    await waitFor('events.ended !== undefined', () => events.ended !== undefined, { timeoutMs: 5000 });
    expect(events.ended).toMatchObject({ code: 14 });
  });
});
