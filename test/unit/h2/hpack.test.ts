import { describe, expect, it } from 'vitest';
import { FrozenHeaderEncoder, HpackDecoder, HpackError, encodeHeaders, encodeInt } from '../../../src/h2/hpack';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

function decodeAll(d: HpackDecoder, block: Buffer): [string, string][] {
  const fields = d.decode(block);
  const out: [string, string][] = [];
  for (let i = 0; i < fields.length; i += 2) out.push([fields[i]!, fields[i + 1]!]);
  return out;
}

describe('HPACK decoder: RFC 7541 Appendix C examples', () => {
  it('C.3: three requests without Huffman coding share one dynamic table', () => {
    const d = new HpackDecoder();
    expect(decodeAll(d, hex('828684410f7777772e6578616d706c652e636f6d'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
    ]);
    expect(d.tableBytes).toBe(57);
    expect(decodeAll(d, hex('828684be58086e6f2d6361636865'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
      ['cache-control', 'no-cache'],
    ]);
    expect(d.tableBytes).toBe(110);
    expect(decodeAll(d, hex('828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'https'],
      [':path', '/index.html'],
      [':authority', 'www.example.com'],
      ['custom-key', 'custom-value'],
    ]);
    expect(d.tableBytes).toBe(164);
  });

  it('C.4: the same requests with Huffman-coded strings', () => {
    const d = new HpackDecoder();
    expect(decodeAll(d, hex('828684418cf1e3c2e5f23a6ba0ab90f4ff'))[3]).toEqual([':authority', 'www.example.com']);
    expect(decodeAll(d, hex('828684be5886a8eb10649cbf'))[4]).toEqual(['cache-control', 'no-cache']);
    expect(decodeAll(d, hex('828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf'))[4]).toEqual(['custom-key', 'custom-value']);
    expect(d.tableBytes).toBe(164);
  });

  it('evicts the oldest entries to honour a smaller table size update', () => {
    const d = new HpackDecoder();
    decodeAll(d, hex('828684410f7777772e6578616d706c652e636f6d'));
    decodeAll(d, hex('828684be58086e6f2d6361636865'));
    // Size update to 60 bytes (001 11111 + 29), then index 62 = the newest entry (cache-control).
    expect(decodeAll(d, Buffer.concat([encodeInt(60, 5, 0x20), hex('be')]))).toEqual([['cache-control', 'no-cache']]);
    expect(d.tableBytes).toBe(53);
    // The older :authority entry is gone: index 63 no longer exists.
    expect(() => decodeAll(d, hex('bf'))).toThrow(HpackError);
  });

  it('rejects malformed blocks instead of guessing', () => {
    expect(() => decodeAll(new HpackDecoder(), hex('80'))).toThrow(HpackError); // index 0
    expect(() => decodeAll(new HpackDecoder(), hex('c0'))).toThrow(HpackError); // beyond the table
    expect(() => decodeAll(new HpackDecoder(), hex('410f7777'))).toThrow(HpackError); // truncated string
    expect(() => decodeAll(new HpackDecoder(), encodeInt(4097, 5, 0x20))).toThrow(HpackError); // table size above the setting
    expect(() => decodeAll(new HpackDecoder(), encodeInt(4096, 5, 0x20))).not.toThrow();
    expect(() => decodeAll(new HpackDecoder(), hex('82 20'))).toThrow(HpackError); // size update after a field
    expect(() => decodeAll(new HpackDecoder(), hex('7fffffffff7f'))).toThrow(HpackError); // integer overflow
  });
});

describe('HPACK encoder', () => {
  it('encodes what the decoder reads back, pseudo-headers first and repeated values as fields', () => {
    const block = encodeHeaders({ 'grpc-status': 0, ':status': 200, 'x-multi': ['a', 'b'], 'content-type': 'application/grpc+proto' });
    expect(block[0]).toBe(0x88); // :status 200 is one indexed byte
    expect(decodeAll(new HpackDecoder(), block)).toEqual([
      [':status', '200'],
      ['grpc-status', '0'],
      ['x-multi', 'a'],
      ['x-multi', 'b'],
      ['content-type', 'application/grpc+proto'],
    ]);
  });

  it('refuses values that would split a header', () => {
    expect(() => encodeHeaders({ 'grpc-message': 'a\r\nb' })).toThrow(HpackError);
  });

  it('encodes integers across continuation bytes (RFC 7541 C.1.2)', () => {
    expect(encodeInt(1337, 5, 0)).toEqual(hex('1f9a0a'));
    expect(encodeInt(10, 5, 0)).toEqual(hex('0a'));
  });
});

describe('FrozenHeaderEncoder (one per connection)', () => {
  const RESPONSE = Object.freeze({ ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-encoding': 'identity' });
  const TRAILERS = Object.freeze({ 'grpc-status': 0, 'grpc-message': 'OK' });
  const asFields = (h: Record<string, string | number>): [string, string][] => {
    const pseudo = Object.entries(h).filter(([n]) => n.startsWith(':'));
    return [...pseudo, ...Object.entries(h).filter(([n]) => !n.startsWith(':'))].map(([n, v]) => [n, String(v)]);
  };

  it("indexes constant headers in the peer's table: later blocks are a byte per field and decode the same", () => {
    const enc = new FrozenHeaderEncoder();
    const dec = new HpackDecoder();
    const sizes: number[] = [];
    for (let i = 0; i < 3; i++) {
      for (const h of [RESPONSE, TRAILERS, { 'grpc-status': '5', 'grpc-message': `no key ${i}` }]) {
        const block = enc.encode(h);
        sizes.push(block.length);
        expect(decodeAll(dec, block)).toEqual(asFields(h));
      }
    }
    // First round: literals that insert; then one byte per field for the frozen objects.
    expect(sizes.slice(3, 5)).toEqual([3, 2]);
    expect(sizes.slice(6, 8)).toEqual([3, 2]);
    expect(sizes[0]).toBeGreaterThan(40);
  });

  it('on a new table size from the peer, starts the next block by emptying its table, and indexes only what fits', () => {
    const enc = new FrozenHeaderEncoder();
    const dec = new HpackDecoder();
    decodeAll(dec, enc.encode(RESPONSE));
    decodeAll(dec, enc.encode(RESPONSE));
    enc.setPeerTableSize(80); // room for one entry of ~60 bytes
    const block = enc.encode(TRAILERS);
    expect(block[0]).toBe(0x20); // size update to 0, then to 80 (RFC 7541 6.3)
    expect(decodeAll(dec, block)).toEqual(asFields(TRAILERS));
    for (let i = 0; i < 3; i++) {
      expect(decodeAll(dec, enc.encode(RESPONSE))).toEqual(asFields(RESPONSE));
      expect(decodeAll(dec, enc.encode(TRAILERS))).toEqual(asFields(TRAILERS));
    }
    enc.setPeerTableSize(0);
    const none = enc.encode(RESPONSE);
    expect(decodeAll(dec, none)).toEqual(asFields(RESPONSE));
    expect(enc.encode(RESPONSE)).toEqual(Buffer.concat([Buffer.from([0x88]), encodeHeaders({ 'content-type': 'application/grpc+proto', 'grpc-encoding': 'identity' })]));
  });
});
