// The receiving half of HTTP/2 framing that our server connection and the peers' client share.
import { describe, expect, it } from 'vitest';
import { ConnectionError, FrameSplitter, HeaderBlockCollector, MAX_CONTINUATION_FRAMES, unpad } from '../../../src/h2/frame_reader';
import { ErrorCode, FLAG_END_HEADERS, FLAG_PADDED, FLAG_PRIORITY, FrameType, PREFACE, frame } from '../../../src/h2/frames';

type Got = [type: number, flags: number, streamId: number, payload: string];

function splitter(preface?: Buffer, stopAfter = Infinity) {
  const got: Got[] = [];
  const sink = {
    receiveFrame(type: number, flags: number, streamId: number, payload: Buffer): boolean {
      got.push([type, flags, streamId, payload.toString('latin1')]);
      return got.length < stopAfter;
    },
  };
  const s = new FrameSplitter(sink, preface);
  return { s, got };
}

function connectionError(f: () => void): ConnectionError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ConnectionError);
    return e as ConnectionError;
  }
  throw new Error('expected a ConnectionError');
}

const wire = Buffer.concat([
  frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)),
  frame(FrameType.HEADERS, FLAG_END_HEADERS, 1, Buffer.from('abc')),
  frame(FrameType.DATA, 1, 1, Buffer.alloc(16_384, 'x')),
]);
const expected: Got[] = [
  [FrameType.SETTINGS, 0, 0, ''],
  [FrameType.HEADERS, FLAG_END_HEADERS, 1, 'abc'],
  [FrameType.DATA, 1, 1, 'x'.repeat(16_384)],
];

describe('FrameSplitter', () => {
  it('delivers the same frames whether the bytes come at once or one at a time', () => {
    const whole = splitter();
    whole.s.feed(wire);
    expect(whole.got).toEqual(expected);
    const bytewise = splitter();
    for (let i = 0; i < wire.length; i++) bytewise.s.feed(wire.subarray(i, i + 1));
    expect(bytewise.got).toEqual(expected);
  });

  it('checks the preface before the first frame, also when it comes in pieces', () => {
    const ok = splitter(PREFACE);
    const bytes = Buffer.concat([PREFACE, wire]);
    ok.s.feed(bytes.subarray(0, 7));
    ok.s.feed(bytes.subarray(7, PREFACE.length + 3));
    ok.s.feed(bytes.subarray(PREFACE.length + 3));
    expect(ok.got).toEqual(expected);

    const bad = splitter(PREFACE);
    expect(connectionError(() => bad.s.feed(Buffer.from('GET / HTTP/1.1\r\n'))).code).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(bad.got).toEqual([]);
  });

  it('refuses a frame larger than the 16 KiB we advertise as soon as its header is in', () => {
    const { s, got } = splitter();
    const header = Buffer.from([0, 0x40, 0x01, FrameType.DATA, 0, 0, 0, 0, 1]);
    expect(connectionError(() => s.feed(header)).code).toBe(ErrorCode.FRAME_SIZE_ERROR);
    expect(got).toEqual([]);
  });

  it('stops when the handler says the connection is closing, and keeps nothing', () => {
    const { s, got } = splitter(undefined, 1);
    s.feed(wire.subarray(0, wire.length - 1));
    expect(got).toEqual(expected.slice(0, 1));
  });
});

describe('unpad', () => {
  it('strips the pad length, the leading fields and the padding', () => {
    const payload = Buffer.from([2, 9, 9, 9, 9, 9, 0x61, 0x62, 0, 0]);
    expect(unpad(FLAG_PADDED, payload, 5).toString()).toBe('ab');
    expect(unpad(0, Buffer.from('ab'), 0).toString()).toBe('ab');
  });

  it('refuses padding longer than the frame, and a frame shorter than its fields', () => {
    expect(connectionError(() => unpad(FLAG_PADDED, Buffer.from([5, 0x61]), 0)).code).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(connectionError(() => unpad(FLAG_PADDED, Buffer.alloc(0), 0)).code).toBe(ErrorCode.PROTOCOL_ERROR);
    // A HEADERS frame with PRIORITY carries 5 bytes of it before any header block.
    expect(connectionError(() => unpad(0, Buffer.from([0, 0, 1]), 5)).code).toBe(ErrorCode.FRAME_SIZE_ERROR);
  });
});

describe('HeaderBlockCollector', () => {
  it('returns a single-frame block without its padding and priority fields', () => {
    const c = new HeaderBlockCollector(1024);
    const payload = Buffer.from([1, 0, 0, 0, 3, 16, 0x68, 0x62, 0]);
    expect(c.headers(FLAG_END_HEADERS | FLAG_PADDED | FLAG_PRIORITY, 3, payload)).toEqual({
      streamId: 3,
      flags: FLAG_END_HEADERS | FLAG_PADDED | FLAG_PRIORITY,
      block: Buffer.from('hb'),
    });
    expect(c.open).toBe(false);
  });

  it('joins HEADERS and CONTINUATIONs into one block with the HEADERS flags', () => {
    const c = new HeaderBlockCollector(1024);
    expect(c.headers(1, 5, Buffer.from('ab'))).toBeUndefined();
    expect(c.open).toBe(true);
    expect(c.continuation(0, 5, Buffer.from('cd'))).toBeUndefined();
    expect(c.continuation(FLAG_END_HEADERS, 5, Buffer.from('ef'))).toEqual({ streamId: 5, flags: 1, block: Buffer.from('abcdef') });
    expect(c.open).toBe(false);
  });

  it('ends the connection on a flood of empty CONTINUATIONs (bounded by count, not only by bytes)', () => {
    const c = new HeaderBlockCollector(1024);
    c.headers(0, 1, Buffer.from('ab'));
    for (let i = 0; i < MAX_CONTINUATION_FRAMES; i++) expect(c.continuation(0, 1, Buffer.alloc(0))).toBeUndefined();
    expect(connectionError(() => c.continuation(0, 1, Buffer.alloc(0))).code).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    const d = new HeaderBlockCollector(1024);
    d.headers(0, 1, Buffer.from('ab'));
    for (let i = 0; i < MAX_CONTINUATION_FRAMES - 1; i++) d.continuation(0, 1, Buffer.alloc(0));
    expect(d.continuation(FLAG_END_HEADERS, 1, Buffer.from('c'))).toEqual({ streamId: 1, flags: 0, block: Buffer.from('abc') });
  });

  it('refuses a CONTINUATION without HEADERS or on another stream, and a block over its bound', () => {
    const c = new HeaderBlockCollector(4);
    expect(connectionError(() => c.continuation(FLAG_END_HEADERS, 1, Buffer.from('a'))).code).toBe(ErrorCode.PROTOCOL_ERROR);
    c.headers(0, 1, Buffer.from('ab'));
    expect(connectionError(() => c.continuation(0, 3, Buffer.from('c'))).code).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(connectionError(() => c.continuation(0, 1, Buffer.from('cde'))).code).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    expect(connectionError(() => new HeaderBlockCollector(4).headers(FLAG_END_HEADERS, 1, Buffer.from('abcde'))).code).toBe(
      ErrorCode.ENHANCE_YOUR_CALM,
    );
  });
});
