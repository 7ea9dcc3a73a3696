// Large response buffers, reused once the socket has written them.
//
// A paged list's response (500 objects of ~1 KiB: ~520 KiB) was a fresh Buffer per page. Node's
// Buffers live outside V8's heap, but V8 counts the bytes allocated for them since the last full
// collection toward starting the next one: with two clients paging (kube-mix), a mark-compact ran
// every 120-250 ms on a ~22 MB heap, and its pauses and incremental steps were part of every other
// request's tail. A response's buffer is handed back by the HTTP/2 connection, from the callback of
// the socket write that carried its last bytes; the pieces a range response's keys were copied into
// are handed back by the encoder that copied them out (src/pb/kv_wire.ts, WireRecords). A buffer
// that never comes back (its stream reset, its connection gone, its response never encoded) is left
// to the garbage collector like any other.
import assert from 'node:assert';

/** Encodings smaller than this come from Node's allocator (a copy or a pool slice is cheap). */
export const POOLED_MIN_BYTES = 64 * 1024;
/** Larger ones are rare enough to allocate each time. */
export const POOLED_MAX_BYTES = 4 * 1024 * 1024;
/** Free bytes kept across all sizes; what is handed back beyond it is dropped. */
export const POOL_FREE_MAX_BYTES = 4 * 1024 * 1024;

/**
 * On the exact-length view of a pooled buffer that a stream writes (the gRPC frame): the pool's
 * buffer to hand back once written. A registered symbol, so that the HTTP/2 layer reads it without
 * importing the encoders.
 */
export const POOLED_BUFFER = Symbol.for('etcd-ts.pooledBuffer');
/** On a pool's buffer: lent out (true) or free (false). */
const LENT = Symbol('lent');

type PoolBuffer = Buffer & { [LENT]?: boolean };

export class BufferPool {
  /** Free buffers per size class: class c holds buffers of POOLED_MIN_BYTES << c bytes. */
  private readonly free: PoolBuffer[][] = [];
  private freeBytes = 0;
  /** Buffers handed back so far, kept or dropped (for tests). */
  returned = 0;

  constructor(private readonly maxFreeBytes = POOL_FREE_MAX_BYTES) {
    for (let bytes = POOLED_MIN_BYTES; bytes <= POOLED_MAX_BYTES; bytes *= 2) this.free.push([]);
  }

  /** A buffer of at least `bytes` (its size class), or null for sizes the pool does not keep. */
  take(bytes: number): Buffer | null {
    if (bytes < POOLED_MIN_BYTES || bytes > POOLED_MAX_BYTES) return null;
    const c = sizeClass(bytes);
    const list = this.free[c]!;
    let buf = list.pop();
    if (buf !== undefined) {
      this.freeBytes -= buf.length;
      assert(buf[LENT] === false && this.freeBytes >= 0, 'pool buffer lent twice');
    } else {
      // Slow: its own memory, never a slice of Node's shared pool.
      buf = Buffer.allocUnsafeSlow(POOLED_MIN_BYTES << c) as PoolBuffer;
    }
    buf[LENT] = true;
    return buf;
  }

  /** Hands `buf` back; the caller must hold no view of it any more. */
  giveBack(buf: Buffer): void {
    const b = buf as PoolBuffer;
    assert(b[LENT] === true, 'pool buffer handed back twice or never lent');
    b[LENT] = false;
    this.returned++;
    if (this.freeBytes + b.length > this.maxFreeBytes) return;
    const c = sizeClass(b.length);
    assert(POOLED_MIN_BYTES << c === b.length, 'pool buffer of a foreign size');
    this.free[c]!.push(b);
    this.freeBytes += b.length;
  }

  /** Bytes kept free now. */
  get freeByteCount(): number {
    return this.freeBytes;
  }
}

function sizeClass(bytes: number): number {
  let c = 0;
  while (POOLED_MIN_BYTES << c < bytes) c++;
  return c;
}

/** The process's pool for gRPC responses (src/pb/wire.ts lends, src/h2/connection.ts hands back). */
export const responsePool = new BufferPool();
