// Hand-written protobuf codecs of the messages on the hot path: the KV requests (decoded from
// clients, and inside the raft entry), the KV and watch responses (encoded for clients). They
// give exactly what protobufjs gives for the same bytes / objects (test/unit/pb/kv_wire.test.ts
// checks that on randomized messages); input they are not sure about throws NotFast and the
// caller falls back to protobufjs for the whole message.
import type * as pb from './types';
import {
  NotFast,
  Reader,
  WIRE_DELIMITED,
  WIRE_VARINT,
  Writer,
  bytesWire,
  int32Size,
  int32Wire,
  int64Size,
  int64Wire,
  varintSize,
  EMPTY_BYTES,
  allocEncoding,
  bytesFieldSize,
  putVarint,
  int64FieldSize,
  stringFieldSize,
  writeBytesField,
  writeInt64Field,
  writeStringField,
  type EncodedParts,
} from './wire';
import assert from 'node:assert';
import { POOLED_BUFFER, responsePool } from '../runtime/buffer_pool';

// ---------------------------------------------------------------- encoding helpers

/** A oneof member: written whenever set, zero included. */
function oneofInt64Size(v: unknown, tagBytes = 1): number {
  return tagBytes + int64Size(int64Wire(v));
}

function enumFieldSize(v: unknown): number {
  if (v === null || v === undefined) return 0;
  const x = int32Wire(v);
  return x === 0 ? 0 : 1 + int32Size(x);
}

function writeEnumField(w: Writer, tag: number, v: unknown): void {
  if (v === null || v === undefined) return;
  const x = v as number;
  if (x === 0) return;
  w.tag(tag);
  w.int32(x);
}

function boolFieldSize(v: unknown): number {
  return v ? 2 : 0;
}

function writeBoolField(w: Writer, tag: number, v: unknown): void {
  if (!v) return;
  w.tag(tag);
  w.byte(1);
}

/** A sub-message or array element must be an object (protobufjs throws otherwise). */
function isMessage(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) throw new NotFast('message type');
  return true;
}

function repeated(v: unknown): readonly unknown[] | null {
  if (v === null || v === undefined) return null;
  if (!Array.isArray(v)) throw new NotFast('repeated type');
  return v.length === 0 ? null : v;
}

function messageFieldSize(inner: number, tagBytes = 1): number {
  return tagBytes + varintSize(inner) + inner;
}

// ---------------------------------------------------------------- response messages

type Obj = Record<string, unknown>;

function headerFieldsSize(h: Obj): number {
  return int64FieldSize(h.clusterId) + int64FieldSize(h.memberId) + int64FieldSize(h.revision) + int64FieldSize(h.raftTerm);
}

function writeHeaderFields(w: Writer, h: Obj): void {
  writeInt64Field(w, 0x08, h.clusterId);
  writeInt64Field(w, 0x10, h.memberId);
  writeInt64Field(w, 0x18, h.revision);
  writeInt64Field(w, 0x20, h.raftTerm);
}

/**
 * Encodings of frozen objects: one that cannot change is encoded once, and its entry goes with it.
 * A committed revision reaches every watcher of its key in a response of its own; the watch adapter
 * shares one frozen header and frozen events among them, so each is encoded once per revision
 * rather than once per watcher. Anything not frozen is encoded afresh every time.
 */
class FrozenEncodings {
  private readonly bytes = new WeakMap<object, Buffer>();

  constructor(
    private readonly frozen: (o: Obj) => boolean,
    private readonly fieldsSize: (o: Obj) => number,
    private readonly writeFields: (w: Writer, o: Obj) => void,
  ) {}

  private encoded(o: Obj): Buffer | undefined {
    if (!this.frozen(o)) return undefined;
    let b = this.bytes.get(o);
    if (b === undefined) {
      const w = new Writer(Buffer.allocUnsafe(this.fieldsSize(o)));
      this.writeFields(w, o);
      b = w.done();
      this.bytes.set(o, b);
    }
    return b;
  }

  size(o: Obj): number {
    return this.encoded(o)?.length ?? this.fieldsSize(o);
  }

  write(w: Writer, o: Obj): void {
    const b = this.encoded(o);
    if (b === undefined) {
      this.writeFields(w, o);
      return;
    }
    w.buf.set(b, w.pos);
    w.pos += b.length;
  }
}

const headerEncodings = new FrozenEncodings(Object.isFrozen, headerFieldsSize, writeHeaderFields);

export function responseHeaderSize(h: Obj): number {
  return headerEncodings.size(h);
}

export function writeResponseHeader(w: Writer, h: Obj): void {
  headerEncodings.write(w, h);
}

/** Size of a response's header field (1), absent when null; throws NotFast for a header that is not an object. */
export function headerFieldSize(h: unknown): number {
  return subSize(h, responseHeaderSize);
}

/** Writes a response's header field (1), unless it is absent. */
export function writeHeaderField(w: Writer, h: unknown): void {
  writeSub(w, 0x0a, h, responseHeaderSize, writeResponseHeader);
}

/**
 * An mvccpb.KeyValue whose encoding is known: the record the store keeps it as. The encoders
 * below copy `record` instead of encoding the fields, as long as every field still holds what
 * it was built with (a changed field means the fields are encoded, never stale bytes). The
 * fields are own enumerable properties like those of any other KeyValue object.
 */
class RecordKeyValue implements pb.KeyValue {
  key: Buffer;
  createRevision: string;
  modRevision: string;
  version: string;
  value: Buffer;
  lease: string;
  readonly #record: Buffer;
  readonly #key: Buffer;
  readonly #createRevision: string;
  readonly #modRevision: string;
  readonly #version: string;
  readonly #value: Buffer;
  readonly #lease: string;

  constructor(key: Buffer, createRevision: string, modRevision: string, version: string, value: Buffer, lease: string, record: Buffer) {
    this.key = key;
    this.createRevision = createRevision;
    this.modRevision = modRevision;
    this.version = version;
    this.value = value;
    this.lease = lease;
    this.#record = record;
    this.#key = key;
    this.#createRevision = createRevision;
    this.#modRevision = modRevision;
    this.#version = version;
    this.#value = value;
    this.#lease = lease;
  }

  static recordOf(kv: object): Buffer | null {
    if (!(#record in kv)) return null;
    const r = kv as RecordKeyValue;
    const unchanged =
      r.key === r.#key &&
      r.createRevision === r.#createRevision &&
      r.modRevision === r.#modRevision &&
      r.version === r.#version &&
      r.value === r.#value &&
      r.lease === r.#lease;
    return unchanged ? r.#record : null;
  }
}

/**
 * A KeyValue object that encodes as `record`. The caller guarantees `record` is the canonical
 * encoding of these fields (what writeKeyValue would write: field order, zero fields omitted,
 * shortest varints); test/unit/pb/kv_record.test.ts checks the store's records are.
 */
export function keyValueWithRecord(
  key: Buffer,
  createRevision: string,
  modRevision: string,
  version: string,
  value: Buffer,
  lease: string,
  record: Buffer,
): pb.KeyValue {
  return new RecordKeyValue(key, createRevision, modRevision, version, value, lease, record);
}

/** The encoding a KeyValue object carries (keyValueWithRecord), or null. */
export function keyValueRecord(kv: object): Buffer | null {
  return RecordKeyValue.recordOf(kv);
}

/** An mvccpb.KeyValue's fields from its encoding, as protobufjs decodes them. */
function decodeKeyValueFields(buf: Buffer): pb.KeyValue {
  const kv: pb.KeyValue = { key: EMPTY_BYTES, createRevision: '0', modRevision: '0', version: '0', value: EMPTY_BYTES, lease: '0' };
  const r = new Reader(buf);
  while (r.pos < buf.length) {
    const tag = r.tag();
    switch (tag) {
      case 0x0a:
        kv.key = r.bytes();
        break;
      case 0x10:
        kv.createRevision = r.int64String();
        break;
      case 0x18:
        kv.modRevision = r.int64String();
        break;
      case 0x20:
        kv.version = r.int64String();
        break;
      case 0x2a:
        kv.value = r.bytes();
        break;
      case 0x30:
        kv.lease = r.int64String();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return kv;
}

/**
 * An mvccpb.KeyValue kept only as its encoding (a record the store read), decoded on the first
 * access to a field. A range response's keys cost one copy of their bytes and this object
 * each, where decoded fields cost a dozen allocations per key (their views, decimal strings,
 * two objects), and the encoders below copy the bytes again. A field that is set is kept and
 * encoded from then on, as for RecordKeyValue. Its fields are accessors, not own properties:
 * spreading one or comparing it deeply sees no fields, so these go only to responses that
 * are encoded and dropped (keyValueFromRecord's and WireRecords' callers).
 */
class WireKeyValue implements pb.KeyValue {
  /** The encoding: a view of a slab or of `#owner`'s lent memory (see keyValueFromRecord). */
  readonly #bytes: Uint8Array;
  /** The records of the response it is in, or null (keyValueFromRecord). */
  readonly #owner: WireRecords | null;
  /** Whether #bytes are in memory the owner lends (it goes back to the pool once encoded). */
  readonly #lent: boolean;
  #fields: pb.KeyValue | null;
  #changed: boolean;

  constructor(bytes: Uint8Array, owner: WireRecords | null, lent: boolean) {
    this.#bytes = bytes;
    this.#owner = owner;
    this.#lent = lent;
    this.#fields = null;
    this.#changed = false;
  }

  #decoded(): pb.KeyValue {
    if (this.#fields === null) {
      const b = this.#bytes;
      // Fields of lent memory are decoded from a copy: they must outlive the memory's loan.
      if (this.#lent) assert(!this.#owner!.released, 'a key of an encoded range response read after its memory went back');
      this.#fields = decodeKeyValueFields(this.#lent ? Buffer.from(b) : Buffer.from(b.buffer, b.byteOffset, b.length));
    }
    return this.#fields;
  }

  #set(): pb.KeyValue {
    this.#changed = true;
    this.#owner?.unframe();
    return this.#decoded();
  }

  get key(): Buffer {
    return this.#decoded().key;
  }
  set key(v: Buffer) {
    this.#set().key = v;
  }
  get createRevision(): string {
    return this.#decoded().createRevision;
  }
  set createRevision(v: string) {
    this.#set().createRevision = v;
  }
  get modRevision(): string {
    return this.#decoded().modRevision;
  }
  set modRevision(v: string) {
    this.#set().modRevision = v;
  }
  get version(): string {
    return this.#decoded().version;
  }
  set version(v: string) {
    this.#set().version = v;
  }
  get value(): Buffer {
    return this.#decoded().value;
  }
  set value(v: Buffer) {
    this.#set().value = v;
  }
  get lease(): string {
    return this.#decoded().lease;
  }
  set lease(v: string) {
    this.#set().lease = v;
  }

  /** The encoding, or null when kv is not one of these or a field was set. */
  static bytesOf(kv: object): Uint8Array | null {
    if (!(#bytes in kv)) return null;
    const w = kv as WireKeyValue;
    if (w.#changed) return null;
    if (w.#lent) assert(!w.#owner!.released, 'a key of an encoded range response encoded after its memory went back');
    return w.#bytes;
  }
}

/**
 * Records are copied into slabs of this size (one view per record, not a buffer each); a slab
 * lives while any WireKeyValue cut from it does. Larger records get a buffer of their own.
 */
const WIRE_SLAB_BYTES = 64 * 1024;
const WIRE_SLAB_MAX_RECORD_BYTES = WIRE_SLAB_BYTES / 4;
let wireSlab = new ArrayBuffer(WIRE_SLAB_BYTES);
/** The slab as bytes, to write a record's field tag and length into without a view each. */
let wireSlabBytes = new Uint8Array(wireSlab);
let wireSlabPos = 0;
/** The source of the last copy and its ArrayBuffer: reading `.buffer` is a runtime call, and the reads of one range come from the same buffer. */
let lastSource: Uint8Array | null = null;
let lastSourceBuffer: ArrayBufferLike | null = null;

function sourceView(record: Uint8Array, length: number): Uint8Array {
  if (record !== lastSource) {
    lastSource = record;
    lastSourceBuffer = record.buffer;
  }
  return new Uint8Array(lastSourceBuffer as ArrayBufferLike, record.byteOffset, length);
}

/** Where `length` bytes (at most WIRE_SLAB_MAX_RECORD_BYTES) start in the shared slab, taken for a copy. */
function slabPlace(length: number): number {
  if (wireSlabPos + length > WIRE_SLAB_BYTES) {
    wireSlab = new ArrayBuffer(WIRE_SLAB_BYTES);
    wireSlabBytes = new Uint8Array(wireSlab);
    wireSlabPos = 0;
  }
  const at = wireSlabPos;
  wireSlabPos += length;
  return at;
}

/** A copy of record[0, length) in the shared slab (or its own buffer when large). */
function copyToSlab(record: Uint8Array, length: number): Uint8Array {
  const to = length > WIRE_SLAB_MAX_RECORD_BYTES ? new Uint8Array(length) : new Uint8Array(wireSlab, slabPlace(length), length);
  to.set(sourceView(record, length));
  return to;
}

/**
 * A KeyValue for a response that goes straight to the encoders (see WireKeyValue), from a copy
 * of record[0, length): the canonical encoding of its fields, as the store keeps them
 * (test/unit/pb/kv_record.test.ts). `record` may be a reused read buffer longer than `length`.
 */
export function keyValueFromRecord(record: Uint8Array, length: number): pb.KeyValue {
  return new WireKeyValue(copyToSlab(record, length), null, false);
}

/** A response's first bytes of records share the slab: a one-key range takes nothing from the pool. */
const WIRE_SHARED_BYTES = 16 * 1024;
/** Past them, records go into memory lent by responsePool in pieces of this size. */
const WIRE_LENT_BYTES = 128 * 1024;
/** Records larger than this get their own buffer rather than a piece's tail. */
const WIRE_LENT_MAX_RECORD_BYTES = WIRE_LENT_BYTES / 4;
/** On a response's kvs array: the records whose lent memory goes back once it is encoded. */
const WIRE_RECORDS = Symbol('wireRecords');

/**
 * The keys of one range response for the wire (WireKeyValue), and where their bytes are copied.
 * A paged list's ~0.5 MiB of keys in fresh slabs was garbage as large as the response, and V8
 * counts such bytes toward its next mark-compact (kube-mix: one every ~0.45 s on a 21 MB heap).
 * Past its first WIRE_SHARED_BYTES, a response's records go into memory lent by responsePool,
 * handed back by the encoder right after it has copied them (writeRangeResponse), or by the
 * HTTP/2 stream once the socket has written them (rangeResponseParts): the contract of these keys
 * is that they are encoded once and dropped. A key read or encoded after that is an assertion
 * failure, never another response's bytes; a response never encoded (its call gone) leaves its
 * memory to the garbage collector.
 *
 * Each record is copied with its field's tag and length in front (the response's repeated kvs
 * field, as encoded): while the keys stay in the order they came, unchanged, the response's kvs
 * are the runs of those bytes (`framed`), copied or sent as they are instead of key by key.
 */
export class WireRecords {
  readonly kvs: pb.KeyValue[] = [];
  #released = false;
  #copiedBytes = 0;
  /** Pieces lent so far; null until the first (most ranges, one key or a few, never take one). */
  #lent: Buffer[] | null = null;
  /** The piece being filled: its memory (`.buffer` is a runtime call: read once per piece), where it starts in it, and its end. */
  #piece: ArrayBufferLike | null = null;
  #pieceBytes: Uint8Array | null = null;
  #piecePos = 0;
  #pieceEnd = 0;
  /** The kvs are the framed records in `#runs` and the open run, in order (see framed). */
  #framed = true;
  #framedBytes = 0;
  #framedCount = 0;
  /** Closed runs of framed records; the open one is [#runStart, #runEnd) of #runMemory. */
  readonly #runs: Uint8Array[] = [];
  #runMemory: ArrayBufferLike | null = null;
  #runStart = 0;
  #runEnd = 0;

  constructor() {
    (this.kvs as pb.KeyValue[] & { [WIRE_RECORDS]?: WireRecords })[WIRE_RECORDS] = this;
  }

  get released(): boolean {
    return this.#released;
  }

  /** Whether `kvs` are this response's keys, framed in order (see the class's comment). */
  framed(kvs: unknown): boolean {
    return kvs === this.kvs && this.#framed && !this.#released && this.kvs.length === this.#framedCount;
  }

  /** The framed records' bytes (while framed). */
  get framedBytes(): number {
    return this.#framedBytes;
  }

  /**
   * Appends the key whose record is record[0, length) (a reused read buffer may be longer) but
   * its bytes [cutStart, cutEnd) (a keys-only range leaves the value field out), and returns the
   * copy (valid until the response is encoded).
   */
  push(record: Uint8Array, length: number, cutStart = length, cutEnd = length): Uint8Array {
    assert(!this.#released, 'records added to an encoded range response');
    assert(0 <= cutStart && cutStart <= cutEnd && cutEnd <= length, 'cut outside the record');
    const size = length - (cutEnd - cutStart);
    // The kvs field's tag and the record's length.
    const framedSize = 1 + varintSize(size) + size;
    this.#copiedBytes += framedSize;
    // Where the framed copy goes: its memory (as bytes, and its ArrayBuffer: `.buffer` is a runtime call) and offset.
    let bytes: Uint8Array;
    let memory: ArrayBufferLike;
    let at: number;
    let lent = false;
    const shared = this.#copiedBytes <= WIRE_SHARED_BYTES;
    if (framedSize > (shared ? WIRE_SLAB_MAX_RECORD_BYTES : WIRE_LENT_MAX_RECORD_BYTES)) {
      memory = new ArrayBuffer(framedSize);
      bytes = new Uint8Array(memory);
      at = 0;
    } else if (shared) {
      at = slabPlace(framedSize);
      bytes = wireSlabBytes;
      memory = wireSlab;
    } else {
      if (this.#piece === null || this.#piecePos + framedSize > this.#pieceEnd) this.#takePiece();
      bytes = this.#pieceBytes as Uint8Array;
      memory = this.#piece as ArrayBufferLike;
      at = this.#piecePos;
      this.#piecePos += framedSize;
      lent = true;
    }
    const start = at;
    bytes[at++] = 0x12;
    at = putVarint(bytes, at, size);
    const from = sourceView(record, length);
    if (cutStart === length) {
      bytes.set(from, at);
    } else {
      bytes.set(from.subarray(0, cutStart), at);
      bytes.set(from.subarray(cutEnd), at + cutStart);
    }
    const copy = new Uint8Array(memory, at, size);
    this.kvs.push(new WireKeyValue(copy, this, lent));
    this.#addRun(memory, start, at + size);
    return copy;
  }

  /** Adds framed bytes [start, end) of memory to the runs: to the open run when they follow it. */
  #addRun(memory: ArrayBufferLike, start: number, end: number): void {
    this.#framedBytes += end - start;
    this.#framedCount++;
    if (memory === this.#runMemory && start === this.#runEnd) {
      this.#runEnd = end;
      return;
    }
    this.#closeRun();
    this.#runMemory = memory;
    this.#runStart = start;
    this.#runEnd = end;
  }

  #closeRun(): void {
    if (this.#runMemory !== null && this.#runEnd > this.#runStart) this.#runs.push(new Uint8Array(this.#runMemory, this.#runStart, this.#runEnd - this.#runStart));
    this.#runMemory = null;
  }

  /**
   * Puts the keys in the order given by their positions, the first `count` of them (a sorted
   * range, cut at its limit). The keys left out stay in the lent memory until it goes back.
   */
  reorder(order: ArrayLike<number>, count: number): void {
    assert(!this.#released, 'range response records reordered after they were encoded');
    assert(count <= order.length && order.length === this.kvs.length, 'reorder of a different set of keys');
    const was = this.kvs.slice();
    const kvs = this.kvs;
    let same = count === was.length;
    for (let p = 0; p < count; p++) {
      kvs[p] = was[order[p]];
      if (order[p] !== p) same = false;
    }
    kvs.length = count;
    if (!same) this.#framed = false;
  }

  /** Keeps the first `count` keys (a range cut at its limit). */
  truncate(count: number): void {
    assert(count <= this.kvs.length, 'truncate past the keys');
    if (count === this.kvs.length) return;
    this.kvs.length = count;
    this.#framed = false;
  }

  /** A key's field was set: the response is encoded key by key. */
  unframe(): void {
    this.#framed = false;
  }

  #takePiece(): void {
    const piece = responsePool.take(WIRE_LENT_BYTES);
    assert(piece !== null, 'pool size class for wire records');
    if (this.#lent === null) this.#lent = [];
    this.#lent.push(piece);
    this.#piece = piece.buffer;
    this.#pieceBytes = new Uint8Array(this.#piece);
    this.#piecePos = piece.byteOffset;
    this.#pieceEnd = piece.byteOffset + piece.length;
  }

  /** Copies the framed records to w (the response's kvs field, encoded). */
  writeFramed(w: Writer): void {
    assert(this.framed(this.kvs), 'framed records written after a change or their release');
    this.#closeRun();
    for (const run of this.#runs) {
      w.buf.set(run, w.pos);
      w.pos += run.length;
    }
  }

  /** Hands the lent memory back: every key of it is dead from now on. Once is enough (an encoding again finds none). */
  release(): void {
    if (this.#released) {
      assert(this.#lent === null, 'lent memory kept after its release');
      return;
    }
    this.#released = true;
    if (this.#lent !== null) for (const b of this.#lent) responsePool.giveBack(b);
    this.#lent = null;
    this.#piece = null;
    this.#pieceBytes = null;
  }

  /**
   * The framed records as buffers to write as they are, and the end of every key (as release()):
   * the last run in each lent piece carries the piece under POOLED_BUFFER, for the writer to hand
   * back once the socket has written it (runs of one piece are written in order).
   */
  handOver(): Buffer[] {
    assert(this.framed(this.kvs), 'framed records handed over after a change or their release');
    this.#closeRun();
    this.#released = true;
    const out = this.#runs.map((r) => Buffer.from(r.buffer, r.byteOffset, r.length));
    if (this.#lent !== null) {
      const pieceOf = new Map<ArrayBufferLike, Buffer>();
      for (const p of this.#lent) pieceOf.set(p.buffer, p);
      for (let i = out.length - 1; i >= 0; i--) {
        const piece = pieceOf.get(out[i].buffer);
        if (piece === undefined) continue;
        (out[i] as Buffer & { [POOLED_BUFFER]?: Buffer })[POOLED_BUFFER] = piece;
        pieceOf.delete(out[i].buffer);
      }
      // Every piece holds a run: one taken holds the record that did not fit the one before.
      assert(pieceOf.size === 0, 'a lent piece without framed records');
    }
    this.#lent = null;
    this.#piece = null;
    this.#pieceBytes = null;
    return out;
  }

  /** The records of a response's kvs array, or null. */
  static of(kvs: unknown): WireRecords | null {
    return (kvs as { [WIRE_RECORDS]?: WireRecords } | null | undefined)?.[WIRE_RECORDS] ?? null;
  }
}

export function keyValueSize(kv: Obj): number {
  const bytes = WireKeyValue.bytesOf(kv);
  if (bytes !== null) return bytes.length;
  const record = RecordKeyValue.recordOf(kv);
  if (record !== null) return record.length;
  return (
    bytesFieldSize(kv.key) +
    int64FieldSize(kv.createRevision) +
    int64FieldSize(kv.modRevision) +
    int64FieldSize(kv.version) +
    bytesFieldSize(kv.value) +
    int64FieldSize(kv.lease)
  );
}

function writeKeyValue(w: Writer, kv: Obj): void {
  const bytes = WireKeyValue.bytesOf(kv);
  if (bytes !== null) {
    w.buf.set(bytes, w.pos);
    w.pos += bytes.length;
    return;
  }
  const record = RecordKeyValue.recordOf(kv);
  if (record !== null) {
    w.buf.set(record, w.pos);
    w.pos += record.length;
    return;
  }
  writeBytesField(w, 0x0a, kv.key);
  writeInt64Field(w, 0x10, kv.createRevision);
  writeInt64Field(w, 0x18, kv.modRevision);
  writeInt64Field(w, 0x20, kv.version);
  writeBytesField(w, 0x2a, kv.value);
  writeInt64Field(w, 0x30, kv.lease);
}

/** A message field: tag, length, body; absent (null) fields write nothing. */
function subSize(v: unknown, size: (o: Obj) => number, tagBytes = 1): number {
  if (v === null || v === undefined) return 0;
  isMessage(v);
  return messageFieldSize(size(v as Obj), tagBytes);
}

function writeSub(w: Writer, tag: number, v: unknown, size: (o: Obj) => number, write: (w: Writer, o: Obj) => void): void {
  if (v === null || v === undefined) return;
  w.tag(tag);
  w.varint(size(v as Obj));
  write(w, v as Obj);
}

function repeatedSize(v: unknown, size: (o: Obj) => number): number {
  const arr = repeated(v);
  if (arr === null) return 0;
  let n = 0;
  for (const e of arr) {
    isMessage(e);
    n += messageFieldSize(size(e as Obj));
  }
  return n;
}

function writeRepeated(w: Writer, tag: number, v: unknown, size: (o: Obj) => number, write: (w: Writer, o: Obj) => void): void {
  const arr = v as Obj[] | null | undefined;
  if (arr === null || arr === undefined) return;
  for (const e of arr) {
    w.tag(tag);
    w.varint(size(e));
    write(w, e);
  }
}

/** The records of a response whose keys are framed in order (WireRecords), or null. */
function framedRecords(r: Obj): WireRecords | null {
  const records = WireRecords.of(r.kvs);
  return records !== null && records.framed(r.kvs) ? records : null;
}

export function rangeResponseSize(r: Obj): number {
  const framed = framedRecords(r);
  const kvsSize = framed !== null ? framed.framedBytes : repeatedSize(r.kvs, keyValueSize);
  return subSize(r.header, responseHeaderSize) + kvsSize + boolFieldSize(r.more) + int64FieldSize(r.count);
}

function writeRangeResponse(w: Writer, r: Obj): void {
  writeSub(w, 0x0a, r.header, responseHeaderSize, writeResponseHeader);
  const framed = framedRecords(r);
  if (framed !== null) framed.writeFramed(w);
  else writeRepeated(w, 0x12, r.kvs, keyValueSize, writeKeyValue);
  // The keys are in the encoding now; their lent memory goes back (see WireRecords).
  WireRecords.of(r.kvs)?.release();
  writeRangeResponseTail(w, r);
}

/** Responses whose keys are fewer bytes than this are encoded whole (see rangeResponseParts). */
const PARTS_MIN_BYTES = 64 * 1024;

/** The fields after the keys. */
function writeRangeResponseTail(w: Writer, r: Obj): void {
  writeBoolField(w, 0x18, r.more);
  writeInt64Field(w, 0x20, r.count);
}

/**
 * A range response's encoding without copying its keys (when they are framed in order, see
 * WireRecords): the header's field, the runs of framed records as they are, then the fields
 * after them. The runs in pooled memory carry it under POOLED_BUFFER (the writer hands it back);
 * the response's keys are dead from then on. Null when the keys are not framed, or are fewer than
 * PARTS_MIN_BYTES: encode it whole.
 * One range of 1M keys (280 MB) took 1.4 s to encode in one turn of the event loop.
 */
export function rangeResponseParts(r: pb.RangeResponse | Obj): EncodedParts | null {
  isMessage(r);
  const o = r as Obj;
  const framed = framedRecords(o);
  // A small response is copied whole: one DATA frame rather than a few.
  if (framed === null || framed.framedBytes < PARTS_MIN_BYTES) return null;
  const headSize = subSize(o.header, responseHeaderSize);
  const tailSize = boolFieldSize(o.more) + int64FieldSize(o.count);
  const bytes = headSize + framed.framedBytes + tailSize;
  const head = new Writer(Buffer.allocUnsafe(headSize));
  writeSub(head, 0x0a, o.header, responseHeaderSize, writeResponseHeader);
  const tail = new Writer(Buffer.allocUnsafe(tailSize));
  writeRangeResponseTail(tail, o);
  const parts = framed.handOver();
  if (headSize > 0) parts.unshift(head.done());
  if (tailSize > 0) parts.push(tail.done());
  return { parts, bytes };
}

export function putResponseSize(r: Obj): number {
  return subSize(r.header, responseHeaderSize) + subSize(r.prevKv, keyValueSize);
}

function writePutResponse(w: Writer, r: Obj): void {
  writeSub(w, 0x0a, r.header, responseHeaderSize, writeResponseHeader);
  writeSub(w, 0x12, r.prevKv, keyValueSize, writeKeyValue);
}

export function deleteRangeResponseSize(r: Obj): number {
  return subSize(r.header, responseHeaderSize) + int64FieldSize(r.deleted) + repeatedSize(r.prevKvs, keyValueSize);
}

function writeDeleteRangeResponse(w: Writer, r: Obj): void {
  writeSub(w, 0x0a, r.header, responseHeaderSize, writeResponseHeader);
  writeInt64Field(w, 0x10, r.deleted);
  writeRepeated(w, 0x1a, r.prevKvs, keyValueSize, writeKeyValue);
}

function responseOpSize(op: Obj): number {
  return (
    subSize(op.responseRange, rangeResponseSize) +
    subSize(op.responsePut, putResponseSize) +
    subSize(op.responseDeleteRange, deleteRangeResponseSize) +
    subSize(op.responseTxn, txnResponseSize)
  );
}

function writeResponseOp(w: Writer, op: Obj): void {
  writeSub(w, 0x0a, op.responseRange, rangeResponseSize, writeRangeResponse);
  writeSub(w, 0x12, op.responsePut, putResponseSize, writePutResponse);
  writeSub(w, 0x1a, op.responseDeleteRange, deleteRangeResponseSize, writeDeleteRangeResponse);
  writeSub(w, 0x22, op.responseTxn, txnResponseSize, writeTxnResponse);
}

export function txnResponseSize(r: Obj): number {
  return subSize(r.header, responseHeaderSize) + boolFieldSize(r.succeeded) + repeatedSize(r.responses, responseOpSize);
}

function writeTxnResponse(w: Writer, r: Obj): void {
  writeSub(w, 0x0a, r.header, responseHeaderSize, writeResponseHeader);
  writeBoolField(w, 0x10, r.succeeded);
  writeRepeated(w, 0x1a, r.responses, responseOpSize, writeResponseOp);
}

function eventBodySize(ev: Obj): number {
  return enumFieldSize(ev.type) + subSize(ev.kv, keyValueSize) + subSize(ev.prevKv, keyValueSize);
}

function writeEventBody(w: Writer, ev: Obj): void {
  writeEnumField(w, 0x08, ev.type);
  writeSub(w, 0x12, ev.kv, keyValueSize, writeKeyValue);
  writeSub(w, 0x1a, ev.prevKv, keyValueSize, writeKeyValue);
}

function isFrozenEvent(ev: Obj): boolean {
  return Object.isFrozen(ev) && (ev.kv == null || Object.isFrozen(ev.kv)) && (ev.prevKv == null || Object.isFrozen(ev.prevKv));
}

const eventEncodings = new FrozenEncodings(isFrozenEvent, eventBodySize, writeEventBody);

function eventSize(ev: Obj): number {
  return eventEncodings.size(ev);
}

function writeEvent(w: Writer, ev: Obj): void {
  eventEncodings.write(w, ev);
}

export function watchResponseSize(r: Obj): number {
  return (
    subSize(r.header, responseHeaderSize) +
    int64FieldSize(r.watchId) +
    boolFieldSize(r.created) +
    boolFieldSize(r.canceled) +
    int64FieldSize(r.compactRevision) +
    stringFieldSize(r.cancelReason) +
    boolFieldSize(r.fragment) +
    repeatedSize(r.events, eventSize)
  );
}

function writeWatchResponse(w: Writer, r: Obj): void {
  writeSub(w, 0x0a, r.header, responseHeaderSize, writeResponseHeader);
  writeInt64Field(w, 0x10, r.watchId);
  writeBoolField(w, 0x18, r.created);
  writeBoolField(w, 0x20, r.canceled);
  writeInt64Field(w, 0x28, r.compactRevision);
  writeStringField(w, 0x32, r.cancelReason);
  writeBoolField(w, 0x38, r.fragment);
  writeRepeated(w, 0x5a, r.events, eventSize, writeEvent);
}

function encodeWith(obj: unknown, size: (o: Obj) => number, write: (w: Writer, o: Obj) => void): Buffer {
  isMessage(obj);
  const w = new Writer(allocEncoding(size(obj as Obj)));
  write(w, obj as Obj);
  return w.done();
}

/** The encoders below throw NotFast for input protobufjs must judge. */
export const encodeRangeResponse = (r: pb.RangeResponse | Obj): Buffer => encodeWith(r, rangeResponseSize, writeRangeResponse);
export const encodePutResponse = (r: pb.PutResponse | Obj): Buffer => encodeWith(r, putResponseSize, writePutResponse);
export const encodeDeleteRangeResponse = (r: pb.DeleteRangeResponse | Obj): Buffer =>
  encodeWith(r, deleteRangeResponseSize, writeDeleteRangeResponse);
export const encodeTxnResponse = (r: pb.TxnResponse | Obj): Buffer => encodeWith(r, txnResponseSize, writeTxnResponse);
export const encodeWatchResponse = (r: pb.WatchResponse | Obj): Buffer => encodeWith(r, watchResponseSize, writeWatchResponse);
/** Requests as a client sends them (the server's warm-up feeds them to the decoders). */
export const encodeRangeRequest = (r: pb.RangeRequest | Obj): Buffer => encodeWith(r, rangeRequestSize, writeRangeRequest);
export const encodePutRequest = (r: pb.PutRequest | Obj): Buffer => encodeWith(r, putRequestSize, writePutRequest);
export const encodeTxnRequest = (r: pb.TxnRequest | Obj): Buffer => encodeWith(r, txnRequestSize, writeTxnRequest);

// ---------------------------------------------------------------- request messages (encode)

export function rangeRequestSize(r: Obj): number {
  return (
    bytesFieldSize(r.key) +
    bytesFieldSize(r.rangeEnd) +
    int64FieldSize(r.limit) +
    int64FieldSize(r.revision) +
    enumFieldSize(r.sortOrder) +
    enumFieldSize(r.sortTarget) +
    boolFieldSize(r.serializable) +
    boolFieldSize(r.keysOnly) +
    boolFieldSize(r.countOnly) +
    int64FieldSize(r.minModRevision) +
    int64FieldSize(r.maxModRevision) +
    int64FieldSize(r.minCreateRevision) +
    int64FieldSize(r.maxCreateRevision)
  );
}

export function writeRangeRequest(w: Writer, r: Obj): void {
  writeBytesField(w, 0x0a, r.key);
  writeBytesField(w, 0x12, r.rangeEnd);
  writeInt64Field(w, 0x18, r.limit);
  writeInt64Field(w, 0x20, r.revision);
  writeEnumField(w, 0x28, r.sortOrder);
  writeEnumField(w, 0x30, r.sortTarget);
  writeBoolField(w, 0x38, r.serializable);
  writeBoolField(w, 0x40, r.keysOnly);
  writeBoolField(w, 0x48, r.countOnly);
  writeInt64Field(w, 0x50, r.minModRevision);
  writeInt64Field(w, 0x58, r.maxModRevision);
  writeInt64Field(w, 0x60, r.minCreateRevision);
  writeInt64Field(w, 0x68, r.maxCreateRevision);
}

export function putRequestSize(r: Obj): number {
  return (
    bytesFieldSize(r.key) +
    bytesFieldSize(r.value) +
    int64FieldSize(r.lease) +
    boolFieldSize(r.prevKv) +
    boolFieldSize(r.ignoreValue) +
    boolFieldSize(r.ignoreLease)
  );
}

export function writePutRequest(w: Writer, r: Obj): void {
  writeBytesField(w, 0x0a, r.key);
  writeBytesField(w, 0x12, r.value);
  writeInt64Field(w, 0x18, r.lease);
  writeBoolField(w, 0x20, r.prevKv);
  writeBoolField(w, 0x28, r.ignoreValue);
  writeBoolField(w, 0x30, r.ignoreLease);
}

export function deleteRangeRequestSize(r: Obj): number {
  return bytesFieldSize(r.key) + bytesFieldSize(r.rangeEnd) + boolFieldSize(r.prevKv);
}

export function writeDeleteRangeRequest(w: Writer, r: Obj): void {
  writeBytesField(w, 0x0a, r.key);
  writeBytesField(w, 0x12, r.rangeEnd);
  writeBoolField(w, 0x18, r.prevKv);
}

function compareSize(c: Obj): number {
  let n = enumFieldSize(c.result) + enumFieldSize(c.target) + bytesFieldSize(c.key);
  // oneof target_union: every member that is set goes out, zero or not (as protobufjs).
  if (c.version != null) n += oneofInt64Size(c.version);
  if (c.createRevision != null) n += oneofInt64Size(c.createRevision);
  if (c.modRevision != null) n += oneofInt64Size(c.modRevision);
  if (c.value != null) {
    const b = c.value;
    if (!(b instanceof Uint8Array)) throw new NotFast('bytes type');
    n += 1 + varintSize(b.length) + b.length;
  }
  if (c.lease != null) n += oneofInt64Size(c.lease);
  return n + bytesFieldSize(c.rangeEnd, 2);
}

function writeCompare(w: Writer, c: Obj): void {
  writeEnumField(w, 0x08, c.result);
  writeEnumField(w, 0x10, c.target);
  writeBytesField(w, 0x1a, c.key);
  if (c.version != null) {
    w.tag(0x20);
    w.int64(int64Wire(c.version));
  }
  if (c.createRevision != null) {
    w.tag(0x28);
    w.int64(int64Wire(c.createRevision));
  }
  if (c.modRevision != null) {
    w.tag(0x30);
    w.int64(int64Wire(c.modRevision));
  }
  if (c.value != null) {
    w.tag(0x3a);
    w.bytes(c.value as Uint8Array);
  }
  if (c.lease != null) {
    w.tag(0x40);
    w.int64(int64Wire(c.lease));
  }
  writeBytesField(w, (64 << 3) | WIRE_DELIMITED, c.rangeEnd);
}

function requestOpSize(op: Obj): number {
  return (
    subSize(op.requestRange, rangeRequestSize) +
    subSize(op.requestPut, putRequestSize) +
    subSize(op.requestDeleteRange, deleteRangeRequestSize) +
    subSize(op.requestTxn, txnRequestSize)
  );
}

function writeRequestOp(w: Writer, op: Obj): void {
  writeSub(w, 0x0a, op.requestRange, rangeRequestSize, writeRangeRequest);
  writeSub(w, 0x12, op.requestPut, putRequestSize, writePutRequest);
  writeSub(w, 0x1a, op.requestDeleteRange, deleteRangeRequestSize, writeDeleteRangeRequest);
  writeSub(w, 0x22, op.requestTxn, txnRequestSize, writeTxnRequest);
}

export function txnRequestSize(r: Obj): number {
  return repeatedSize(r.compare, compareSize) + repeatedSize(r.success, requestOpSize) + repeatedSize(r.failure, requestOpSize);
}

export function writeTxnRequest(w: Writer, r: Obj): void {
  writeRepeated(w, 0x0a, r.compare, compareSize, writeCompare);
  writeRepeated(w, 0x12, r.success, requestOpSize, writeRequestOp);
  writeRepeated(w, 0x1a, r.failure, requestOpSize, writeRequestOp);
}

export function compactionRequestSize(r: Obj): number {
  return int64FieldSize(r.revision) + boolFieldSize(r.physical);
}

export function writeCompactionRequest(w: Writer, r: Obj): void {
  writeInt64Field(w, 0x08, r.revision);
  writeBoolField(w, 0x10, r.physical);
}

export function requestHeaderSize(h: Obj): number {
  return int64FieldSize(h.ID) + stringFieldSize(h.username) + int64FieldSize(h.authRevision);
}

export function writeRequestHeader(w: Writer, h: Obj): void {
  writeInt64Field(w, 0x08, h.ID);
  writeStringField(w, 0x12, h.username);
  writeInt64Field(w, 0x18, h.authRevision);
}

export { subSize, writeSub, int64FieldSize, writeInt64Field };

// ---------------------------------------------------------------- request messages (decode)
// Objects in the proto-loader shape (src/pb/types.ts): every field present with its default,
// keys in the order protobufjs's toObject creates them.

function wrongType(): never {
  throw new NotFast('unexpected wire type');
}

export function decodeRangeRequestAt(r: Reader, end: number): pb.RangeRequest {
  const m: pb.RangeRequest = {
    key: EMPTY_BYTES,
    rangeEnd: EMPTY_BYTES,
    limit: '0',
    revision: '0',
    sortOrder: 0,
    sortTarget: 0,
    serializable: false,
    keysOnly: false,
    countOnly: false,
    minModRevision: '0',
    maxModRevision: '0',
    minCreateRevision: '0',
    maxCreateRevision: '0',
  };
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    switch (t >>> 3) {
      case 1:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.key = r.bytes();
        break;
      case 2:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.rangeEnd = r.bytes();
        break;
      case 3:
        if (wt !== WIRE_VARINT) wrongType();
        m.limit = r.int64String();
        break;
      case 4:
        if (wt !== WIRE_VARINT) wrongType();
        m.revision = r.int64String();
        break;
      case 5:
        if (wt !== WIRE_VARINT) wrongType();
        m.sortOrder = r.int32();
        break;
      case 6:
        if (wt !== WIRE_VARINT) wrongType();
        m.sortTarget = r.int32();
        break;
      case 7:
        if (wt !== WIRE_VARINT) wrongType();
        m.serializable = r.bool();
        break;
      case 8:
        if (wt !== WIRE_VARINT) wrongType();
        m.keysOnly = r.bool();
        break;
      case 9:
        if (wt !== WIRE_VARINT) wrongType();
        m.countOnly = r.bool();
        break;
      case 10:
        if (wt !== WIRE_VARINT) wrongType();
        m.minModRevision = r.int64String();
        break;
      case 11:
        if (wt !== WIRE_VARINT) wrongType();
        m.maxModRevision = r.int64String();
        break;
      case 12:
        if (wt !== WIRE_VARINT) wrongType();
        m.minCreateRevision = r.int64String();
        break;
      case 13:
        if (wt !== WIRE_VARINT) wrongType();
        m.maxCreateRevision = r.int64String();
        break;
      default:
        r.skip(wt);
    }
  }
  if (r.pos !== end) throw new NotFast('field overruns its message');
  return m;
}

export function decodePutRequestAt(r: Reader, end: number): pb.PutRequest {
  const m: pb.PutRequest = { key: EMPTY_BYTES, value: EMPTY_BYTES, lease: '0', prevKv: false, ignoreValue: false, ignoreLease: false };
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    switch (t >>> 3) {
      case 1:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.key = r.bytes();
        break;
      case 2:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.value = r.bytes();
        break;
      case 3:
        if (wt !== WIRE_VARINT) wrongType();
        m.lease = r.int64String();
        break;
      case 4:
        if (wt !== WIRE_VARINT) wrongType();
        m.prevKv = r.bool();
        break;
      case 5:
        if (wt !== WIRE_VARINT) wrongType();
        m.ignoreValue = r.bool();
        break;
      case 6:
        if (wt !== WIRE_VARINT) wrongType();
        m.ignoreLease = r.bool();
        break;
      default:
        r.skip(wt);
    }
  }
  if (r.pos !== end) throw new NotFast('field overruns its message');
  return m;
}

export function decodeDeleteRangeRequestAt(r: Reader, end: number): pb.DeleteRangeRequest {
  const m: pb.DeleteRangeRequest = { key: EMPTY_BYTES, rangeEnd: EMPTY_BYTES, prevKv: false };
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    switch (t >>> 3) {
      case 1:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.key = r.bytes();
        break;
      case 2:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.rangeEnd = r.bytes();
        break;
      case 3:
        if (wt !== WIRE_VARINT) wrongType();
        m.prevKv = r.bool();
        break;
      default:
        r.skip(wt);
    }
  }
  if (r.pos !== end) throw new NotFast('field overruns its message');
  return m;
}

const COMPARE_UNION = ['', '', '', '', 'version', 'createRevision', 'modRevision', 'value', 'lease'] as const;

function decodeCompareAt(r: Reader, end: number): pb.Compare {
  const m = { result: 0, target: 0, key: EMPTY_BYTES, rangeEnd: EMPTY_BYTES } as pb.Compare;
  const o = m as unknown as Obj;
  let member = '';
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    const f = t >>> 3;
    switch (f) {
      case 1:
        if (wt !== WIRE_VARINT) wrongType();
        m.result = r.int32();
        break;
      case 2:
        if (wt !== WIRE_VARINT) wrongType();
        m.target = r.int32();
        break;
      case 3:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.key = r.bytes();
        break;
      case 4:
      case 5:
      case 6:
      case 8: {
        if (wt !== WIRE_VARINT) wrongType();
        const name = COMPARE_UNION[f];
        // Two different members: protobufjs and the wire disagree on which wins; let it decide.
        if (member !== '' && member !== name) throw new NotFast('two oneof members');
        member = name;
        o[name] = r.int64String();
        o.targetUnion = name;
        break;
      }
      case 7:
        if (wt !== WIRE_DELIMITED) wrongType();
        if (member !== '' && member !== 'value') throw new NotFast('two oneof members');
        member = 'value';
        m.value = r.bytes();
        m.targetUnion = 'value';
        break;
      case 64:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.rangeEnd = r.bytes();
        break;
      default:
        r.skip(wt);
    }
  }
  if (r.pos !== end) throw new NotFast('field overruns its message');
  return m;
}

const REQUEST_OP_MEMBERS = ['', 'requestRange', 'requestPut', 'requestDeleteRange', 'requestTxn'] as const;

function decodeRequestOpAt(r: Reader, end: number): pb.RequestOp {
  const m = {} as pb.RequestOp;
  const o = m as unknown as Obj;
  let member = '';
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    const f = t >>> 3;
    if (f >= 1 && f <= 4) {
      if (wt !== WIRE_DELIMITED) wrongType();
      const name = REQUEST_OP_MEMBERS[f];
      if (member !== '' && member !== name) throw new NotFast('two oneof members');
      member = name;
      const subEnd = r.messageEnd();
      let v: unknown;
      if (f === 1) v = decodeRangeRequestAt(r, subEnd);
      else if (f === 2) v = decodePutRequestAt(r, subEnd);
      else if (f === 3) v = decodeDeleteRangeRequestAt(r, subEnd);
      else v = decodeTxnRequestAt(r, subEnd);
      o[name] = v;
      o.request = name;
    } else {
      r.skip(wt);
    }
  }
  if (r.pos !== end) throw new NotFast('field overruns its message');
  return m;
}

/** Nesting bound for txns (etcd limits ops, not depth; protobufjs stops at 100). */
const MAX_TXN_DEPTH = 64;
let txnDepth = 0;

export function decodeTxnRequestAt(r: Reader, end: number): pb.TxnRequest {
  if (txnDepth >= MAX_TXN_DEPTH) throw new NotFast('txn nesting');
  txnDepth++;
  try {
    const m: pb.TxnRequest = { compare: [], success: [], failure: [] };
    while (r.pos < end) {
      const t = r.tag();
      const wt = t & 7;
      switch (t >>> 3) {
        case 1:
          if (wt !== WIRE_DELIMITED) wrongType();
          m.compare.push(decodeCompareAt(r, r.messageEnd()));
          break;
        case 2:
          if (wt !== WIRE_DELIMITED) wrongType();
          m.success.push(decodeRequestOpAt(r, r.messageEnd()));
          break;
        case 3:
          if (wt !== WIRE_DELIMITED) wrongType();
          m.failure.push(decodeRequestOpAt(r, r.messageEnd()));
          break;
        default:
          r.skip(wt);
      }
    }
    if (r.pos !== end) throw new NotFast('field overruns its message');
    return m;
  } finally {
    txnDepth--;
  }
}

export function decodeCompactionRequestAt(r: Reader, end: number): pb.CompactionRequest {
  const m: pb.CompactionRequest = { revision: '0', physical: false };
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    switch (t >>> 3) {
      case 1:
        if (wt !== WIRE_VARINT) wrongType();
        m.revision = r.int64String();
        break;
      case 2:
        if (wt !== WIRE_VARINT) wrongType();
        m.physical = r.bool();
        break;
      default:
        r.skip(wt);
    }
  }
  if (r.pos !== end) throw new NotFast('field overruns its message');
  return m;
}

export function decodeRequestHeaderAt(r: Reader, end: number): pb.RequestHeader {
  const m: pb.RequestHeader = { ID: '0', username: '', authRevision: '0' };
  while (r.pos < end) {
    const t = r.tag();
    const wt = t & 7;
    switch (t >>> 3) {
      case 1:
        if (wt !== WIRE_VARINT) wrongType();
        m.ID = r.uint64String();
        break;
      case 2:
        if (wt !== WIRE_DELIMITED) wrongType();
        m.username = r.string();
        break;
      case 3:
        if (wt !== WIRE_VARINT) wrongType();
        m.authRevision = r.uint64String();
        break;
      default:
        r.skip(wt);
    }
  }
  if (r.pos !== end) throw new NotFast('field overruns its message');
  return m;
}

function decodeTop<T>(buf: Buffer, at: (r: Reader, end: number) => T): T {
  const r = new Reader(buf);
  return at(r, buf.length);
}

export const decodeRangeRequest = (buf: Buffer): pb.RangeRequest => decodeTop(buf, decodeRangeRequestAt);
export const decodePutRequest = (buf: Buffer): pb.PutRequest => decodeTop(buf, decodePutRequestAt);
export const decodeDeleteRangeRequest = (buf: Buffer): pb.DeleteRangeRequest => decodeTop(buf, decodeDeleteRangeRequestAt);
export const decodeTxnRequest = (buf: Buffer): pb.TxnRequest => decodeTop(buf, decodeTxnRequestAt);
