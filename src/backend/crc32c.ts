// CRC-32C (Castagnoli), the checksum etcd's Hash and HashKV use; Node 20 has no built-in.
import assert from 'node:assert';

const POLY_REVERSED = 0x82f63b78;

function makeTables(): Uint32Array[] {
  // Slicing-by-8 tables: eight bytes per step instead of one keeps hashing a large store fast.
  const tables: Uint32Array[] = [];
  const t0 = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY_REVERSED : c >>> 1;
    t0[i] = c >>> 0;
  }
  tables.push(t0);
  for (let t = 1; t < 8; t++) {
    const prev = tables[t - 1];
    const cur = new Uint32Array(256);
    for (let i = 0; i < 256; i++) cur[i] = (prev[i] >>> 8) ^ t0[prev[i] & 0xff];
    tables.push(cur);
  }
  return tables;
}

const T = makeTables();
const [T0, T1, T2, T3, T4, T5, T6, T7] = T;

/** Incremental CRC-32C: feed chunks with update(), read the value with digest(). */
export class Crc32c {
  private crc = 0xffffffff;

  /** Adds buf[0, length) (all of it by default). */
  update(buf: Uint8Array, length = buf.length): this {
    assert(length >= 0 && length <= buf.length, 'crc32c: length beyond the buffer');
    let c = this.crc;
    let i = 0;
    const n = length;
    while (n - i >= 8) {
      c ^= buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16) | (buf[i + 3] << 24);
      c =
        T7[c & 0xff] ^
        T6[(c >>> 8) & 0xff] ^
        T5[(c >>> 16) & 0xff] ^
        T4[c >>> 24] ^
        T3[buf[i + 4]] ^
        T2[buf[i + 5]] ^
        T1[buf[i + 6]] ^
        T0[buf[i + 7]];
      i += 8;
    }
    while (i < n) {
      c = (c >>> 8) ^ T0[(c ^ buf[i]) & 0xff];
      i++;
    }
    this.crc = c;
    return this;
  }

  /** The checksum as an unsigned 32-bit number. */
  digest(): number {
    return (this.crc ^ 0xffffffff) >>> 0;
  }
}

export function crc32c(buf: Uint8Array): number {
  return new Crc32c().update(buf).digest();
}
