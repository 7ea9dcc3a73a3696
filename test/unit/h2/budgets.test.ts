// What one HTTP/2 connection's peer can make the server keep or do is bounded (issue 51): ACKs it
// does not read (Go's maxQueuedControlFrames), output it does not read (reading pauses), streams
// it resets (rapid reset, nghttp2's stream reset rate limit), frames that do nothing (nghttp2's
// glitch rate limit). Over a budget, the connection gets GOAWAY ENHANCE_YOUR_CALM and is closed.
import http2 from 'node:http2';
import net from 'node:net';
import { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import {
  GLITCH_BUDGET_BURST_FRAMES,
  GOAWAY_LINGER_MS,
  H2Connection,
  MAX_QUEUED_CONTROL_FRAMES,
  READ_PAUSE_UNSENT_BYTES,
  RESET_BUDGET_BURST_STREAMS,
  type CutOffReason,
  type H2ConnectionOptions,
} from '../../../src/h2/connection';
import type { H2Stream } from '../../../src/h2/stream';
import { ErrorCode, FrameType, PREFACE, frame, u32Frame } from '../../../src/h2/frames';
import { encodeHeaders } from '../../../src/h2/hpack';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

function parseFrames(bytes: Buffer): Frame[] {
  const frames: Frame[] = [];
  for (let at = 0; at + 9 <= bytes.length; ) {
    const len = bytes.readUIntBE(at, 3);
    frames.push({ type: bytes[at + 3]!, flags: bytes[at + 4]!, id: bytes.readUInt32BE(at + 5) & 0x7fffffff, payload: bytes.subarray(at + 9, at + 9 + len) });
    at += 9 + len;
  }
  return frames;
}

/**
 * An in-memory socket. `peerReads`: each write is done at once (the peer reads what we send);
 * otherwise writes are held until `complete()`, as by a kernel whose buffers the peer never empties.
 */
function memorySocket(peerReads: boolean): { socket: Duplex; written: () => Buffer; complete: () => void } {
  const chunks: Buffer[] = [];
  const held: (() => void)[] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      if (peerReads) cb();
      else held.push(cb);
    },
  });
  cleanups.push(() => socket.destroy());
  return { socket, written: () => Buffer.concat(chunks), complete: () => held.splice(0).forEach((cb) => cb()) };
}

/** A connection on `socket` whose cut-offs are recorded. */
function connect(socket: Duplex, onStream: H2ConnectionOptions['onStream'] = () => {}, opts: Partial<H2ConnectionOptions> = {}): CutOffReason[] {
  const cutOffs: CutOffReason[] = [];
  new H2Connection(socket, { onStream, onCutOff: (r) => cutOffs.push(r), ...opts });
  return cutOffs;
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
const EMPTY = Buffer.alloc(0);
const START = Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, EMPTY)]);
const repeat = (n: number, f: (i: number) => Buffer): Buffer => Buffer.concat(Array.from({ length: n }, (_, i) => f(i)));
const headersFrame = (id: number, flags = 0): Buffer =>
  frame(FrameType.HEADERS, 0x4 | flags, id, encodeHeaders({ ':method': 'POST', ':scheme': 'http', ':path': '/x', ':authority': 'h' }));
const goawayCodes = (bytes: Buffer): number[] => parseFrames(bytes).filter((f) => f.type === FrameType.GOAWAY).map((f) => f.payload.readUInt32BE(4));

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('control frames a peer does not read', () => {
  it('cuts the connection off past MAX_QUEUED_CONTROL_FRAMES unread, with GOAWAY ENHANCE_YOUR_CALM after what was already written', async () => {
    const { socket, written, complete } = memorySocket(false);
    const cutOffs = connect(socket);
    // Our SETTINGS and WINDOW_UPDATE, and the ACK of the client's SETTINGS: 3 control frames.
    socket.emit('data', START);
    await turn();
    socket.emit('data', repeat(MAX_QUEUED_CONTROL_FRAMES - 3, () => frame(FrameType.SETTINGS, 0, 0, EMPTY)));
    await turn();
    expect(cutOffs).toEqual([]);
    expect(socket.writableEnded).toBe(false);
    socket.emit('data', frame(FrameType.PING, 0, 0, Buffer.alloc(8)));
    expect(cutOffs).toEqual(['control_frames']);
    expect(socket.writableEnded).toBe(true);
    // The peer reads at last: the ACKs already in the socket, then the GOAWAY; the PING's ACK was dropped.
    for (let i = 0; i < 100 && socket.writableLength > 0; i++) {
      complete();
      await turn();
    }
    const frames = parseFrames(written());
    expect(frames.at(-1)?.type).toBe(FrameType.GOAWAY);
    expect(goawayCodes(written())).toEqual([ErrorCode.ENHANCE_YOUR_CALM]);
    expect(frames.filter((f) => f.type === FrameType.SETTINGS && f.flags === 1)).toHaveLength(MAX_QUEUED_CONTROL_FRAMES - 2);
    expect(frames.some((f) => f.type === FrameType.PING)).toBe(false);
  });

  it('counts only the ACKs not yet read: a peer that reads them may send any number', async () => {
    const { socket, written } = memorySocket(true);
    const cutOffs = connect(socket);
    socket.emit('data', START);
    const CHUNKS = 30;
    const PER_CHUNK = MAX_QUEUED_CONTROL_FRAMES / 10;
    for (let i = 0; i < CHUNKS; i++) {
      socket.emit('data', repeat(PER_CHUNK, (j) => (j % 2 === 0 ? frame(FrameType.SETTINGS, 0, 0, EMPTY) : frame(FrameType.PING, 0, 0, Buffer.alloc(8)))));
      await turn();
    }
    await waitFor(() => parseFrames(written()).filter((f) => f.flags === 1).length === 1 + CHUNKS * PER_CHUNK);
    expect(cutOffs).toEqual([]);
    expect(socket.writableEnded).toBe(false);
  });

  it('stops reading while more than READ_PAUSE_UNSENT_BYTES wait unread, and reads again once they are', async () => {
    const { socket, complete } = memorySocket(false);
    // Each request gets an 8 KB header block at once.
    const PAD = 'p'.repeat(8 * 1024);
    const cutOffs = connect(socket, (s: H2Stream) => s.respond({ ':status': 200, 'x-pad': PAD }, { endStream: true }));
    socket.emit('data', START);
    const requests = (from: number, n: number): Buffer => repeat(n, (i) => headersFrame(from + 2 * i, 0x1));
    const perRequest = PAD.length;
    const under = Math.floor(READ_PAUSE_UNSENT_BYTES / perRequest / 2);
    socket.emit('data', requests(1, under));
    expect(socket.isPaused()).toBe(false);
    socket.emit('data', requests(1 + 2 * under, under + 10));
    expect(socket.isPaused()).toBe(true);
    // The peer reads everything: the socket drains, reading resumes.
    for (let i = 0; i < 1000 && socket.isPaused(); i++) {
      complete();
      await turn();
    }
    expect(socket.isPaused()).toBe(false);
    expect(cutOffs).toEqual([]);
  });
});

describe('rapid reset', () => {
  const rst = (id: number): Buffer => u32Frame(FrameType.RST_STREAM, id, ErrorCode.CANCEL);
  // Well past what the bucket refills in the seconds a slow machine may take.
  const OVER = 300;

  it('cuts off a client that resets more than RESET_BUDGET_BURST_STREAMS streams it just opened', async () => {
    const { socket, written } = memorySocket(true);
    const aborted: number[] = [];
    const cutOffs = connect(socket, (s) => s.on('close', () => aborted.push(s.id)));
    socket.emit('data', START);
    socket.emit('data', repeat(RESET_BUDGET_BURST_STREAMS, (i) => Buffer.concat([headersFrame(1 + 2 * i), rst(1 + 2 * i)])));
    await turn();
    expect(cutOffs).toEqual([]);
    expect(aborted).toHaveLength(RESET_BUDGET_BURST_STREAMS);
    const next = 1 + 2 * RESET_BUDGET_BURST_STREAMS;
    socket.emit('data', repeat(OVER, (i) => Buffer.concat([headersFrame(next + 2 * i), rst(next + 2 * i)])));
    expect(cutOffs).toEqual(['rapid_reset']);
    await turn();
    expect(goawayCodes(written())).toEqual([ErrorCode.ENHANCE_YOUR_CALM]);
  });

  it('does not count resets of streams the server had already finished', async () => {
    const { socket, written } = memorySocket(true);
    const cutOffs = connect(socket, (s) => s.respond({ ':status': 200 }, { endStream: true }));
    socket.emit('data', START);
    socket.emit('data', repeat(3 * RESET_BUDGET_BURST_STREAMS, (i) => Buffer.concat([headersFrame(1 + 2 * i), rst(1 + 2 * i)])));
    await turn();
    expect(cutOffs).toEqual([]);
    expect(goawayCodes(written())).toEqual([]);
  });

  it('counts streams the server resets for what the client sent (MadeYouReset: a zero WINDOW_UPDATE)', async () => {
    const { socket, written } = memorySocket(true);
    const cutOffs = connect(socket);
    socket.emit('data', START);
    const zeroUpdate = (id: number): Buffer => u32Frame(FrameType.WINDOW_UPDATE, id, 0);
    socket.emit('data', repeat(RESET_BUDGET_BURST_STREAMS + OVER, (i) => Buffer.concat([headersFrame(1 + 2 * i), zeroUpdate(1 + 2 * i)])));
    expect(cutOffs).toEqual(['rapid_reset']);
    await turn();
    expect(goawayCodes(written())).toEqual([ErrorCode.ENHANCE_YOUR_CALM]);
  });
});

describe('frames that do nothing', () => {
  const OVER = 2000;
  const padded = (id: number): Buffer => frame(FrameType.DATA, 0x8, id, Buffer.from([3, 0, 0, 0]));
  const kinds: [string, (i: number) => Buffer][] = [
    ['empty DATA', () => frame(FrameType.DATA, 0, 1, EMPTY)],
    ['DATA with padding only', () => padded(1)],
    ['PRIORITY', () => frame(FrameType.PRIORITY, 0, 1, Buffer.from([0, 0, 0, 0, 16]))],
    ['an unknown frame type', () => frame(0x20 as FrameType, 0, 0, EMPTY)],
    ['SETTINGS ACK', () => frame(FrameType.SETTINGS, 0x1, 0, EMPTY)],
    ['PING ACK', () => frame(FrameType.PING, 0x1, 0, Buffer.alloc(8))],
    ['HEADERS without fields (trailers)', () => frame(FrameType.HEADERS, 0x4 | 0x1, 1, EMPTY)],
  ];

  it.each(kinds)('cuts off a flood of %s past GLITCH_BUDGET_BURST_FRAMES', async (_kind, make) => {
    const { socket, written } = memorySocket(true);
    const cutOffs = connect(socket);
    socket.emit('data', Buffer.concat([START, headersFrame(1)]));
    socket.emit('data', repeat(GLITCH_BUDGET_BURST_FRAMES, make));
    await turn();
    expect(cutOffs).toEqual([]);
    socket.emit('data', repeat(OVER, make));
    expect(cutOffs).toEqual(['empty_frames']);
    await turn();
    expect(goawayCodes(written())).toEqual([ErrorCode.ENHANCE_YOUR_CALM]);
  });

  it('does not count DATA that carries bytes, nor an empty DATA that ends its stream', async () => {
    const { socket, written } = memorySocket(true);
    const cutOffs = connect(socket, (s) => s.on('data', () => {}));
    socket.emit('data', START);
    for (let round = 0; round < 3; round++) {
      const id = 1 + 2 * round;
      socket.emit('data', Buffer.concat([headersFrame(id), repeat(GLITCH_BUDGET_BURST_FRAMES, () => frame(FrameType.DATA, 0, id, Buffer.from('x'))), frame(FrameType.DATA, 0x1, id, EMPTY)]));
      await turn();
    }
    expect(cutOffs).toEqual([]);
    expect(goawayCodes(written())).toEqual([]);
  });
});

describe('honest clients', () => {
  it("never trip a budget: Node's http2 client with pings, a settings change, 1500 requests and 600 cancelled ones", async () => {
    const cutOffs: CutOffReason[] = [];
    const srv = net.createServer((socket) => {
      socket.on('error', () => {});
      new H2Connection(socket, {
        onCutOff: (r) => cutOffs.push(r),
        onStream: (s, h) => {
          s.on('data', () => {});
          // Requests to /slow wait for the client to cancel them.
          if (h[':path'] === '/slow') return;
          s.on('end', () => s.respondWithTrailers({ ':status': 200 }, Buffer.from('ok'), { 'grpc-status': '0' }));
        },
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const client = http2.connect(`http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`);
    cleanups.push(() => {
      client.destroy();
      srv.close();
    });
    let goaway = false;
    client.on('goaway', () => (goaway = true));
    client.on('error', () => {});
    const call = (path: string): Promise<void> =>
      new Promise((resolve, reject) => {
        const req = client.request({ ':method': 'POST', ':path': path });
        req.on('data', () => {});
        req.on('end', () => resolve());
        req.on('error', reject);
        req.end(Buffer.from('q'));
      });
    for (let round = 0; round < 3; round++) {
      const slow = Array.from({ length: 200 }, () => {
        const req = client.request({ ':method': 'POST', ':path': '/slow' });
        req.on('error', () => {});
        return req;
      });
      await Promise.all(Array.from({ length: 500 }, () => call('/fast')));
      for (let i = 0; i < 10; i++) await new Promise<void>((resolve, reject) => client.ping((err) => (err ? reject(err) : resolve())));
      await new Promise<void>((resolve) => client.settings({ headerTableSize: 1024 * (round + 1) }, () => resolve()));
      for (const req of slow) req.close(http2.constants.NGHTTP2_CANCEL);
    }
    await call('/fast');
    expect(cutOffs).toEqual([]);
    expect(goaway).toBe(false);
  });
});

describe('after GOAWAY', () => {
  it('closes the socket within GOAWAY_LINGER_MS of the GOAWAY even if the peer never closes its side', async () => {
    let serverSocket: net.Socket | undefined;
    const srv = net.createServer((socket) => {
      serverSocket = socket;
      socket.on('error', () => {});
      new H2Connection(socket, { onStream: () => {} });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    // allowHalfOpen: the client does not answer the server's FIN with its own.
    const client = net.connect({ port: (srv.address() as net.AddressInfo).port, host: '127.0.0.1', allowHalfOpen: true });
    client.on('error', () => {});
    cleanups.push(() => {
      client.destroy();
      srv.close();
    });
    let got = Buffer.alloc(0);
    client.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
    await new Promise<void>((r) => client.once('connect', () => r()));
    client.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n'));
    await waitFor(() => goawayCodes(got).length > 0);
    const goawayAt = performance.now();
    expect(goawayCodes(got)).toEqual([ErrorCode.PROTOCOL_ERROR]);
    // The client keeps talking; the server reads and drops it, then closes.
    const timer = setInterval(() => client.write(Buffer.alloc(1000)), 20);
    cleanups.push(() => clearInterval(timer));
    await waitFor(() => serverSocket?.destroyed === true, GOAWAY_LINGER_MS + 3000);
    expect(performance.now() - goawayAt).toBeGreaterThan(GOAWAY_LINGER_MS / 2);
  });
});
