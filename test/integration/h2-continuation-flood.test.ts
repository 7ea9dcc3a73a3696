// One unauthenticated connection must not take a member down (issue 51): a HEADERS frame without
// END_HEADERS followed by a flood of empty CONTINUATION frames (each adds nothing to the header
// block's size, so a bound on bytes alone never trips) used to grow the heap until the process died.
// The member now ends that connection with GOAWAY (ENHANCE_YOUR_CALM) and goes on serving others.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode, FrameType, PREFACE, frame } from '../../src/h2/frames';
import { encodeHeaders } from '../../src/h2/hpack';
import { startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc } from '../helpers/grpc';

/** Empty CONTINUATIONs sent (9 bytes each: ~9 MB), in writes of this many frames. */
const FLOOD_FRAMES = 1_000_000;
const FRAMES_PER_WRITE = 10_000;
const CLOSE_TIMEOUT_MS = 20_000;

let m: EtcdMember | undefined;
afterAll(async () => {
  await m?.stop();
});

/** Sends the flood; resolves with every frame type and GOAWAY error code the server sent before it closed. */
function flood(port: number): Promise<{ frames: number[]; goawayCodes: number[]; sentFrames: number }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${CLOSE_TIMEOUT_MS} ms`));
    }, CLOSE_TIMEOUT_MS);
    let inbound = Buffer.alloc(0);
    const frames: number[] = [];
    const goawayCodes: number[] = [];
    let sentFrames = 0;
    let closed = false;
    socket.on('data', (d: Buffer) => {
      inbound = Buffer.concat([inbound, d]);
      while (inbound.length >= 9) {
        const len = inbound.readUIntBE(0, 3);
        if (inbound.length < 9 + len) break;
        const type = inbound[3]!;
        frames.push(type);
        if (type === FrameType.GOAWAY) goawayCodes.push(inbound.readUInt32BE(9 + 4));
        inbound = inbound.subarray(9 + len);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ frames, goawayCodes, sentFrames });
    });
    socket.on('connect', () => {
      const block = encodeHeaders({ ':method': 'POST', ':scheme': 'http', ':path': '/etcdserverpb.KV/Range', ':authority': 'x', 'content-type': 'application/grpc' });
      socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)), frame(FrameType.HEADERS, 0, 1, block)]));
      const chunk = Buffer.concat(Array.from({ length: FRAMES_PER_WRITE }, () => frame(FrameType.CONTINUATION, 0, 1, Buffer.alloc(0))));
      const pump = (): void => {
        while (!closed && sentFrames < FLOOD_FRAMES) {
          sentFrames += FRAMES_PER_WRITE;
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

describe('HTTP/2 CONTINUATION flood', () => {
  it('ends the flooding connection with ENHANCE_YOUR_CALM and keeps serving', { timeout: 60_000 }, async () => {
    m = await startEtcd();
    const port = Number(m.clientHostPort.split(':')[1]);
    const r = await flood(port);
    expect(r.goawayCodes).toEqual([ErrorCode.ENHANCE_YOUR_CALM]);
    // Cut off long before the flood's end.
    expect(r.sentFrames).toBeLessThan(FLOOD_FRAMES);
    expect(m.proc.exitCode).toBeNull();
    const client = new EtcdGrpc(m.clientHostPort);
    try {
      const put = await client.unary('KV', 'Put', { key: Buffer.from('after-flood'), value: Buffer.from('ok') });
      expect(Number((put['header'] as Record<string, unknown>)['revision'])).toBeGreaterThan(1);
    } finally {
      client.close();
    }
  });
});
