// gRPC's 5-byte message prefix: written in front of a large encoding, in the room its encoder left,
// instead of copying the message; small encodings and foreign buffers are copied as before.
import { describe, expect, it } from 'vitest';
import { FRAME_HEADER_BYTES, frameMessage, frameMessages } from '../../../src/grpcjs/wire';
import { encodeRangeResponse, encodePutResponse } from '../../../src/pb/kv_wire';
import { decodeMessage } from '../../../src/pb/internal';

function expectFramed(frame: Buffer, body: Buffer): void {
  expect(frame[0]).toBe(0);
  expect(frame.readUInt32BE(1)).toBe(body.length);
  expect(frame.subarray(FRAME_HEADER_BYTES).equals(body)).toBe(true);
}

const header = { clusterId: '1', memberId: '2', revision: '3', raftTerm: '4' };

describe('frameMessage', () => {
  it('prefixes a large encoding in place: the frame is the same memory, and decodes back', () => {
    const kvs = Array.from({ length: 100 }, (_, i) => ({ key: Buffer.from(`k${i}`), value: Buffer.alloc(1000, i), createRevision: '1', modRevision: '2', version: '1', lease: '0' }));
    const body = encodeRangeResponse({ header, kvs, more: false, count: '100' });
    expect(body.length).toBeGreaterThan(100_000);
    const copy = Buffer.from(body);
    const frame = frameMessage(body);
    expectFramed(frame, copy);
    expect(frame.buffer).toBe(body.buffer);
    expect(frame.byteOffset + FRAME_HEADER_BYTES).toBe(body.byteOffset);
    // Framing twice (a shared encoding sent on two streams) gives the same bytes.
    expect(frameMessage(body).equals(frame)).toBe(true);
    const back = decodeMessage('etcdserverpb.RangeResponse', frame.subarray(FRAME_HEADER_BYTES)) as { kvs: { value: Buffer }[] };
    expect(back.kvs).toHaveLength(100);
    expect(back.kvs[99]!.value.equals(Buffer.alloc(1000, 99))).toBe(true);
  });

  it('copies a small encoding, and any buffer the encoders did not make, into a new frame', () => {
    const small = encodePutResponse({ header, prevKv: null });
    const f1 = frameMessage(small);
    expectFramed(f1, small);
    expect(f1.buffer === small.buffer && f1.byteOffset + FRAME_HEADER_BYTES === small.byteOffset).toBe(false);
    // A subarray of some larger buffer: the bytes in front of it belong to someone else.
    const outer = Buffer.alloc(10_000, 7);
    const foreign = outer.subarray(100, 9_000);
    const f2 = frameMessage(foreign);
    expectFramed(f2, foreign);
    expect(outer.subarray(0, 100).every((b) => b === 7)).toBe(true);
  });
});

describe('frameMessages', () => {
  /** Splits length-prefixed messages back out of one buffer. */
  function unframe(buf: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let at = 0;
    while (at < buf.length) {
      expect(buf[at]).toBe(0);
      const n = buf.readUInt32BE(at + 1);
      out.push(buf.subarray(at + FRAME_HEADER_BYTES, at + FRAME_HEADER_BYTES + n));
      at += FRAME_HEADER_BYTES + n;
    }
    expect(at).toBe(buf.length);
    return out;
  }

  it('frames several messages, small and large, into one buffer that reads back as the same messages in order', () => {
    const kvs = Array.from({ length: 20 }, (_, i) => ({ key: Buffer.from(`k${i}`), value: Buffer.alloc(500, i), createRevision: '1', modRevision: '2', version: '1', lease: '0' }));
    const bodies = [
      encodePutResponse({ header, prevKv: null }),
      encodeRangeResponse({ header, kvs, more: false, count: '20' }),
      Buffer.alloc(0),
      Buffer.from('tail'),
    ];
    expect(bodies[1]!.length).toBeGreaterThan(4096);
    const copies = bodies.map((b) => Buffer.from(b));
    const framedBytes = bodies.reduce((n, b) => n + FRAME_HEADER_BYTES + b.length, 0);
    const joined = frameMessages(bodies, framedBytes);
    expect(joined.length).toBe(framedBytes);
    const back = unframe(joined);
    expect(back).toHaveLength(4);
    back.forEach((b, i) => expect(b.equals(copies[i]!)).toBe(true));
    // The large body's own room in front of it is left alone: framing it again gives the same frame.
    expectFramed(frameMessage(bodies[1]!), copies[1]!);
  });

  it('frames a single message as frameMessage does (in place when the encoder left room)', () => {
    const kvs = Array.from({ length: 100 }, (_, i) => ({ key: Buffer.from(`k${i}`), value: Buffer.alloc(1000, i), createRevision: '1', modRevision: '2', version: '1', lease: '0' }));
    const body = encodeRangeResponse({ header, kvs, more: false, count: '100' });
    const frame = frameMessages([body], FRAME_HEADER_BYTES + body.length);
    expect(frame.buffer).toBe(body.buffer);
    expectFramed(frame, body);
  });

  it('refuses a byte count that does not match the messages', () => {
    expect(() => frameMessages([Buffer.from('a'), Buffer.from('bc')], 100)).toThrow(/framed 13 bytes of messages, meant 100/);
  });
});
