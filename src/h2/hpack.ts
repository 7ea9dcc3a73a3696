// HPACK (RFC 7541) for the server side of an HTTP/2 connection: a full decoder (static and
// dynamic table, Huffman-coded strings) for the header blocks clients send; an encoder that never
// indexes (encodeHeaders); and a per-connection one (FrozenHeaderEncoder) that indexes only the
// fields of constant header objects, which never fill the peer's table.
import assert from 'node:assert';
import { huffmanDecode } from './huffman';

/** RFC 7541 Appendix A. Index 1 is STATIC_TABLE[0]. */
const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
];

/** Per-entry overhead in the table size (RFC 7541 section 4.1). */
const ENTRY_OVERHEAD_BYTES = 32;

/** SETTINGS_HEADER_TABLE_SIZE's default; we never announce another, so it is the decoder's limit. */
export const DEFAULT_HEADER_TABLE_BYTES = 4096;

/** HPACK integers beyond this are not something a sane header block holds. */
const MAX_INT = 2 ** 31 - 1;

export class HpackError extends Error {}

/** One header field as decoded, names lowercase as the client must send them. */
export type HeaderField = readonly [name: string, value: string];

/** What the decoder holds between blocks (a block is not kept past its decode). */
const NO_BLOCK = Buffer.alloc(0);

/**
 * The decoding side of one connection. Its dynamic table changes with every header block, so
 * every block of the connection must go through it, in order, even ones whose stream is refused.
 */
export class HpackDecoder {
  /** Newest first: index 62 is dynamic[0]. */
  private readonly dynamic: HeaderField[] = [];
  private dynamicBytes = 0;
  private maxDynamicBytes: number;
  private pos = 0;
  private block: Buffer = NO_BLOCK;
  private readonly fields: string[] = [];

  constructor(private readonly settingsTableBytes = DEFAULT_HEADER_TABLE_BYTES) {
    this.maxDynamicBytes = settingsTableBytes;
  }

  /**
   * Decodes one whole header block into its fields in order, as name, value, name, value, ...
   * The array is the decoder's own, valid until the next call. (A list rather than a callback per
   * field: callers passed a new closure per block, and the first block of a second connection
   * deoptimized the request path with "wrong call target".) Throws HpackError on anything
   * malformed (a connection error: COMPRESSION_ERROR); the table is then unusable, as is the
   * connection.
   */
  decode(block: Buffer): readonly string[] {
    const out = this.fields;
    out.length = 0;
    this.block = block;
    this.pos = 0;
    let fieldSeen = false;
    while (this.pos < block.length) {
      const b = block[this.pos]!;
      if (b & 0x80) {
        const [name, value] = this.entry(this.int(7));
        out.push(name, value);
        fieldSeen = true;
      } else if (b & 0x40) {
        const field = this.literal(6);
        this.insert(field);
        out.push(field[0], field[1]);
        fieldSeen = true;
      } else if (b & 0x20) {
        // Only allowed before the first field of a block (RFC 7541 section 4.2).
        if (fieldSeen) throw new HpackError('table size update after a header field');
        const size = this.int(5);
        if (size > this.settingsTableBytes) throw new HpackError(`table size update ${size} above ${this.settingsTableBytes}`);
        this.maxDynamicBytes = size;
        this.evict(0);
      } else {
        // Literal without indexing (0000) or never indexed (0001): both 4-bit name indexes.
        const [name, value] = this.literal(4);
        out.push(name, value);
        fieldSeen = true;
      }
    }
    this.block = NO_BLOCK;
    return out;
  }

  /** Bytes the dynamic table holds by HPACK's accounting (for tests and assertions). */
  get tableBytes(): number {
    return this.dynamicBytes;
  }

  private entry(index: number): HeaderField {
    if (index === 0) throw new HpackError('index 0');
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]!;
    const e = this.dynamic[index - STATIC_TABLE.length - 1];
    if (e === undefined) throw new HpackError(`index ${index} beyond the table`);
    return e;
  }

  private literal(prefixBits: number): HeaderField {
    const nameIndex = this.int(prefixBits);
    const name = nameIndex === 0 ? this.string() : this.entry(nameIndex)[0];
    return [name, this.string()];
  }

  private insert(field: HeaderField): void {
    const size = field[0].length + field[1].length + ENTRY_OVERHEAD_BYTES;
    // An entry larger than the table empties it and is not added (section 4.4).
    this.evict(size);
    if (size > this.maxDynamicBytes) return;
    this.dynamic.unshift(field);
    this.dynamicBytes += size;
    assert(this.dynamicBytes <= this.maxDynamicBytes, 'HPACK table over its size');
  }

  /** Evicts oldest entries until `incoming` more bytes fit. */
  private evict(incoming: number): void {
    while (this.dynamic.length > 0 && this.dynamicBytes + incoming > this.maxDynamicBytes) {
      const e = this.dynamic.pop()!;
      this.dynamicBytes -= e[0].length + e[1].length + ENTRY_OVERHEAD_BYTES;
    }
  }

  private int(prefixBits: number): number {
    const block = this.block;
    if (this.pos >= block.length) throw new HpackError('truncated integer');
    const max = (1 << prefixBits) - 1;
    let v = block[this.pos++]! & max;
    if (v < max) return v;
    let shift = 0;
    for (;;) {
      if (this.pos >= block.length) throw new HpackError('truncated integer');
      const b = block[this.pos++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (v > MAX_INT) throw new HpackError('integer overflow');
      if ((b & 0x80) === 0) return v;
      shift += 7;
    }
  }

  private string(): string {
    const huffman = (this.block[this.pos]! & 0x80) !== 0;
    const len = this.int(7);
    if (this.pos + len > this.block.length) throw new HpackError('truncated string');
    const raw = this.block.subarray(this.pos, this.pos + len);
    this.pos += len;
    if (!huffman) return raw.toString('latin1');
    const decoded = huffmanDecode(raw);
    if (decoded === undefined) throw new HpackError('bad Huffman code');
    return decoded.toString('latin1');
  }
}

/** Static-table indexes of the fields a gRPC server sends most. */
const STATUS_INDEX: Readonly<Record<string, number>> = { '200': 8, '204': 9, '206': 10, '304': 11, '400': 12, '404': 13, '500': 14 };

/** A header value as Node's http2 API takes it. */
export type OutgoingValue = string | number | readonly string[] | undefined;

/**
 * Encodes header fields, pseudo-headers first, each as a literal without indexing (":status"
 * with a static value as one indexed byte). No Huffman coding, no dynamic table.
 */
export function encodeHeaders(headers: Readonly<Record<string, OutgoingValue>>): Buffer {
  const parts: Buffer[] = [];
  forEachField(headers, (name, value) => parts.push(staticStatus(name, value) ?? literal(name, value, false)));
  return Buffer.concat(parts);
}

/** Pseudo-headers first (RFC 9113 section 8.3), each value of an array as its own field. */
function forEachField(headers: Readonly<Record<string, OutgoingValue>>, f: (name: string, value: string) => void): void {
  const names = Object.keys(headers);
  for (const pseudo of [true, false]) {
    for (const name of names) {
      if (name.startsWith(':') !== pseudo) continue;
      const v = headers[name];
      if (v === undefined) continue;
      if (Array.isArray(v)) {
        for (const one of v as readonly string[]) f(name.toLowerCase(), String(one));
      } else {
        f(name.toLowerCase(), String(v));
      }
    }
  }
}

/** ":status" with a value of the static table, as one indexed byte; undefined for anything else. */
function staticStatus(name: string, value: string): Buffer | undefined {
  const index = name === ':status' ? STATUS_INDEX[value] : undefined;
  return index === undefined ? undefined : Buffer.from([0x80 | index]);
}

/** A literal field with a new name: with incremental indexing (0x40) or without (0x00). */
function literal(name: string, value: string, indexing: boolean): Buffer {
  if (/[\0\r\n]/.test(value)) throw new HpackError(`invalid value for header ${name}`);
  const n = Buffer.from(name, 'latin1');
  const v = Buffer.from(value, 'latin1');
  return Buffer.concat([Buffer.from([indexing ? 0x40 : 0]), encodeInt(n.length, 7, 0), n, encodeInt(v.length, 7, 0), v]);
}

/**
 * Every response carries the same headers and trailers (frozen objects: content-type, grpc-encoding,
 * grpc-status 0, ...). Sent as literals they were ~150 bytes per response and a string allocation
 * per field in the client's decoder; indexed in the peer's dynamic table, a byte each. Only fields of
 * frozen objects are indexed, so the table holds a handful of entries and never evicts: the index of
 * an entry is fixed by how many were inserted after it. Other header objects go out as literals
 * without indexing (encodeHeaders) and leave the table alone. Blocks must reach the peer in the
 * order they were encoded (the connection queues each as it is made).
 */
export class FrozenHeaderEncoder {
  /** "name\0value" -> insertion number. */
  private readonly entries = new Map<string, number>();
  private inserted = 0;
  private tableBytes = 0;
  /** The most of the peer's table we use: its SETTINGS_HEADER_TABLE_SIZE, at most the default. */
  private limitBytes = DEFAULT_HEADER_TABLE_BYTES;
  /** A size change the next block must start with (RFC 7541 section 4.2). */
  private sizeUpdatePending = false;
  /** Encoded blocks of frozen objects, valid while no entry was inserted since (`inserted`). */
  private readonly blocks = new WeakMap<object, { inserted: number; block: Buffer }>();

  /** The peer's SETTINGS_HEADER_TABLE_SIZE. Any change empties our use of its table. */
  setPeerTableSize(bytes: number): void {
    const limit = Math.min(bytes, DEFAULT_HEADER_TABLE_BYTES);
    if (limit === this.limitBytes) return;
    this.limitBytes = limit;
    this.entries.clear();
    this.inserted = 0;
    this.tableBytes = 0;
    this.sizeUpdatePending = true;
  }

  encode(headers: Readonly<Record<string, OutgoingValue>>): Buffer {
    if (!Object.isFrozen(headers)) {
      if (!this.sizeUpdatePending) return encodeHeaders(headers);
      return Buffer.concat([this.takeSizeUpdate(), encodeHeaders(headers)]);
    }
    const cached = this.blocks.get(headers);
    if (cached !== undefined && cached.inserted === this.inserted && !this.sizeUpdatePending) return cached.block;
    const parts: Buffer[] = [];
    const sizeUpdate = this.sizeUpdatePending;
    if (sizeUpdate) parts.push(this.takeSizeUpdate());
    const insertedBefore = this.inserted;
    forEachField(headers, (name, value) => {
      const status = staticStatus(name, value);
      if (status !== undefined) {
        parts.push(status);
        return;
      }
      const key = `${name}\0${value}`;
      const seq = this.entries.get(key);
      if (seq !== undefined) {
        parts.push(encodeInt(STATIC_TABLE.length + (this.inserted - seq), 7, 0x80));
        return;
      }
      const entryBytes = Buffer.byteLength(name, 'latin1') + Buffer.byteLength(value, 'latin1') + ENTRY_OVERHEAD_BYTES;
      const indexing = this.tableBytes + entryBytes <= this.limitBytes;
      parts.push(literal(name, value, indexing));
      if (!indexing) return;
      this.entries.set(key, this.inserted);
      this.inserted++;
      this.tableBytes += entryBytes;
    });
    const block = Buffer.concat(parts);
    // A block that inserted fields or resized the table is good once; the next one, all indexed, is kept.
    if (!sizeUpdate && this.inserted === insertedBefore) this.blocks.set(headers, { inserted: this.inserted, block });
    return block;
  }

  /** Empties the peer's table (size 0), then allows our limit again: two updates, smallest first. */
  private takeSizeUpdate(): Buffer {
    this.sizeUpdatePending = false;
    return Buffer.concat([encodeInt(0, 5, 0x20), encodeInt(this.limitBytes, 5, 0x20)]);
  }
}

/** An HPACK integer with an N-bit prefix; `high` holds the bits above the prefix. */
export function encodeInt(value: number, prefixBits: number, high: number): Buffer {
  assert(Number.isSafeInteger(value) && value >= 0 && value <= MAX_INT, 'bad HPACK integer');
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([high | value]);
  const bytes = [high | max];
  let rest = value - max;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}
