// Reading a call's request metadata without building it when it cannot hold the key.
import type * as grpc from '@grpc/grpc-js';

/** A call whose request metadata handlers read: grpc-js's calls and the direct paths' (fast_unary.ts). */
export interface MetadataCarrier {
  readonly metadata: grpc.Metadata;
  /**
   * False when the call surely has no `key` metadata. A direct unary call answers this from its
   * request headers and builds its Metadata only on first use (most puts never need it).
   */
  mayCarry?: (key: string) => boolean;
  /** The first value of a request header, read without building `metadata` (direct unary calls). */
  firstHeader?: (key: string) => string | undefined;
}

/** The values of `key` in the call's metadata (grpc-js's Metadata.get), without building it when none can exist. */
export function metadataValues(call: MetadataCarrier, key: string): grpc.MetadataValue[] {
  if (call.mayCarry !== undefined && !call.mayCarry(key)) return [];
  return call.metadata.get(key);
}

/** The first value of a text metadata key, or undefined. */
export function firstMetadataValue(call: MetadataCarrier, key: string): string | undefined {
  if (call.firstHeader !== undefined) return call.firstHeader(key);
  const v = metadataValues(call, key);
  return v.length > 0 ? String(v[0]) : undefined;
}
