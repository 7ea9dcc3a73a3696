// The parts of bbolt's file format (go.etcd.io/bbolt) that bbolt_reader.ts and bbolt_writer.ts share.
export const BBOLT_PAGE_HEADER_BYTES = 16;
export const BBOLT_ELEMENT_BYTES = 16;
export const BBOLT_BRANCH_PAGE = 0x01;
export const BBOLT_LEAF_PAGE = 0x02;
export const BBOLT_META_PAGE = 0x04;
export const BBOLT_FREELIST_PAGE = 0x10;
/** A leaf element holding a bucket (its header, and the bucket's page when inline). */
export const BBOLT_BUCKET_LEAF_FLAG = 0x01;
export const BBOLT_BUCKET_HEADER_BYTES = 16;
export const BBOLT_MAGIC = 0xed0cdaed;
export const BBOLT_VERSION = 2;
/** The meta fields the checksum covers: magic .. txid. */
export const BBOLT_META_CHECKSUMMED_BYTES = 56;

/** FNV-1a, 64 bits: the checksum of a bbolt meta page. */
export function fnv64a(b: Buffer): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of b) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h;
}
