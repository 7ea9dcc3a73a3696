import { describe, expect, it } from 'vitest';
import { GrpcMessageReader } from '../../../src/transport/raw_stream';
import { FRAME_HEADER_BYTES } from '../../../src/grpcjs/wire';
import { encodeFramedBatch, decodeBatch } from '../../../src/transport/codec';

function frame(body: Buffer, flag = 0): Buffer {
  const h = Buffer.alloc(FRAME_HEADER_BYTES);
  h[0] = flag;
  h.writeUInt32BE(body.length, 1);
  return Buffer.concat([h, body]);
}

describe('GrpcMessageReader', () => {
  const bodies = [Buffer.from('first message'), Buffer.alloc(0), Buffer.alloc(20000, 3), Buffer.from('last')];
  const wire = Buffer.concat(bodies.map((b) => frame(b)));

  it('reads the same messages however the bytes are split', () => {
    for (const step of [1, 2, 5, 7, 4096, wire.length]) {
      const r = new GrpcMessageReader(1 << 20);
      const got: Buffer[] = [];
      for (let i = 0; i < wire.length; i += step) {
        expect(r.push(wire.subarray(i, i + step), (m) => got.push(Buffer.from(m)))).toBeNull();
      }
      expect(got).toEqual(bodies);
    }
  });

  it('refuses compressed and oversized messages with grpc-js statuses', () => {
    expect(new GrpcMessageReader(100).push(frame(Buffer.from('x'), 1), () => {})).toMatchObject({ code: 13 });
    expect(new GrpcMessageReader(100).push(frame(Buffer.alloc(101)), () => {})).toEqual({
      code: 8,
      details: 'Received message larger than max (101 vs. 100)',
    });
  });

  it('takes the framed batches the sender writes', () => {
    const parts = [Buffer.from([1, 2, 3]), Buffer.alloc(300, 9)];
    const r = new GrpcMessageReader(1 << 20);
    const got: Buffer[] = [];
    r.push(encodeFramedBatch(parts), (m) => got.push(m));
    expect(got).toHaveLength(1);
    expect(decodeBatch(got[0]!).map((b) => Buffer.from(b))).toEqual(parts);
  });
});
