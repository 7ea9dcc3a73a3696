// KeyValues read from the store carry their stored record, and the response encoders copy that
// record instead of encoding the fields. What a client receives must not change: every response
// below is encoded twice, once with the records and once from the fields alone (a plain copy of
// each KeyValue), and the bytes must be equal; the fields must be those protobufjs decodes.
import { afterEach, describe, expect, it } from 'vitest';
import { applyDeleteRange, applyPut, applyRange, applyRangeForWire, applyRangeForWireInSteps, applyTxn } from '../../../src/apply/kv';
import { toPbKv } from '../../../src/apply/kv_convert';
import { decodeKeyValue, decodeRecordHead, encodeKeyValue, encodeStoredKeyValue, storedRecord } from '../../../src/mvcc/kv_codec';
import type { KeyValue } from '../../../src/mvcc/types';
import { decodeMessage } from '../../../src/pb/internal';
import { encodeRangeResponse, encodeTxnResponse, encodePutResponse, encodeDeleteRangeResponse, keyValueFromRecord, keyValueRecord, rangeResponseParts } from '../../../src/pb/kv_wire';
import type * as pb from '../../../src/pb/types';
import { POOLED_BUFFER, responsePool } from '../../../src/runtime/buffer_pool';
import { mulberry32 } from '../../helpers/random';
import { FakeLeases, rangeReq } from '../apply/kv_helpers';
import { b, closeStore, openStore, write } from '../mvcc/helpers';

const HEADER: pb.ResponseHeader = { clusterId: '14841639068965178418', memberId: '10276657743932975437', revision: '42', raftTerm: '3' };

/** A deep copy in which every KeyValue is a plain object (no record): encodes from the fields. */
function plain<T>(v: T): T {
  if (Array.isArray(v)) return v.map(plain) as T;
  if (v === null || typeof v !== 'object' || Buffer.isBuffer(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = plain(x);
  return out as T;
}

function randomKv(r: () => number): KeyValue {
  const int = (n: number): number => Math.floor(r() * n);
  const pick = (): number => [0, 1, int(128), int(2 ** 21), int(2 ** 31), Math.floor(r() * Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER][int(7)];
  const bytes = (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => int(256)));
  const leases = [0n, 1n, 7587862072378046000n, -1n, -(2n ** 63n), 2n ** 63n - 1n, BigInt(int(2 ** 31))];
  return {
    key: bytes(1 + int(r() < 0.1 ? 3000 : 40)),
    createRevision: pick(),
    modRevision: pick(),
    version: pick(),
    value: bytes(r() < 0.2 ? 0 : int(r() < 0.1 ? 70000 : 300)),
    lease: leases[int(leases.length)],
  };
}

/** The same fields (buffers compared with equals(): deep equality of long buffers in expect() is slow). */
function same(a: KeyValue | pb.KeyValue, b: KeyValue | pb.KeyValue): boolean {
  return (
    a.key.equals(b.key) &&
    a.value.equals(b.value) &&
    a.createRevision === b.createRevision &&
    a.modRevision === b.modRevision &&
    a.version === b.version &&
    a.lease === b.lease
  );
}

describe('stored KeyValue records', () => {
  it('a decoded record keeps its bytes and the same fields; its wire object encodes as from the fields', () => {
    const r = mulberry32(20261130);
    for (let i = 0; i < 600; i++) {
      const kv = randomKv(r);
      const rec = encodeKeyValue(kv);
      const got = decodeKeyValue(rec);
      expect(same(got, kv)).toBe(true);
      const record = storedRecord(got);
      expect(record).not.toBeNull();
      expect(record!.equals(rec)).toBe(true);
      // The record is a copy: LMDB's read buffer is reused by the next read.
      expect(record!.buffer === rec.buffer && record!.byteOffset === rec.byteOffset).toBe(false);

      const p = toPbKv(got);
      expect(keyValueRecord(p)).toBe(record);
      // Own enumerable fields, in proto-loader's order, like any other KeyValue object.
      expect(Object.keys(p)).toEqual(['key', 'createRevision', 'modRevision', 'version', 'value', 'lease']);
      const resp: pb.RangeResponse = { header: HEADER, kvs: [p, p], more: false, count: '2' };
      const fast = encodeRangeResponse(resp);
      expect(fast.equals(encodeRangeResponse(plain(resp)))).toBe(true);
      const back = decodeMessage('etcdserverpb.RangeResponse', fast);
      expect(same(back.kvs[1], p)).toBe(true);
    }
  });

  it("a put's KeyValue is a view of the record it is stored as, and shares no memory with the request", () => {
    const r = mulberry32(20261203);
    for (let i = 0; i < 600; i++) {
      const want = randomKv(r);
      want.createRevision = Math.max(1, want.createRevision);
      want.modRevision = Math.max(1, want.modRevision);
      want.version = Math.max(1, want.version);
      const key = Buffer.from(want.key);
      const value = Buffer.from(want.value);
      const { kv, record } = encodeStoredKeyValue(key, want.createRevision, want.modRevision, want.version, value, want.lease);
      expect(same(kv, want)).toBe(true);
      expect(record.equals(encodeKeyValue(want))).toBe(true);
      expect(storedRecord(kv)).toBe(record);
      expect(same(decodeKeyValue(record), want)).toBe(true);
      // The request's buffers may be reused once the put is applied: the KeyValue must not see it.
      key.fill(0xee);
      value.fill(0xee);
      expect(same(kv, want)).toBe(true);
      const p = toPbKv(kv);
      expect(keyValueRecord(p)).toBe(record);
      const resp: pb.RangeResponse = { header: HEADER, kvs: [p], more: false, count: '1' };
      expect(encodeRangeResponse(resp).equals(encodeRangeResponse(plain(resp)))).toBe(true);
    }
  });

  it('a put through the store answers prev_kv, events and reads with the bytes it wrote, whatever happens to the request after', async () => {
    const s = openStore();
    try {
      const key = b('k');
      const value = Buffer.from('v1');
      const events = write(s, (t) => t.put(key, value, 0n));
      key.fill(0x21);
      value.fill(0x21);
      expect(events[0].kv.key.toString()).toBe('k');
      expect(events[0].kv.value.toString()).toBe('v1');
      let prev: KeyValue | null = null;
      write(s, (t) => {
        prev = t.put(b('k'), b('v2'), 0n).prevKv;
      });
      expect(prev!.value.toString()).toBe('v1');
      expect(s.store.range(b('k'), null).kvs[0].value.toString()).toBe('v2');
    } finally {
      await closeStore(s);
    }
  });

  it('a KeyValue kept as its record bytes encodes as those bytes and reads its fields from them', () => {
    const r = mulberry32(20261201);
    for (let i = 0; i < 600; i++) {
      const kv = randomKv(r);
      const rec = encodeKeyValue(kv);
      // The source is a reused read buffer: longer than the record, at an offset, overwritten next.
      const at = Math.floor(r() * 64);
      const src = Buffer.alloc(at + rec.length + 100, 0xee);
      rec.copy(src, at);
      const p = keyValueFromRecord(src.subarray(at), rec.length);
      src.fill(0);
      const expected = toPbKv(decodeKeyValue(rec));
      const resp: pb.RangeResponse = { header: HEADER, kvs: [p, p], more: false, count: '2' };
      expect(encodeRangeResponse(resp).equals(encodeRangeResponse({ ...resp, kvs: [expected, expected] }))).toBe(true);
      // Fields decoded on access, as protobufjs decodes them; no own properties.
      expect(same(p, expected)).toBe(true);
      expect(Object.keys(p)).toEqual([]);
      expect(keyValueRecord(p)).toBeNull();
    }
  });

  it('a KeyValue kept as its record bytes whose field is set encodes from its fields', () => {
    const rec = encodeKeyValue({ key: b('k'), createRevision: 2, modRevision: 3, version: 1, value: b('v'), lease: -5n });
    const changes: Array<[string, (p: pb.KeyValue) => void, Partial<pb.KeyValue>]> = [
      ['key', (p) => (p.key = b('other')), { key: b('other') }],
      ['createRevision', (p) => (p.createRevision = '1'), { createRevision: '1' }],
      ['modRevision', (p) => (p.modRevision = '9'), { modRevision: '9' }],
      ['version', (p) => (p.version = '7'), { version: '7' }],
      ['value', (p) => (p.value = Buffer.alloc(0)), { value: Buffer.alloc(0) }],
      ['lease', (p) => (p.lease = '0'), { lease: '0' }],
    ];
    for (const [what, change, changed] of changes) {
      const p = keyValueFromRecord(rec, rec.length);
      change(p);
      const want: pb.KeyValue = { key: b('k'), createRevision: '2', modRevision: '3', version: '1', value: b('v'), lease: '-5', ...changed };
      const bytes = encodeRangeResponse({ header: HEADER, kvs: [p], more: false, count: '1' });
      expect(bytes.equals(encodeRangeResponse({ header: HEADER, kvs: [want], more: false, count: '1' })), what).toBe(true);
      expect(decodeMessage('etcdserverpb.RangeResponse', bytes).kvs[0], what).toEqual(want);
    }
  });

  it('a wire object with a record equals the plain object of the same fields', () => {
    const kv = decodeKeyValue(encodeKeyValue({ key: b('k'), createRevision: 2, modRevision: 3, version: 1, value: b('v'), lease: -5n }));
    const p = toPbKv(kv);
    expect(p).toEqual({ key: b('k'), createRevision: '2', modRevision: '3', version: '1', value: b('v'), lease: '-5' });
    expect(JSON.parse(JSON.stringify(p))).toEqual(JSON.parse(JSON.stringify(plain(p))));
  });

  it('records not in encodeKeyValue layout decode without their bytes', () => {
    const cases: Array<[string, number[]]> = [
      ['fields out of order', [0x18, 5, 0x0a, 1, 0x61, 0x10, 5]],
      ['a field twice', [0x0a, 1, 0x61, 0x10, 5, 0x10, 6]],
      ['a zero varint written', [0x0a, 1, 0x61, 0x10, 0]],
      ['an empty value written', [0x0a, 1, 0x61, 0x10, 5, 0x2a, 0]],
      ['a zero lease written', [0x0a, 1, 0x61, 0x30, 0]],
      ['a padded varint', [0x0a, 1, 0x61, 0x10, 0x85, 0x00]],
      ['a padded lease', [0x0a, 1, 0x61, 0x30, 0x81, 0x80, 0x00]],
      ['a lease beyond 64 bits', [0x0a, 1, 0x61, 0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]],
    ];
    for (const [what, bytes] of cases) {
      const kv = decodeKeyValue(Buffer.from(bytes));
      expect(storedRecord(kv), what).toBeNull();
      expect(kv.key.toString(), what).toBe('a');
      // Its wire object encodes from the fields.
      expect(keyValueRecord(toPbKv(kv)), what).toBeNull();
    }
    // Canonical multi-byte varints are kept.
    expect(storedRecord(decodeKeyValue(Buffer.from([0x0a, 1, 0x61, 0x10, 0x85, 0x01])))).not.toBeNull();
  });

  it('a KeyValue whose fields were changed is encoded from its fields, not from its record', () => {
    const fields = { key: b('k'), createRevision: 2, modRevision: 3, version: 1, value: b('v'), lease: 0n };
    const changes: Array<[string, (kv: KeyValue) => void]> = [
      ['key', (kv) => (kv.key = b('other'))],
      ['createRevision', (kv) => (kv.createRevision = 1)],
      ['modRevision', (kv) => (kv.modRevision = 9)],
      ['version', (kv) => (kv.version = 7)],
      ['value', (kv) => (kv.value = Buffer.alloc(0))],
      ['lease', (kv) => (kv.lease = 5n)],
    ];
    for (const [what, change] of changes) {
      const kv = decodeKeyValue(encodeKeyValue(fields));
      expect(storedRecord(kv), what).not.toBeNull();
      change(kv);
      expect(storedRecord(kv), what).toBeNull();
      const resp: pb.RangeResponse = { header: HEADER, kvs: [toPbKv(kv)], more: false, count: '1' };
      expect(encodeRangeResponse(resp).equals(encodeRangeResponse(plain(resp))), what).toBe(true);
      expect(decodeMessage('etcdserverpb.RangeResponse', encodeRangeResponse(resp)).kvs[0].key.equals(kv.key)).toBe(true);
    }
    const wireChanges: Array<[string, (p: pb.KeyValue) => void]> = [
      ['key', (p) => (p.key = b('other'))],
      ['createRevision', (p) => (p.createRevision = '1')],
      ['modRevision', (p) => (p.modRevision = '9')],
      ['version', (p) => (p.version = '7')],
      ['value', (p) => (p.value = Buffer.alloc(0))],
      ['lease', (p) => (p.lease = '5')],
    ];
    for (const [what, change] of wireChanges) {
      const p = toPbKv(decodeKeyValue(encodeKeyValue(fields)));
      expect(keyValueRecord(p), what).not.toBeNull();
      change(p);
      expect(keyValueRecord(p), what).toBeNull();
      const resp: pb.RangeResponse = { header: HEADER, kvs: [p], more: false, count: '1' };
      const bytes = encodeRangeResponse(resp);
      expect(bytes.equals(encodeRangeResponse(plain(resp))), what).toBe(true);
      expect(decodeMessage('etcdserverpb.RangeResponse', bytes).kvs[0]).toEqual({ ...p });
    }
  });

  it("a record's head decodes as the whole record does, from the start of a larger reused buffer, and stops at its length", () => {
    const r = mulberry32(38);
    const buf = Buffer.alloc(200_000);
    for (let i = 0; i < 300; i++) {
      const kv = randomKv(r);
      // The start-up scan's key index and leases need every field but the value.
      if (kv.key.length === 0) continue;
      const rec = encodeKeyValue(kv);
      buf.fill(0x0a);
      rec.copy(buf);
      const full = decodeKeyValue(rec);
      const h = decodeRecordHead(buf, rec.length);
      expect({ key: h.key, createRevision: h.createRevision, modRevision: h.modRevision, version: h.version, lease: h.lease }).toEqual({
        key: full.key.toString('latin1'),
        createRevision: full.createRevision,
        modRevision: full.modRevision,
        version: full.version,
        lease: full.lease,
      });
    }
    // Fields out of encodeKeyValue's order and written twice decode as decodeKeyValue has them.
    const odd = Buffer.from([0x18, 5, 0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x0a, 2, 0xe9, 0x00, 0x10, 4, 0x10, 6]);
    const h = decodeRecordHead(odd, odd.length);
    expect([h.key, h.modRevision, h.createRevision, h.lease]).toEqual(['\u00e9\u0000', 5, 6, -1n]);
    // A record cut short fails even when the buffer goes on past it.
    const cut = Buffer.from([0x0a, 3, 0x61, 0x62, 0x63, 0x10, 5]);
    expect(() => decodeRecordHead(cut, 4)).toThrow(/truncated key/);
    expect(() => decodeRecordHead(cut, 6)).toThrow(/truncated varint/);
    expect(() => decodeRecordHead(Buffer.from([0x10, 5]), 2)).toThrow(/without a key/);
    expect(() => decodeRecordHead(Buffer.from([0x0a, 1, 0x61, 0x3a, 0]), 5)).toThrow(/unexpected field tag/);
  });

  it('keys-only and start-up decoding carry no record', () => {
    const kv = decodeKeyValue(encodeKeyValue({ key: b('k'), createRevision: 2, modRevision: 3, version: 1, value: b('v'), lease: 5n }), true);
    expect(storedRecord(kv)).toBeNull();
    expect(kv.value.length).toBe(0);
  });
});

describe('responses built from the store', () => {
  const opened: Array<ReturnType<typeof openStore>> = [];
  afterEach(async () => {
    for (const s of opened.splice(0)) await closeStore(s);
  });

  function seeded(): ReturnType<typeof openStore> {
    const s = openStore();
    opened.push(s);
    const leases = new FakeLeases([5n, -3n]);
    const r = mulberry32(7);
    for (let i = 0; i < 40; i++) {
      write(s, (t) => {
        const k = `k${String(Math.floor(r() * 30)).padStart(2, '0')}`;
        if (r() < 0.15) applyDeleteRange(t, leases, { key: b(k), rangeEnd: Buffer.alloc(0), prevKv: true });
        else applyPut(t, leases, { key: b(k), value: Buffer.alloc(Math.floor(r() * 400), i), lease: r() < 0.3 ? (r() < 0.5 ? '5' : '-3') : '0', prevKv: true, ignoreValue: false, ignoreLease: false });
      });
    }
    return s;
  }

  it('ranges of every kind encode exactly as from the fields', () => {
    const s = seeded();
    const reqs: pb.RangeRequest[] = [
      rangeReq('k', { rangeEnd: 'l' }),
      rangeReq('k05'),
      rangeReq('k', { rangeEnd: 'l', limit: '3' }),
      rangeReq('k', { rangeEnd: 'l', keysOnly: true }),
      rangeReq('k', { rangeEnd: 'l', keysOnly: true, sortTarget: 4, sortOrder: 2 }),
      rangeReq('k', { rangeEnd: 'l', sortTarget: 4, sortOrder: 1 }),
      rangeReq('k', { rangeEnd: 'l', sortTarget: 2, sortOrder: 2, minModRevision: '10' }),
      rangeReq('k', { rangeEnd: 'l', countOnly: true }),
      rangeReq('k', { rangeEnd: 'l', revision: '20' }),
      rangeReq('\0', { rangeEnd: '\0' }),
    ];
    let withRecords = 0;
    for (const req of reqs) {
      const resp = applyRange(s.store, req);
      resp.header = HEADER;
      withRecords += resp.kvs.filter((kv) => keyValueRecord(kv) !== null).length;
      if (req.keysOnly) for (const kv of resp.kvs) expect(kv.value.length).toBe(0);
      expect(encodeRangeResponse(resp).equals(encodeRangeResponse(plain(resp)))).toBe(true);
      expect(decodeMessage('etcdserverpb.RangeResponse', encodeRangeResponse(resp)).kvs).toEqual(plain(resp.kvs));
    }
    expect(withRecords).toBeGreaterThan(50);
  });

  it('a range for the wire sends the same bytes as one decoded, every key as its stored bytes', () => {
    const s = seeded();
    const count = applyRange(s.store, rangeReq('k', { rangeEnd: 'l' })).kvs.length;
    const reqs: pb.RangeRequest[] = [
      rangeReq('k05'),
      rangeReq('k', { rangeEnd: 'l', limit: String(count) }),
      rangeReq('k', { rangeEnd: 'l', limit: String(count + 1) }),
      rangeReq('k', { rangeEnd: 'l', revision: '20', limit: '2' }),
      rangeReq('k', { rangeEnd: 'l', revision: '20', keysOnly: true, sortTarget: 3, sortOrder: 2 }),
      rangeReq('\0', { rangeEnd: '\0' }),
      rangeReq('nothing'),
      rangeReq('nothing', { keysOnly: true, sortTarget: 4 }),
      rangeReq('k', { rangeEnd: 'l', countOnly: true }),
      rangeReq('k', { rangeEnd: 'l', countOnly: true, limit: '2', minModRevision: '10' }),
    ];
    // Every sort target and order (the values have many ties: a sort must keep their key order),
    // with and without keys-only, a limit and revision filters.
    const filters: Array<Partial<pb.RangeRequest>> = [{}, { minModRevision: '10' }, { maxCreateRevision: '30', minCreateRevision: '3' }, { maxModRevision: '25' }];
    for (let sortTarget = 0; sortTarget <= 4; sortTarget++) {
      for (let sortOrder = 0; sortOrder <= 2; sortOrder++) {
        for (const keysOnly of [false, true]) {
          for (const limit of ['0', '1', '3']) {
            for (const f of filters) reqs.push(rangeReq('k', { rangeEnd: 'l', sortTarget, sortOrder, keysOnly, limit, ...f }));
          }
        }
      }
    }
    let cut = 0;
    for (const req of reqs) {
      const what = JSON.stringify(req);
      const wire = applyRangeForWire(s.store, req);
      const decoded = applyRange(s.store, req);
      wire.header = HEADER;
      decoded.header = HEADER;
      expect(encodeRangeResponse(wire).equals(encodeRangeResponse(decoded)), what).toBe(true);
      expect(wire.more, what).toBe(decoded.more);
      expect(wire.count, what).toBe(decoded.count);
      if (wire.more) cut++;
      // Stored bytes carry no own fields (toEqual sees none); decoded keys do.
      for (const kv of wire.kvs) expect(Object.keys(kv).length, what).toBe(0);
      if (req.keysOnly) for (const kv of wire.kvs) expect(kv.value.length, what).toBe(0);
    }
    expect(cut).toBeGreaterThan(50);
    expect(count).toBeGreaterThan(10);
    // The store's checks apply as to any range.
    expect(() => applyRangeForWire(s.store, rangeReq('k', { revision: '100000' }))).toThrow('mvcc: required revision is a future revision');
  });

  it('a sorted range for the wire is sorted over turns of the event loop, to the same bytes', async () => {
    const s = seeded();
    for (const req of [
      rangeReq('k', { rangeEnd: 'l', sortTarget: 4, sortOrder: 2, keysOnly: true }),
      rangeReq('k', { rangeEnd: 'l', sortTarget: 3, sortOrder: 1, limit: '5', minModRevision: '8' }),
    ]) {
      const want = applyRangeForWire(s.store, req);
      want.header = HEADER;
      let settled = false;
      const running = applyRangeForWireInSteps(s.store, req, 4).finally(() => (settled = true));
      let turns = 0;
      while (!settled) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        turns++;
      }
      const got = await running;
      got.header = HEADER;
      expect(encodeRangeResponse(got).equals(encodeRangeResponse(want))).toBe(true);
      // ~25 keys in 5 passes, 4 moves a turn (one answers the whole sort).
      expect(turns).toBeGreaterThan(10);
    }
  });

  it('a keys-only range of records in another layout than ours sends them without their value', () => {
    const kvs: KeyValue[] = [
      { key: b('a'), createRevision: 2, modRevision: 3, version: 1, value: b('xyz'), lease: 5n },
      { key: b('b'), createRevision: 4, modRevision: 4, version: 1, value: b('uvw'), lease: 0n },
    ];
    const records = [
      // The value's field first.
      Buffer.concat([Buffer.from([0x2a, 3]), b('xyz'), encodeKeyValue({ ...kvs[0], value: Buffer.alloc(0) })]),
      // The value's length in a longer varint than needed.
      Buffer.concat([encodeKeyValue({ ...kvs[1], value: Buffer.alloc(0) }), Buffer.from([0x2a, 0x83, 0x00]), b('uvw')]),
    ];
    for (const [i, r] of records.entries()) expect(decodeKeyValue(r)).toEqual(kvs[i]);
    const reader = {
      range: () => ({ kvs, count: 2, rev: 9 }),
      rangeRecords: (_k: Buffer, _e: Buffer | null, _o: unknown, each: (record: Uint8Array, length: number) => void) => {
        for (const r of records) each(r, r.length);
        return { count: 2, rev: 9 };
      },
    };
    const req = rangeReq('a', { rangeEnd: 'z', keysOnly: true });
    const wire = applyRangeForWire(reader, req);
    const decoded = applyRange(reader, req);
    expect(encodeRangeResponse(wire).equals(encodeRangeResponse(decoded))).toBe(true);
    expect(wire.kvs.map((kv) => [kv.key.toString(), kv.value.length, kv.lease])).toEqual([
      ['a', 0, '5'],
      ['b', 0, '0'],
    ]);
  });

  it('a large range for the wire keeps its keys in lent memory that goes back when it is encoded, and no key outlives it', () => {
    const s = openStore();
    opened.push(s);
    const leases = new FakeLeases([]);
    const put = (key: string, value: Buffer): void => {
      write(s, (t) => applyPut(t, leases, { key: b(key), value, lease: '0', prevKv: false, ignoreValue: false, ignoreLease: false }));
    };
    // ~300 KB: the first 16 KiB share the slab, the rest needs pieces of 128 KiB; one record has its own buffer.
    for (let i = 0; i < 300; i++) put(`big${String(i).padStart(3, '0')}`, Buffer.alloc(i === 150 ? 40_000 : 1000, i));
    for (let i = 0; i < 300; i++) put(`cmp${String(i).padStart(3, '0')}`, Buffer.alloc(1000, 255 - (i % 200)));
    const req = rangeReq('big', { rangeEnd: 'bih' });
    const small = applyRangeForWire(s.store, rangeReq('big', { rangeEnd: 'bih', limit: '5' }));
    const returned0 = responsePool.returned;
    const wire = applyRangeForWire(s.store, req);
    // A field read before the encoding is a copy: it must outlive the loan.
    const early = wire.kvs[299]!.value;
    const decoded = applyRange(s.store, req);
    wire.header = HEADER;
    decoded.header = HEADER;
    const bytes = encodeRangeResponse(wire);
    expect(bytes.equals(encodeRangeResponse(decoded))).toBe(true);
    const lent = responsePool.returned - returned0;
    expect(lent).toBeGreaterThanOrEqual(2);
    // The memory is lent again to the next large range, over other keys, which encodes its own bytes.
    const next = applyRangeForWire(s.store, rangeReq('cmp', { rangeEnd: 'cmq' }));
    const nextDecoded = applyRange(s.store, rangeReq('cmp', { rangeEnd: 'cmq' }));
    next.header = HEADER;
    nextDecoded.header = HEADER;
    expect(encodeRangeResponse(next).equals(encodeRangeResponse(nextDecoded))).toBe(true);
    expect(responsePool.returned - returned0).toBe(2 * lent);
    expect(early.equals(Buffer.alloc(1000, 299 % 256))).toBe(true);
    // A lent key read or encoded after its response was encoded is an assertion failure, not other bytes.
    expect(() => wire.kvs[298]!.key).toThrow('read after its memory went back');
    expect(() => encodeRangeResponse(wire)).toThrow('encoded after its memory went back');
    // A small range takes nothing from the pool and may be encoded again.
    small.header = HEADER;
    const returned1 = responsePool.returned;
    expect(encodeRangeResponse(small).equals(encodeRangeResponse(small))).toBe(true);
    expect(small.kvs[4]!.key.toString()).toBe('big004');
    expect(responsePool.returned).toBe(returned1);
  });

  it('a large range for the wire goes out as runs of its stored bytes, each piece handed back once written', () => {
    const s = openStore();
    opened.push(s);
    const leases = new FakeLeases([5n]);
    // ~600 KB over several pieces of 128 KiB, with records in buffers of their own first (past the
    // shared slab's largest) and in between (past a piece's).
    write(s, (t) => {
      for (let i = 0; i < 500; i++) {
        const value = Buffer.alloc(i === 0 ? 20_000 : i === 200 || i === 201 ? 40_000 : 1000 + (i % 7), i);
        applyPut(t, leases, { key: b(`p${String(i).padStart(3, '0')}`), value, lease: i % 3 === 0 ? '5' : '0', prevKv: false, ignoreValue: false, ignoreLease: false });
      }
    });
    for (const req of [rangeReq('p', { rangeEnd: 'q' }), rangeReq('p', { rangeEnd: 'q', limit: '450', keysOnly: true }), rangeReq('p', { rangeEnd: 'q', minModRevision: '2' })]) {
      const wire = applyRangeForWire(s.store, req);
      const decoded = applyRange(s.store, req);
      wire.header = HEADER;
      decoded.header = HEADER;
      const whole = encodeRangeResponse(decoded);
      const before = responsePool.returned;
      const encoded = rangeResponseParts(wire);
      if (req.keysOnly) {
        // Its ~9 KB are encoded whole (one DATA frame rather than a few).
        expect(encoded).toBeNull();
        expect(encodeRangeResponse(wire).equals(whole)).toBe(true);
        continue;
      }
      expect(encoded).not.toBeNull();
      const { parts, bytes } = encoded!;
      // Runs, not a part per key; the same bytes as the whole encoding.
      expect(parts.length).toBeLessThan(20);
      expect(bytes).toBe(whole.length);
      expect(Buffer.concat(parts).equals(whole)).toBe(true);
      // Nothing goes back before the parts are written; each piece rides on its last run.
      expect(responsePool.returned).toBe(before);
      const pooled = parts.map((p) => (p as Buffer & { [POOLED_BUFFER]?: Buffer })[POOLED_BUFFER]).filter((x) => x !== undefined);
      expect(pooled.length).toBeGreaterThanOrEqual(3);
      expect(new Set(pooled).size).toBe(pooled.length);
      // A piece's runs are written in order: it goes back with its last one, none of it after.
      for (const [i, part] of parts.entries()) {
        const piece = (part as Buffer & { [POOLED_BUFFER]?: Buffer })[POOLED_BUFFER];
        if (piece !== undefined) for (const later of parts.slice(i + 1)) expect(later.buffer).not.toBe(piece.buffer);
      }
      for (const piece of pooled) responsePool.giveBack(piece!);
      // The keys in lent memory are dead from then on.
      expect(() => wire.kvs[400]!.key).toThrow('read after its memory went back');
      expect(rangeResponseParts(wire)).toBeNull();
    }
    // Keys out of their order, or one of them changed, are encoded key by key.
    const sorted = applyRangeForWire(s.store, rangeReq('p', { rangeEnd: 'q', sortTarget: 4, sortOrder: 2 }));
    expect(rangeResponseParts(sorted)).toBeNull();
    const changed = applyRangeForWire(s.store, rangeReq('p', { rangeEnd: 'q' }));
    changed.kvs[3]!.value = b('changed');
    expect(rangeResponseParts(changed)).toBeNull();
    changed.header = HEADER;
    const plainChanged = plain(applyRange(s.store, rangeReq('p', { rangeEnd: 'q' })));
    plainChanged.kvs[3]!.value = b('changed');
    plainChanged.header = HEADER;
    expect(encodeRangeResponse(changed).equals(encodeRangeResponse(plainChanged))).toBe(true);
  });

  it('txn, put and delete responses with ranges and previous values encode exactly as from the fields', () => {
    const s = seeded();
    const leases = new FakeLeases([5n, -3n]);
    const txnReq: pb.TxnRequest = {
      compare: [],
      success: [
        { requestRange: rangeReq('k', { rangeEnd: 'l' }), request: 'requestRange' },
        { requestPut: { key: b('k01'), value: b('new'), lease: '0', prevKv: true, ignoreValue: false, ignoreLease: false }, request: 'requestPut' },
        { requestDeleteRange: { key: b('k1'), rangeEnd: b('k2'), prevKv: true }, request: 'requestDeleteRange' },
        { requestRange: rangeReq('k', { rangeEnd: 'l', keysOnly: true }), request: 'requestRange' },
      ],
      failure: [],
    } as pb.TxnRequest;
    const txnResp = s.backend.batch(() => applyTxn(s.store, leases, txnReq));
    txnResp.header = HEADER;
    expect(encodeTxnResponse(txnResp).equals(encodeTxnResponse(plain(txnResp)))).toBe(true);
    const putResp = s.backend.batch(() => {
      const t = s.store.write();
      const out = applyPut(t, leases, { key: b('k02'), value: b('x'), lease: '0', prevKv: true, ignoreValue: false, ignoreLease: false });
      t.end();
      return out;
    });
    putResp.header = HEADER;
    expect(keyValueRecord(putResp.prevKv!)).not.toBeNull();
    expect(encodePutResponse(putResp).equals(encodePutResponse(plain(putResp)))).toBe(true);
    const delResp = s.backend.batch(() => {
      const t = s.store.write();
      const out = applyDeleteRange(t, leases, { key: b('k'), rangeEnd: b('l'), prevKv: true });
      t.end();
      return out;
    });
    delResp.header = HEADER;
    expect(delResp.prevKvs.length).toBeGreaterThan(5);
    expect(encodeDeleteRangeResponse(delResp).equals(encodeDeleteRangeResponse(plain(delResp)))).toBe(true);
  });
});
