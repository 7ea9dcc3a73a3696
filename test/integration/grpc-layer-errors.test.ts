// Errors that come from the gRPC layer rather than from etcd, as clients see them: etcd's are
// grpc-go's texts and codes, and clients match them (retry policies on the code, people on the
// text). Sent with a plain gRPC client to ours and the real etcd 3.4, 3.6 and 3.7 in the same run.
import * as grpc from '@grpc/grpc-js';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { referenceEtcd } from '../helpers/reference';

const SERVERS: Array<[string, string | undefined]> = [
  ['ours', undefined],
  ['etcd 3.4', '/usr/bin/etcd'],
  ['etcd 3.6', referenceEtcd('3.6').etcd],
  ['etcd 3.7', referenceEtcd('3.7').etcd],
];

/** A raw unary call with `body` as the message bytes; resolves with the status it ended with. */
function rawUnary(target: string, path: string, body: Buffer): Promise<{ code: number; details: string }> {
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      body,
      { deadline: Date.now() + 10_000 },
      (e) => {
        client.close();
        resolve(e ? { code: e.code, details: e.details } : { code: 0, details: '' });
      },
    );
  });
}

/** gRPC frames sent as they are (flag byte, length, message) on one HTTP/2 stream; the status it ended with. */
function rawFrames(target: string, path: string, payload: Buffer): Promise<{ code: number; details: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://${target}`);
    session.on('error', reject);
    const s = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
    let status: { code: number; details: string } | null = null;
    const take = (h: http2.IncomingHttpHeaders): void => {
      if (h['grpc-status'] !== undefined) status = { code: Number(h['grpc-status']), details: decodeURIComponent(String(h['grpc-message'] ?? '')) };
    };
    s.on('response', take);
    s.on('trailers', take);
    s.on('data', () => undefined);
    s.on('error', reject);
    s.on('close', () => {
      session.close();
      if (status) resolve(status);
      else reject(new Error('the stream ended without a gRPC status'));
    });
    s.end(payload);
  });
}

function grpcFrame(message: Buffer, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** A PutRequest (key = 1, value = 2) with a value of `valueBytes` bytes, encoded by hand. */
function putRequest(valueBytes: number): Buffer {
  const key = Buffer.from('k');
  const lenOf = (n: number): Buffer => {
    const out: number[] = [];
    while (n > 0x7f) {
      out.push((n & 0x7f) | 0x80);
      n >>>= 7;
    }
    out.push(n);
    return Buffer.from(out);
  };
  return Buffer.concat([Buffer.from([0x0a]), lenOf(key.length), key, Buffer.from([0x12]), lenOf(valueBytes), Buffer.alloc(valueBytes, 0x61)]);
}

describe.each(SERVERS)('gRPC-layer errors: %s', (_name, bin) => {
  let m: EtcdMember;
  beforeAll(async () => {
    m = await startEtcd({ bin });
  }, 60_000);
  afterAll(async () => {
    await m?.stop();
  });

  it('a request over the receive limit (--max-request-bytes + 512 KiB): grpc-go\'s text and code', async () => {
    const body = putRequest(3 * 1024 * 1024);
    const r = await rawUnary(m.clientHostPort, '/etcdserverpb.KV/Put', body);
    expect(r).toEqual({ code: grpc.status.RESOURCE_EXHAUSTED, details: `grpc: received message larger than max (${body.length} vs. 2097152)` });
  });

  it('the same limit on a call the gRPC library answers itself (not one of the hot KV paths)', async () => {
    // Field 1 of LeaseGrantRequest is TTL (varint); an unknown length-delimited field pads it.
    const body = Buffer.concat([Buffer.from([0x08, 0x3c]), putRequest(3 * 1024 * 1024).subarray(3)]);
    const r = await rawUnary(m.clientHostPort, '/etcdserverpb.Lease/LeaseGrant', body);
    expect(r).toEqual({ code: grpc.status.RESOURCE_EXHAUSTED, details: `grpc: received message larger than max (${body.length} vs. 2097152)` });
  });

  it('between --max-request-bytes and the receive limit: etcd\'s own text', async () => {
    const r = await rawUnary(m.clientHostPort, '/etcdserverpb.KV/Put', putRequest(1800 * 1024));
    expect(r).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: 'etcdserver: request is too large' });
  });

  it('a unary call with no message, half a message, two messages, a compressed flag, bytes that do not decode', async () => {
    const t = m.clientHostPort;
    const range = Buffer.from([0x0a, 0x01, 0x61]);
    expect(await rawFrames(t, '/etcdserverpb.KV/Range', Buffer.alloc(0))).toEqual({ code: grpc.status.UNKNOWN, details: 'EOF' });
    expect(await rawFrames(t, '/etcdserverpb.KV/Range', grpcFrame(range).subarray(0, 6))).toEqual({ code: grpc.status.UNKNOWN, details: 'unexpected EOF' });
    // Answered (a success's grpc-message is empty in grpc-go, "OK" in ours: clients read it only on errors).
    expect((await rawFrames(t, '/etcdserverpb.KV/Range', Buffer.concat([grpcFrame(range), grpcFrame(range)]))).code).toBe(grpc.status.OK);
    expect(await rawFrames(t, '/etcdserverpb.KV/Range', grpcFrame(range, true))).toEqual({
      code: grpc.status.INTERNAL,
      details: 'grpc: compressed flag set with identity or empty encoding',
    });
    // The reason after the prefix is the Go protobuf library's own words in etcd.
    const garbage = await rawFrames(t, '/etcdserverpb.KV/Put', grpcFrame(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f])));
    expect(garbage.code).toBe(grpc.status.INTERNAL);
    expect(garbage.details).toMatch(/^grpc: error unmarshalling request: /);
  });

  it('an unknown method of a known service, and an unknown service', async () => {
    expect(await rawUnary(m.clientHostPort, '/etcdserverpb.KV/NoSuchMethod', Buffer.alloc(0))).toEqual({
      code: grpc.status.UNIMPLEMENTED,
      details: 'unknown method NoSuchMethod for service etcdserverpb.KV',
    });
    expect(await rawUnary(m.clientHostPort, '/no.such.Service/Call', Buffer.alloc(0))).toEqual({
      code: grpc.status.UNIMPLEMENTED,
      details: 'unknown service no.such.Service',
    });
  });
});
