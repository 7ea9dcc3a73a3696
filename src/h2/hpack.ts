// HPACK (RFC 7541) for the server side of an HTTP/2 connection: a full decoder (static and
// dynamic table, Huffman-coded strings) for the header blocks clients send, and an encoder that
// never indexes, so the peer's table size does not concern us and our side keeps no table.
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
  private block: Buffer = Buffer.alloc(0);

  constructor(private readonly settingsTableBytes = DEFAULT_HEADER_TABLE_BYTES) {
    this.maxDynamicBytes = settingsTableBytes;
  }

  /**
   * Decodes one whole header block into `onField` calls. Throws HpackError on anything malformed
   * (a connection error: COMPRESSION_ERROR); the table is then unusable, as is the connection.
   */
  decode(block: Buffer, onField: (name: string, value: string) => void): void {
    this.block = block;
    this.pos = 0;
    let fieldSeen = false;
    while (this.pos < block.length) {
      const b = block[this.pos]!;
      if (b & 0x80) {
        const [name, value] = this.entry(this.int(7));
        onField(name, value);
        fieldSeen = true;
      } else if (b & 0x40) {
        const field = this.literal(6);
        this.insert(field);
        onField(field[0], field[1]);
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
        onField(name, value);
        fieldSeen = true;
      }
    }
    this.block = Buffer.alloc(0);
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
  const add = (name: string, value: string): void => {
    if (/[\0\r\n]/.test(value)) throw new HpackError(`invalid value for header ${name}`);
    if (name === ':status' && STATUS_INDEX[value] !== undefined) {
      parts.push(Buffer.from([0x80 | STATUS_INDEX[value]!]));
      return;
    }
    const n = Buffer.from(name.toLowerCase(), 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0]), encodeInt(n.length, 7, 0), n, encodeInt(v.length, 7, 0), v);
  };
  const names = Object.keys(headers);
  for (const pseudo of [true, false]) {
    for (const name of names) {
      if (name.startsWith(':') !== pseudo) continue;
      const v = headers[name];
      if (v === undefined) continue;
      if (Array.isArray(v)) {
        for (const one of v as readonly string[]) add(name, String(one));
      } else {
        add(name, String(v));
      }
    }
  }
  return Buffer.concat(parts);
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
