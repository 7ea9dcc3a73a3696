// The HTTP/2 :authority fix: Go gRPC clients dialled with a URL (etcdctl 3.4 endpoint status,
// hashkv, defrag with --endpoints=http://...) send `:authority: http://host:port`, which Node's
// HTTP/2 stack would reset; the listener strips the scheme from the first header block.
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthorityRewriter, injectWithAuthorityFix, MAX_PENDING_BYTES, rewriteHeaderBlock, stripScheme } from '../../../src/api/h2_authority';
import { huffmanDecode, huffmanEncode } from '../../../src/h2/huffman';
import { etcdctl } from '../../helpers/etcdctl';
import { EtcdMember, startEtcd } from '../../helpers/etcd-process';
import { waitFor } from './harness';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(streamId, 5);
  return Buffer.concat([h, payload]);
}

const SETTINGS = frame(0x4, 0, 0, Buffer.from([0, 4, 0, 0, 0xff, 0xff]));
const WINDOW_UPDATE = frame(0x8, 0, 0, Buffer.from([0, 0, 0xff, 0]));

function str(s: string, huffman: boolean): Buffer {
  const raw = Buffer.from(s, 'latin1');
  const body = huffman ? huffmanEncode(raw) : raw;
  expect(body.length).toBeLessThan(127);
  return Buffer.concat([Buffer.from([(huffman ? 0x80 : 0) | body.length]), body]);
}

/** A typical gRPC request block: :method POST (indexed 3), :scheme http (indexed 6), then `authority`. */
function block(authority: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from([0x83, 0x86]),
    authority,
    Buffer.from([0x44]), // :path, incremental indexing, static name 4
    str('/etcdserverpb.Maintenance/Status', true),
    Buffer.from([0x40]), // new name, incremental indexing
    str('content-type', false),
    str('application/grpc', true),
  ]);
}

const END_HEADERS = 0x4;
const END_STREAM = 0x1;

function feedAll(r: AuthorityRewriter, chunks: Buffer[]): Buffer {
  return Buffer.concat(chunks.map((c) => r.push(c)));
}

describe('hpack Huffman', () => {
  it('matches the RFC 7541 C.4.1 example and round-trips', () => {
    expect(huffmanEncode(Buffer.from('www.example.com')).toString('hex')).toBe('f1e3c2e5f23a6ba0ab90f4ff');
    for (const s of ['http://127.0.0.1:2379', 'localhost:2379', '\u0000\u00ff~{}', '']) {
      expect(huffmanDecode(huffmanEncode(Buffer.from(s, 'latin1')))?.toString('latin1')).toBe(s);
    }
    // Padding of 8 or more bits, or padding that is not all ones, is malformed.
    expect(huffmanDecode(Buffer.from([0xff]))).toBeUndefined();
    expect(huffmanDecode(Buffer.from([0x00]))).toBeUndefined();
  });
});

describe('stripScheme', () => {
  it('strips any scheme and a trailing path, leaves plain authorities alone', () => {
    expect(stripScheme('http://localhost:2379')).toBe('localhost:2379');
    expect(stripScheme('https://[::1]:2379/')).toBe('[::1]:2379');
    expect(stripScheme('unix://localhost:1234')).toBe('localhost:1234');
    expect(stripScheme('localhost:2379')).toBeUndefined();
  });
});

describe('AuthorityRewriter', () => {
  for (const huffman of [false, true]) {
    for (const rep of [0x41, 0x01, 0x11]) {
      it(`strips the scheme (huffman=${huffman}, representation 0x${rep.toString(16)}, indexed name)`, () => {
        const before = block(Buffer.concat([Buffer.from([rep]), str('http://127.0.0.1:2379', huffman)]));
        const after = block(Buffer.concat([Buffer.from([rep]), str('127.0.0.1:2379', false)]));
        const input = Buffer.concat([PREFACE, SETTINGS, WINDOW_UPDATE, frame(0x1, END_HEADERS, 1, before), frame(0x0, END_STREAM, 1, Buffer.alloc(5))]);
        const expected = Buffer.concat([PREFACE, SETTINGS, WINDOW_UPDATE, frame(0x1, END_HEADERS, 1, after), frame(0x0, END_STREAM, 1, Buffer.alloc(5))]);
        const r = new AuthorityRewriter();
        expect(r.push(input).equals(expected)).toBe(true);
        expect(r.passthrough).toBe(true);
      });
    }
  }

  it('handles a literal ":authority" name and a Huffman-coded name', () => {
    for (const nameHuffman of [false, true]) {
      const before = block(Buffer.concat([Buffer.from([0x00]), str(':authority', nameHuffman), str('https://h:1', true)]));
      const after = block(Buffer.concat([Buffer.from([0x00]), str(':authority', nameHuffman), str('h:1', false)]));
      expect(rewriteHeaderBlock(before)?.equals(after)).toBe(true);
    }
  });

  it('forwards a block without a scheme byte for byte', () => {
    const input = Buffer.concat([PREFACE, SETTINGS, frame(0x1, END_HEADERS, 1, block(Buffer.concat([Buffer.from([0x41]), str('127.0.0.1:2379', true)])))]);
    const r = new AuthorityRewriter();
    expect(r.push(input).equals(input)).toBe(true);
    expect(r.passthrough).toBe(true);
  });

  it('gives the same bytes however the stream is split into TCP chunks', () => {
    const before = block(Buffer.concat([Buffer.from([0x41]), str('http://localhost:2379', true)]));
    const after = block(Buffer.concat([Buffer.from([0x41]), str('localhost:2379', false)]));
    const tail = frame(0x0, END_STREAM, 1, Buffer.alloc(40, 7));
    const input = Buffer.concat([PREFACE, SETTINGS, WINDOW_UPDATE, frame(0x1, END_HEADERS, 1, before), tail]);
    const expected = Buffer.concat([PREFACE, SETTINGS, WINDOW_UPDATE, frame(0x1, END_HEADERS, 1, after), tail]);
    for (const size of [1, 2, 3, 7, 9, 24, 25, 33, 100]) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < input.length; i += size) chunks.push(input.subarray(i, i + size));
      const r = new AuthorityRewriter();
      const out: Buffer[] = [];
      let forwardedBeforeHeaders = 0;
      for (const c of chunks) {
        const o = r.push(c);
        out.push(o);
        if (!r.passthrough) forwardedBeforeHeaders += o.length;
      }
      expect(Buffer.concat(out).equals(expected), `chunk size ${size}`).toBe(true);
      // Complete frames ahead of the HEADERS are not held back (the client waits for the server's reply).
      expect(forwardedBeforeHeaders, `chunk size ${size}`).toBeGreaterThanOrEqual(PREFACE.length + SETTINGS.length);
    }
  });

  it('keeps padding and priority fields', () => {
    const before = block(Buffer.concat([Buffer.from([0x41]), str('http://h:2379', false)]));
    const after = block(Buffer.concat([Buffer.from([0x41]), str('h:2379', false)]));
    const prio = Buffer.from([0x80, 0, 0, 3, 15]);
    const pad = Buffer.alloc(6);
    const wrap = (b: Buffer): Buffer => frame(0x1, END_HEADERS | 0x8 | 0x20, 1, Buffer.concat([Buffer.from([pad.length]), prio, b, pad]));
    const r = new AuthorityRewriter();
    expect(r.push(Buffer.concat([PREFACE, wrap(before)])).equals(Buffer.concat([PREFACE, wrap(after)]))).toBe(true);
  });

  it('passes through a block continued in CONTINUATION frames, and everything after the first HEADERS', () => {
    const withScheme = block(Buffer.concat([Buffer.from([0x41]), str('http://h:1', false)]));
    const r1 = new AuthorityRewriter();
    const continued = Buffer.concat([PREFACE, frame(0x1, 0, 1, withScheme.subarray(0, 5)), frame(0x9, END_HEADERS, 1, withScheme.subarray(5))]);
    expect(feedAll(r1, [continued]).equals(continued)).toBe(true);

    const r2 = new AuthorityRewriter();
    r2.push(Buffer.concat([PREFACE, frame(0x1, END_HEADERS, 1, block(Buffer.from([0x81])))]));
    expect(r2.passthrough).toBe(true);
    const second = frame(0x1, END_HEADERS, 3, withScheme);
    expect(r2.push(second)).toBe(second);
  });

  it('never holds more than the bound: a huge first HEADERS frame streams through unchanged', () => {
    const r = new AuthorityRewriter();
    const big = frame(0x1, END_HEADERS, 1, Buffer.alloc(MAX_PENDING_BYTES + 100, 0x81));
    const input = Buffer.concat([PREFACE, big]);
    const out: Buffer[] = [];
    let maxHeldBytes = 0;
    let inBytes = 0;
    let outBytes = 0;
    for (let i = 0; i < input.length; i += 4096) {
      const o = r.push(input.subarray(i, i + 4096));
      inBytes += Math.min(4096, input.length - i);
      outBytes += o.length;
      maxHeldBytes = Math.max(maxHeldBytes, inBytes - outBytes);
      out.push(o);
    }
    expect(r.passthrough).toBe(true);
    expect(maxHeldBytes).toBeLessThan(16);
    expect(Buffer.concat(out).equals(input)).toBe(true);
  });

  it('drops the first SETTINGS ACK when asked, and only that one', () => {
    const ack = frame(0x4, 0x1, 0, Buffer.alloc(0));
    const headers = frame(0x1, END_HEADERS, 1, block(Buffer.concat([Buffer.from([0x41]), str('http://h:1', true)])));
    const fixed = frame(0x1, END_HEADERS, 1, block(Buffer.concat([Buffer.from([0x41]), str('h:1', false)])));
    for (const order of ['ack-first', 'headers-first']) {
      const r = new AuthorityRewriter({ dropFirstSettingsAck: true });
      const mid = order === 'ack-first' ? [ack, headers] : [headers, ack];
      const input = Buffer.concat([PREFACE, SETTINGS, ...mid, ack]);
      const first = r.push(input.subarray(0, input.length - ack.length));
      expect(r.passthrough, order).toBe(true);
      const second = r.push(ack);
      expect(Buffer.concat([first, second]).equals(Buffer.concat([PREFACE, SETTINGS, fixed, ack])), order).toBe(true);
    }
    // Not done until the ACK has come.
    const r = new AuthorityRewriter({ dropFirstSettingsAck: true });
    r.push(Buffer.concat([PREFACE, SETTINGS, headers]));
    expect(r.passthrough).toBe(false);
  });

  it('leaves malformed blocks alone', () => {
    expect(rewriteHeaderBlock(Buffer.from([0x41, 0x7f]))).toBeUndefined(); // length runs off the end
    expect(rewriteHeaderBlock(Buffer.from([0x41, 0x85, 0, 0, 0, 0, 0]))).toBeUndefined(); // bad Huffman
  });
});

describe('injectWithAuthorityFix', () => {
  const echo = {
    Echo: {
      path: '/t.T/Echo',
      requestStream: false,
      responseStream: false,
      requestSerialize: (b: Buffer): Buffer => b,
      requestDeserialize: (b: Buffer): Buffer => b,
      responseSerialize: (b: Buffer): Buffer => b,
      responseDeserialize: (b: Buffer): Buffer => b,
    },
  } as const;

  /** A gRPC server behind the fix, recording whether each connection got the raw socket. */
  async function serve(waitMs: number): Promise<{ port: number; paths: string[]; close: () => void }> {
    const server = new grpc.Server();
    server.addService(echo, { Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) });
    const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    const paths: string[] = [];
    const sockets = new Set<net.Socket>();
    const srv = net.createServer((s) => {
      sockets.add(s);
      // As the real listener does: a client resetting its connection (etcdctl exiting) must not
      // become an uncaught error once HTTP/2 has let go of the socket.
      s.on('error', () => undefined);
      const first = (head: Buffer): void => {
        s.off('data', first);
        s.pause();
        injectWithAuthorityFix(s, head, (c) => {
          paths.push(c instanceof net.Socket ? 'raw' : 'wrapped');
          injector.injectConnection(c);
        }, waitMs);
      };
      s.on('data', first);
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    return {
      port: (srv.address() as net.AddressInfo).port,
      paths,
      close: () => {
        injector.destroy();
        server.forceShutdown();
        for (const s of sockets) s.destroy();
        srv.close();
      },
    };
  }

  it('gives grpc-js clients and Go clients (etcdctl, with and without a scheme) the raw socket', async () => {
    const s = await serve(5000);
    try {
      const Client = grpc.makeGenericClientConstructor(echo, 'T');
      const c = new Client(`127.0.0.1:${s.port}`, grpc.credentials.createInsecure());
      const reply = await new Promise<Buffer>((res, rej) => c.makeUnaryRequest('/t.T/Echo', (b: Buffer) => b, (b: Buffer) => b, Buffer.from('hi'), (e, r) => (e ? rej(e) : res(r!))));
      expect(reply.toString()).toBe('hi');
      c.close();
      for (const ep of [`http://127.0.0.1:${s.port}`, `127.0.0.1:${s.port}`]) {
        // The server has no etcd services: reaching it means "Unimplemented", not a reset stream.
        const r = await etcdctl(['endpoint', 'status'], { endpoint: ep });
        expect(r.stderr).toContain('Unimplemented');
        expect(r.stderr).not.toContain('PROTOCOL_ERROR');
      }
      expect(s.paths).toEqual(['raw', 'raw', 'raw']);
    } finally {
      s.close();
    }
  });

  it('wraps a connection that sends no request in time, and it still works', async () => {
    const s = await serve(50);
    const sock = net.connect(s.port, '127.0.0.1');
    try {
      let reply = Buffer.alloc(0);
      sock.on('data', (d: Buffer) => (reply = Buffer.concat([reply, d])));
      sock.write(Buffer.concat([PREFACE, frame(0x4, 0, 0, Buffer.alloc(0))]));
      await waitFor(() => s.paths.length === 1, 5000, 'hand-over');
      expect(s.paths).toEqual(['wrapped']);
      // The listener's own SETTINGS come first; ACK it, then ping the HTTP/2 stack behind.
      sock.write(Buffer.concat([frame(0x4, 0x1, 0, Buffer.alloc(0)), frame(0x6, 0, 0, Buffer.from('pingpong'))]));
      await waitFor(() => reply.includes(frame(0x6, 0x1, 0, Buffer.from('pingpong'))), 5000, 'PING ACK');
      expect(reply.subarray(0, 9).equals(frame(0x4, 0, 0, Buffer.alloc(0)))).toBe(true);
    } finally {
      sock.destroy();
      s.close();
    }
  });
});

describe('etcdctl with a scheme in --endpoints (Go gRPC sends it in :authority)', () => {
  let m: EtcdMember;
  beforeAll(async () => {
    m = await startEtcd();
  });
  afterAll(async () => {
    await m?.stop();
  });

  for (const args of [['endpoint', 'status'], ['endpoint', 'hashkv'], ['defrag'], ['put', 'k', 'v']]) {
    it(`etcdctl --endpoints=http://... ${args.join(' ')}`, async () => {
      const r = await etcdctl(args, { endpoint: m.clientUrl });
      expect(r.code, `${r.stderr}\n${m.logs().slice(-2000)}`).toBe(0);
      expect(r.stderr).not.toContain('PROTOCOL_ERROR');
      if (args[0] === 'endpoint' || args[0] === 'defrag') expect(r.stdout).toContain(m.clientUrl);
    });
  }
});
