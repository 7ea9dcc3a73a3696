// The lean HTTP/2 server connection against Node's own HTTP/2 client (nghttp2) and raw frames.
import http2 from 'node:http2';
import net from 'node:net';
import { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { H2Connection, PING_ACK_DELAY_MS, RESET_BUDGET_BURST_STREAMS, STREAM_WINDOW_BYTES, type H2ConnectionOptions, type IncomingHeaders } from '../../../src/h2/connection';
import { ErrorCode, FrameType, PREFACE, frame } from '../../../src/h2/frames';
import { encodeHeaders } from '../../../src/h2/hpack';
import type { H2Stream } from '../../../src/h2/stream';
import { frameMessage } from '../../../src/grpcjs/wire';
import { allocEncoding, encodePooled } from '../../../src/pb/wire';
import { responsePool } from '../../../src/runtime/buffer_pool';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function serve(onStream: (s: H2Stream, h: IncomingHeaders) => void, opts: Partial<H2ConnectionOptions> = {}): Promise<number> {
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    new H2Connection(socket, { onStream, ...opts });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    srv.close();
  });
  return (srv.address() as net.AddressInfo).port;
}

function connect(port: number): http2.ClientHttp2Session {
  const c = http2.connect(`http://127.0.0.1:${port}`);
  c.on('error', () => {});
  cleanups.push(() => c.destroy());
  return c;
}

interface Reply {
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  trailers: http2.IncomingHttpHeaders | undefined;
}

function request(c: http2.ClientHttp2Session, path: string, body: Buffer, extra: http2.OutgoingHttpHeaders = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = c.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', ...extra });
    const chunks: Buffer[] = [];
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    req.on('response', (h) => (headers = h));
    req.on('trailers', (t) => (trailers = t));
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => resolve({ headers, body: Buffer.concat(chunks), trailers }));
    req.on('error', reject);
    req.end(body);
  });
}

/** Echoes the request body back with gRPC-style headers and trailers. */
function echo(s: H2Stream, h: IncomingHeaders): void {
  const parts: Buffer[] = [];
  s.on('data', (d: Buffer) => parts.push(d));
  s.on('end', () => {
    s.respond({ ':status': 200, 'content-type': 'application/grpc+proto', 'x-path': String(h[':path']) }, { waitForTrailers: true });
    s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0', 'grpc-message': 'OK' }));
    s.end(Buffer.concat(parts));
  });
}

describe('H2Connection with Node http2 client', () => {
  it("indexes constant response headers in the client's HPACK table, also across a table size change", async () => {
    const HEADERS = Object.freeze({ ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-encoding': 'identity' });
    const TRAILERS = Object.freeze({ 'grpc-status': '0', 'grpc-message': 'OK' });
    const port = await serve((s) => {
      s.on('data', () => {});
      s.on('end', () => {
        s.respond(HEADERS, { waitForTrailers: true });
        s.once('wantTrailers', () => s.sendTrailers(TRAILERS));
        s.end(Buffer.from('x'));
      });
    });
    const c = connect(port);
    const check = async (): Promise<void> => {
      const r = await request(c, '/svc/M', Buffer.from('a'));
      expect(r.headers).toMatchObject({ ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-encoding': 'identity' });
      expect(r.trailers).toMatchObject({ 'grpc-status': '0', 'grpc-message': 'OK' });
    };
    for (let i = 0; i < 5; i++) await check();
    await new Promise<void>((resolve) => c.settings({ headerTableSize: 64 }, () => resolve()));
    for (let i = 0; i < 5; i++) await check();
    await new Promise<void>((resolve) => c.settings({ headerTableSize: 0 }, () => resolve()));
    for (let i = 0; i < 3; i++) await check();
  });

  it('answers a request with headers, body and trailers', async () => {
    const port = await serve(echo);
    const c = connect(port);
    const r = await request(c, '/svc/Method', Buffer.from('hello'), { 'x-meta': 'v1' });
    expect(r.headers[':status']).toBe(200);
    expect(r.headers['x-path']).toBe('/svc/Method');
    expect(r.body.toString()).toBe('hello');
    expect(r.trailers).toMatchObject({ 'grpc-status': '0', 'grpc-message': 'OK' });
  });

  it('passes request headers through, repeated ones as arrays, pseudo-headers included', async () => {
    let seen: IncomingHeaders | undefined;
    const port = await serve((s, h) => {
      seen = h;
      echo(s, h);
    });
    await request(connect(port), '/p', Buffer.alloc(0), { 'x-a': ['1', '2'], authorization: 'tok' });
    expect(seen?.[':method']).toBe('POST');
    expect(seen?.[':path']).toBe('/p');
    expect(seen?.['x-a']).toEqual(['1', '2']);
    expect(seen?.authorization).toBe('tok');
  });

  it('moves 6 MiB each way through 64 KiB client windows (flow control both ways)', async () => {
    const port = await serve(echo);
    const body = Buffer.alloc(6 * 1024 * 1024);
    for (let i = 0; i < body.length; i += 4096) body.writeUInt32BE(i, i);
    const r = await request(connect(port), '/big', body);
    expect(r.body.length).toBe(body.length);
    expect(r.body.equals(body)).toBe(true);
    expect(r.trailers?.['grpc-status']).toBe('0');
  });

  it('serves 300 concurrent streams on one connection', async () => {
    const port = await serve(echo);
    const c = connect(port);
    const replies = await Promise.all(Array.from({ length: 300 }, (_, i) => request(c, `/s/${i}`, Buffer.from(String(i)))));
    replies.forEach((r, i) => expect(r.body.toString()).toBe(String(i)));
  });

  it('holds data for a paused stream within its window and delivers it all on resume', async () => {
    let server: H2Stream | undefined;
    const got: Buffer[] = [];
    const ended = new Promise<void>((resolve) => {
      void serve((s) => {
        server = s;
        s.pause();
        s.on('data', (d: Buffer) => got.push(d));
        s.on('end', () => resolve());
      }).then((port) => {
        const req = connect(port).request({ ':method': 'POST', ':path': '/paused' });
        req.on('error', () => {});
        req.end(Buffer.alloc(STREAM_WINDOW_BYTES + 1024 * 1024, 7));
      });
    });
    await waitFor(() => server !== undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(got.length).toBe(0);
    server!.resume();
    await ended;
    expect(Buffer.concat(got).length).toBe(STREAM_WINDOW_BYTES + 1024 * 1024);
  });

  it.each([
    ['a close listener', (s: H2Stream, onClose: () => void) => void s.on('close', onClose)],
    ["the stream's sink (before any answer)", (s: H2Stream, onClose: () => void) => s.setSink({ onStreamData: () => {}, onStreamEnd: () => {}, onStreamClose: onClose })],
  ])('reports a client reset as close with its code to %s', async (_name, watchClose) => {
    let closedWith: number | undefined;
    let opened = false;
    const port = await serve((s) => {
      opened = true;
      watchClose(s, () => (closedWith = s.rstCode));
    });
    const req = connect(port).request({ ':method': 'POST', ':path': '/x' });
    req.on('error', () => {});
    await waitFor(() => opened);
    req.close(http2.constants.NGHTTP2_CANCEL);
    await waitFor(() => closedWith !== undefined);
    expect(closedWith).toBe(ErrorCode.CANCEL);
  });

  it('closes every stream when the connection drops', async () => {
    let closed = 0;
    let opened = 0;
    const port = await serve((s) => {
      opened++;
      s.on('close', () => closed++);
    });
    const c = connect(port);
    for (let i = 0; i < 3; i++) c.request({ ':method': 'POST', ':path': '/x' }).on('error', () => {});
    await waitFor(() => opened === 3);
    c.destroy();
    await waitFor(() => closed === 3);
  });

  it('hands a stream to a sink instead of listeners, and sends a whole answer with respondWithTrailers', async () => {
    const events: string[] = [];
    let wantTrailers = 0;
    const port = await serve((s) => {
      const parts: Buffer[] = [];
      s.on('wantTrailers', () => wantTrailers++);
      s.setSink({
        onStreamData: (d) => parts.push(d),
        onStreamEnd: () => {
          events.push('end');
          s.respondWithTrailers({ ':status': 200, 'content-type': 'application/grpc+proto' }, Buffer.concat(parts), { 'grpc-status': '0', 'grpc-message': 'OK' });
        },
        onStreamClose: () => events.push(`close ${s.rstCode}`),
      });
    });
    const c = connect(port);
    const body = Buffer.alloc(100 * 1024, 3);
    const r = await request(c, '/sink', body);
    expect(r.headers[':status']).toBe(200);
    expect(r.body.equals(body)).toBe(true);
    expect(r.trailers).toMatchObject({ 'grpc-status': '0', 'grpc-message': 'OK' });
    await waitFor(() => events.length === 2);
    expect(events).toEqual(['end', `close ${ErrorCode.NO_ERROR}`]);
    expect(wantTrailers).toBe(0);
  });

  it('answers the client PING', async () => {
    const port = await serve(echo);
    const c = connect(port);
    await new Promise<void>((r) => c.once('connect', () => r()));
    await new Promise<void>((resolve, reject) => c.ping((err) => (err ? reject(err) : resolve())));
  });
});

/** A raw client: sends bytes, collects the frames the server sends. */
async function rawClient(port: number): Promise<{ socket: net.Socket; frames: { type: number; flags: number; id: number; payload: Buffer }[]; closed: () => boolean }> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  cleanups.push(() => socket.destroy());
  await new Promise<void>((r) => socket.once('connect', () => r()));
  const frames: { type: number; flags: number; id: number; payload: Buffer }[] = [];
  let buf = Buffer.alloc(0);
  let isClosed = false;
  socket.on('close', () => (isClosed = true));
  socket.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 9) {
      const len = buf.readUIntBE(0, 3);
      if (buf.length < 9 + len) break;
      frames.push({ type: buf[3]!, flags: buf[4]!, id: buf.readUInt32BE(5), payload: buf.subarray(9, 9 + len) });
      buf = buf.subarray(9 + len);
    }
  });
  return { socket, frames, closed: () => isClosed };
}

const headersFrame = (id: number, flags: number): Buffer =>
  frame(FrameType.HEADERS, 0x4 | flags, id, encodeHeaders({ ':method': 'POST', ':scheme': 'http', ':path': '/x', ':authority': 'h' }));

describe('H2Connection with raw frames', () => {
  it('ends the connection with GOAWAY PROTOCOL_ERROR on a bad preface', async () => {
    const port = await serve(echo);
    const c = await rawClient(port);
    c.socket.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n'));
    await waitFor(() => c.closed());
    const goaway = c.frames.find((f) => f.type === FrameType.GOAWAY);
    expect(goaway?.payload.readUInt32BE(4)).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  it('refuses streams beyond SETTINGS_MAX_CONCURRENT_STREAMS', async () => {
    const port = await serve(() => {}, { maxConcurrentStreams: 2 });
    const c = await rawClient(port);
    c.socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0), headersFrame(3, 0), headersFrame(5, 0)]));
    await waitFor(() => c.frames.some((f) => f.type === FrameType.RST_STREAM));
    const rst = c.frames.filter((f) => f.type === FrameType.RST_STREAM);
    expect(rst.map((f) => [f.id, f.payload.readUInt32BE(0)])).toEqual([[5, ErrorCode.REFUSED_STREAM]]);
    const settings = c.frames.find((f) => f.type === FrameType.SETTINGS && f.flags === 0)!;
    const values = new Map<number, number>();
    for (let i = 0; i < settings.payload.length; i += 6) values.set(settings.payload.readUInt16BE(i), settings.payload.readUInt32BE(i + 2));
    expect(values.get(3)).toBe(2);
  });

  it('drops a connection whose peer does not answer keepalive pings', async () => {
    const port = await serve(echo, { keepaliveIntervalMs: 50, keepaliveTimeoutMs: 100 });
    const c = await rawClient(port);
    c.socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0))]));
    await waitFor(() => c.closed(), 3000);
    expect(c.frames.some((f) => f.type === FrameType.PING && f.flags === 0)).toBe(true);
  });

  it('keeps a connection whose peer answers keepalive pings', async () => {
    const port = await serve(echo, { keepaliveIntervalMs: 50, keepaliveTimeoutMs: 100 });
    const c = connect(port);
    await new Promise((r) => setTimeout(r, 500));
    const r = await request(c, '/alive', Buffer.from('x'));
    expect(r.body.toString()).toBe('x');
  });

  it('ends the connection on a frame larger than the frame size it allows', async () => {
    const port = await serve(echo);
    const c = await rawClient(port);
    c.socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0), frame(FrameType.DATA, 0, 1, Buffer.alloc(16385))]));
    await waitFor(() => c.closed());
    const goaway = c.frames.find((f) => f.type === FrameType.GOAWAY);
    expect(goaway?.payload.readUInt32BE(4)).toBe(ErrorCode.FRAME_SIZE_ERROR);
  });

  it('resets with NO_ERROR a stream it finished before the client did', async () => {
    const port = await serve((s) => {
      s.respond({ ':status': 200 }, { endStream: true });
    });
    const c = await rawClient(port);
    c.socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0)]));
    await waitFor(() => c.frames.some((f) => f.type === FrameType.RST_STREAM));
    const h = c.frames.find((f) => f.type === FrameType.HEADERS)!;
    expect(h.flags & 0x1).toBe(1);
    expect(c.frames.find((f) => f.type === FrameType.RST_STREAM)!.payload.readUInt32BE(0)).toBe(ErrorCode.NO_ERROR);
  });
});

/** A connection over an in-memory socket that records what each socket write carried. */
function recordedConnection(
  onStream: (s: H2Stream, h: IncomingHeaders) => void,
  afterWrite: (frames: { type: number; flags: number; id: number }[]) => void = () => {},
): { socket: Duplex; writes: { type: number; flags: number; id: number }[][] } {
  const writes: { type: number; flags: number; id: number }[][] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      const frames: { type: number; flags: number; id: number }[] = [];
      for (let at = 0; at + 9 <= chunk.length; at += 9 + chunk.readUIntBE(at, 3)) {
        frames.push({ type: chunk[at + 3]!, flags: chunk[at + 4]!, id: chunk.readUInt32BE(at + 5) });
      }
      writes.push(frames);
      afterWrite(frames);
      cb();
    },
  });
  cleanups.push(() => socket.destroy());
  new H2Connection(socket, { onStream });
  return { socket, writes };
}

const isPingAck = (f: { type: number; flags: number }): boolean => f.type === FrameType.PING && (f.flags & 0x1) === 1;

describe('H2Connection PING answers', () => {
  it('sends the PING ACK in the same write as a response queued on a later loop turn', async () => {
    // Go's gRPC client sends a PING beside most requests; the response comes a turn or more later
    // (after the Raft loop's run). The ACK must not cost a socket write of its own.
    const { socket, writes } = recordedConnection((s) => {
      setImmediate(() => s.respond({ ':status': 200 }, { endStream: true }));
    });
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0))]));
    await waitFor(() => writes.length > 0);
    const before = writes.length;
    socket.emit('data', Buffer.concat([frame(FrameType.PING, 0, 0, Buffer.from('12345678')), headersFrame(1, 0x1)]));
    await waitFor(() => writes.slice(before).some((w) => w.some((f) => f.type === FrameType.HEADERS)));
    const after = writes.slice(before);
    const withResponse = after.find((w) => w.some((f) => f.type === FrameType.HEADERS))!;
    expect(withResponse.some(isPingAck)).toBe(true);
    expect(after.flat().filter(isPingAck)).toHaveLength(1);
  });

  it('sends the PING ACK with the next response also when the PING arrives right after a response with trailers', async () => {
    // A gRPC response's trailers are queued while its DATA is being framed; the PING that comes
    // with the client's next request, read before the loop's next turn, must still wait for that
    // request's response instead of leaving alone (one more write and wake-up of the client).
    const grpcLike = (s: H2Stream): void => {
      s.on('data', () => {});
      s.on('end', () => {
        setImmediate(() => {
          s.respond({ ':status': 200 }, { waitForTrailers: true });
          s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
          s.end(Buffer.from('reply'));
        });
      });
    };
    let sentNext = false;
    const { socket, writes } = recordedConnection(grpcLike, (frames) => {
      const trailersOf1 = frames.some((f) => f.type === FrameType.HEADERS && f.id === 1 && (f.flags & 0x1) === 1);
      if (!trailersOf1 || sentNext) return;
      sentNext = true;
      // The client's answer to response 1, read before the loop's next turn.
      process.nextTick(() => socket.emit('data', Buffer.concat([frame(FrameType.PING, 0, 0, Buffer.from('12345678')), headersFrame(3, 0x1)])));
    });
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0x1)]));
    await waitFor(() => writes.some((w) => w.some((f) => f.type === FrameType.HEADERS && f.id === 3 && (f.flags & 0x1) === 1)));
    const acks = writes.filter((w) => w.some(isPingAck));
    expect(acks).toHaveLength(1);
    expect(acks[0]!.some((f) => f.type === FrameType.HEADERS && f.id === 3)).toBe(true);
  });

  it('answers a PING on its own within PING_ACK_DELAY_MS when nothing else is sent', async () => {
    const { socket, writes } = recordedConnection(() => {});
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0))]));
    await waitFor(() => writes.length > 0);
    const sentAt = performance.now();
    socket.emit('data', frame(FrameType.PING, 0, 0, Buffer.from('abcdefgh')));
    await waitFor(() => writes.flat().some(isPingAck), 1000);
    // Timers on a loaded machine fire late; the bound says "a few ms", not "eventually".
    expect(performance.now() - sentAt).toBeLessThan(PING_ACK_DELAY_MS + 200);
  });
});

describe('H2Connection request headers', () => {
  it('are plain fields with nothing inherited: "constructor" and "__proto__" are headers like any other', async () => {
    const seen: IncomingHeaders[] = [];
    const { socket } = recordedConnection((_s, h) => seen.push(h));
    const block = encodeHeaders({ ':method': 'POST', ':scheme': 'http', ':path': '/x', ':authority': 'h', constructor: 'c', ['__proto__']: 'p', tostring: 't' });
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), frame(FrameType.HEADERS, 0x4, 1, block), frame(FrameType.HEADERS, 0x4, 3, block)]));
    await waitFor(() => seen.length === 2);
    for (const h of seen) {
      expect(Object.keys(h)).toEqual([':method', ':scheme', ':path', ':authority', 'constructor', '__proto__', 'tostring']);
      expect(h.constructor).toBe('c');
      expect(Object.getOwnPropertyDescriptor(h, '__proto__')?.value).toBe('p');
      expect((h as Record<string, unknown>).toString).toBeUndefined();
      expect((h as Record<string, unknown>).hasOwnProperty).toBeUndefined();
    }
  });
});

describe('H2Connection frame parsing', () => {
  it('reads the same streams whatever the chunking of the bytes (1000 random splits)', async () => {
    // Five requests, each HEADERS + two DATA frames (one padded), behind the preface and SETTINGS.
    const parts: Buffer[] = [PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0))];
    const expected = new Map<number, string>();
    for (let i = 0; i < 5; i++) {
      const id = 2 * i + 1;
      parts.push(headersFrame(id, 0));
      const a = Buffer.from(`stream-${id}-first-`.repeat(i + 1));
      const b = Buffer.from(`second-${id}`);
      const padded = Buffer.concat([Buffer.from([3]), b, Buffer.alloc(3)]);
      parts.push(frame(FrameType.DATA, 0, id, a), frame(FrameType.DATA, 0x1 | 0x8, id, padded));
      expected.set(id, a.toString() + b.toString());
    }
    const bytes = Buffer.concat(parts);
    let seed = 42;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 1000; round++) {
      const got = new Map<number, string>();
      const ended = new Set<number>();
      const socket = new Duplex({ read() {}, write(_c, _e, cb) { cb(); } });
      new H2Connection(socket, {
        onStream: (s) => {
          let text = '';
          s.on('data', (d: Buffer) => (text += d.toString()));
          s.on('end', () => {
            got.set(s.id, text);
            ended.add(s.id);
          });
        },
      });
      let at = 0;
      while (at < bytes.length) {
        const n = 1 + rand(40);
        socket.emit('data', bytes.subarray(at, at + n));
        at += n;
      }
      expect(ended.size, `round ${round}`).toBe(5);
      expect(got).toEqual(expected);
      socket.destroy();
    }
  });
});

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** An in-memory socket recording each frame header the connection writes, with its payload length. */
function framesWritten(): { socket: Duplex; frames: { type: number; flags: number; id: number; length: number }[] } {
  const frames: { type: number; flags: number; id: number; length: number }[] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      for (let at = 0; at + 9 <= chunk.length; at += 9 + chunk.readUIntBE(at, 3)) {
        frames.push({ type: chunk[at + 3]!, flags: chunk[at + 4]!, id: chunk.readUInt32BE(at + 5), length: chunk.readUIntBE(at, 3) });
      }
      cb();
    },
  });
  cleanups.push(() => socket.destroy());
  return { socket, frames };
}

describe('H2Connection sending under the connection window', () => {
  it('shares the connection window between streams a frame at a time, each stream whole and ended', async () => {
    const BODY_BYTES = 40_000;
    const { socket, frames } = framesWritten();
    new H2Connection(socket, {
      onStream: (s) => {
        s.respond({ ':status': 200 }, { waitForTrailers: true });
        s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
        s.end(Buffer.alloc(BODY_BYTES, s.id));
      },
    });
    const dataOf = (id: number): number => frames.filter((f) => f.type === FrameType.DATA && f.id === id).reduce((n, f) => n + f.length, 0);
    const ended = (id: number): boolean => frames.some((f) => f.id === id && f.type === FrameType.HEADERS && (f.flags & 0x1) === 1);

    // Three streams at once; the connection window (65535) is less than their bodies: each gets a
    // frame (16384) in turn, then stream 1 the rest of the window.
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0x1), headersFrame(3, 0x1), headersFrame(5, 0x1)]));
    await waitFor(() => dataOf(1) + dataOf(3) + dataOf(5) === 65_535);
    expect([dataOf(1), dataOf(3), dataOf(5)]).toEqual([65_535 - 2 * 16_384, 16_384, 16_384]);
    expect([ended(1), ended(3), ended(5)]).toEqual([false, false, false]);

    const update = Buffer.alloc(4);
    update.writeUInt32BE(100_000);
    socket.emit('data', frame(FrameType.WINDOW_UPDATE, 0, 0, update));
    await waitFor(() => ended(1) && ended(3) && ended(5));
    expect([dataOf(1), dataOf(3), dataOf(5)]).toEqual([BODY_BYTES, BODY_BYTES, BODY_BYTES]);
  });

  it('ends a flush at the socket high-water mark when many large streams share the window, and sends the rest as the socket drains', async () => {
    const STREAMS = 40;
    const BODY_BYTES = 100_000;
    const { socket, written, complete } = slowSocket();
    new H2Connection(socket, {
      onStream: (s) => {
        s.respond({ ':status': 200 }, { waitForTrailers: true });
        s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
        s.end(Buffer.alloc(BODY_BYTES, 1));
      },
    });
    const settings = Buffer.alloc(6);
    settings.writeUInt16BE(0x4, 0); // SETTINGS_INITIAL_WINDOW_SIZE
    settings.writeUInt32BE(1 << 20, 2);
    const update = Buffer.alloc(4);
    update.writeUInt32BE(8 << 20);
    const heads = Array.from({ length: STREAMS }, (_, i) => headersFrame(2 * i + 1, 0x1));
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, settings), frame(FrameType.WINDOW_UPDATE, 0, 0, update), ...heads]));
    // The socket holds every write (its first one unfinished): what one flush handed it stays queued.
    await waitFor(() => socket.writableLength > 200_000);
    await new Promise((r) => setImmediate(r));
    // 256 KiB high-water mark, plus the frame that crossed it and the frames' headers and HEADERS.
    expect(socket.writableLength).toBeLessThan(256 * 1024 + 16 * 1024 + 8 * 1024);
    for (let i = 0; i < 2000 && dataBytes(written()) < STREAMS * BODY_BYTES; i++) {
      complete();
      await new Promise((r) => setImmediate(r));
    }
    expect(dataBytes(written())).toBe(STREAMS * BODY_BYTES);
  });

  it('sends a small response queued behind a large one without waiting for the large one', async () => {
    const { socket, frames } = framesWritten();
    new H2Connection(socket, {
      onStream: (s) => {
        s.respond({ ':status': 200 }, { waitForTrailers: true });
        s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
        // Stream 1: a 500 KB list page; stream 3: an update's answer.
        s.end(Buffer.alloc(s.id === 1 ? 500_000 : 100, s.id));
      },
    });
    const dataOf = (id: number): number => frames.filter((f) => f.type === FrameType.DATA && f.id === id).reduce((n, f) => n + f.length, 0);
    const ended = (id: number): boolean => frames.some((f) => f.id === id && f.type === FrameType.HEADERS && (f.flags & 0x1) === 1);
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0x1), headersFrame(3, 0x1)]));
    // The window (65535) never opens further here: the small answer goes in the first flush.
    await waitFor(() => ended(3));
    expect(dataOf(3)).toBe(100);
    expect(dataOf(1)).toBe(65_535 - 100);
    expect(ended(1)).toBe(false);
  });
});

describe('H2Connection send queue bound', () => {
  it('does not keep streams the client reset while the connection window was shut', async () => {
    const { socket, frames } = framesWritten();
    const conn = new H2Connection(socket, {
      onStream: (s) => {
        s.on('error', () => {});
        s.respond({ ':status': 200 }, { waitForTrailers: true });
        s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
        // Stream 1 alone is larger than the connection window: the window stays shut after it.
        s.end(Buffer.alloc(s.id === 1 ? 100_000 : 10, 1));
      },
    });
    const queueLength = (): number => (conn as unknown as { sending: unknown[] }).sending.length;
    const rst = (id: number): Buffer => {
      const code = Buffer.alloc(4);
      code.writeUInt32BE(ErrorCode.CANCEL);
      return frame(FrameType.RST_STREAM, 0, id, code);
    };
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0x1)]));
    const dataBytes = (): number => frames.filter((f) => f.type === FrameType.DATA).reduce((n, f) => n + f.length, 0);
    await waitFor(() => dataBytes() === 65_535);
    // Fewer than the reset budget allows (past it the connection is cut off: tested with the budgets).
    const RESETS = RESET_BUDGET_BURST_STREAMS - 100;
    for (let id = 3; id < 3 + 2 * RESETS; id += 2) {
      socket.emit('data', headersFrame(id, 0x1));
      await new Promise((r) => setImmediate(r));
      socket.emit('data', rst(id));
    }
    // Stream 1 and at most a bounded number of reset streams awaiting their lazy drop.
    expect(queueLength()).toBeLessThanOrEqual(200);
    const update = Buffer.alloc(4);
    update.writeUInt32BE(100_000);
    socket.emit('data', Buffer.concat([frame(FrameType.WINDOW_UPDATE, 0, 0, update), frame(FrameType.WINDOW_UPDATE, 0, 1, update)]));
    await waitFor(() => frames.some((f) => f.id === 1 && f.type === FrameType.HEADERS && (f.flags & 0x1) === 1));
    expect(frames.filter((f) => f.type === FrameType.DATA && f.id === 1).reduce((n, f) => n + f.length, 0)).toBe(100_000);
    // No reset stream sent anything once reset.
    expect(frames.filter((f) => f.type === FrameType.DATA && f.id !== 1).length).toBe(0);
    expect(queueLength()).toBe(0);
  });
});

/** The payload bytes of the DATA frames in `out`. */
function dataBytes(out: Buffer): number {
  let n = 0;
  for (let at = 0; at + 9 <= out.length; at += 9 + out.readUIntBE(at, 3)) {
    if (out[at + 3] === FrameType.DATA) n += out.readUIntBE(at, 3);
  }
  return n;
}

/** An in-memory socket that keeps each write's callback until `complete()`: the kernel still has the bytes. */
function slowSocket(): { socket: Duplex; written: () => Buffer; complete: () => void } {
  const chunks: Buffer[] = [];
  const held: (() => void)[] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      held.push(cb);
    },
  });
  cleanups.push(() => socket.destroy());
  return { socket, written: () => Buffer.concat(chunks), complete: () => held.splice(0).forEach((cb) => cb()) };
}

describe('H2Connection and pooled response buffers', () => {
  const BODY_BYTES = 200_000;
  /** A gRPC response framed in a buffer lent by responsePool, as the unary path makes one. */
  function pooledResponse(s: H2Stream): void {
    const body = encodePooled(allocEncoding, BODY_BYTES);
    body.fill(s.id);
    s.respondWithTrailers({ ':status': 200 }, frameMessage(body), { 'grpc-status': '0' });
  }
  const windowsOpen = (): Buffer => {
    const settings = Buffer.alloc(6);
    settings.writeUInt16BE(0x4, 0); // SETTINGS_INITIAL_WINDOW_SIZE
    settings.writeUInt32BE(1 << 20, 2);
    const update = Buffer.alloc(4);
    update.writeUInt32BE(1 << 20);
    return Buffer.concat([frame(FrameType.SETTINGS, 0, 0, settings), frame(FrameType.WINDOW_UPDATE, 0, 0, update)]);
  };

  it('hands the buffer back only once the socket has written its last bytes', async () => {
    const { socket, written, complete } = slowSocket();
    new H2Connection(socket, { onStream: pooledResponse });
    const returned = responsePool.returned;
    socket.emit('data', Buffer.concat([PREFACE, windowsOpen(), headersFrame(1, 0x1)]));
    // The whole response handed to the socket (the first write in its hands, the rest queued
    // behind it), none of its writes done: the buffer stays lent.
    await waitFor(() => socket.writableLength > BODY_BYTES);
    await new Promise((r) => setImmediate(r));
    expect(responsePool.returned).toBe(returned);
    // The socket finishes its writes one by one; the buffer comes back after the last.
    for (let i = 0; i < 100 && socket.writableLength > 0; i++) {
      complete();
      await new Promise((r) => setImmediate(r));
      if (socket.writableLength > 0) expect(responsePool.returned).toBe(returned);
    }
    await waitFor(() => responsePool.returned === returned + 1);
    expect(dataBytes(written())).toBe(5 + BODY_BYTES);
  });

  it('never hands back a buffer whose stream was reset before it was sent whole', async () => {
    const { socket, complete } = slowSocket();
    new H2Connection(socket, { onStream: pooledResponse });
    const returned = responsePool.returned;
    // Default windows (65535): most of the response waits, then the client resets the stream.
    socket.emit('data', Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), headersFrame(1, 0x1)]));
    await new Promise((r) => setImmediate(r));
    const cancel = Buffer.alloc(4);
    cancel.writeUInt32BE(ErrorCode.CANCEL);
    socket.emit('data', frame(FrameType.RST_STREAM, 0, 1, cancel));
    await new Promise((r) => setImmediate(r));
    complete();
    await new Promise((r) => setTimeout(r, 20));
    expect(responsePool.returned).toBe(returned);
  });
});
