// Shapes shared by the MVCC store, the watch hub and the API adapters.
// Revisions and versions are JS numbers: they count writes and stay far below 2^53.
// Lease IDs are int64 chosen by the server from a wide random space: keep them as bigint.

export interface KeyValue {
  key: Buffer;
  createRevision: number;
  modRevision: number;
  version: number;
  value: Buffer;
  /** 0n when the key has no lease. */
  lease: bigint;
}

export const EventType = { PUT: 0, DELETE: 1 } as const;
export type EventTypeValue = (typeof EventType)[keyof typeof EventType];

/**
 * One change at one revision. For DELETE, `kv` carries only `key` and `modRevision`
 * (the deleting revision), as etcd's tombstone events do; `prevKv` is the value before the
 * change when the store knows it (null for a PUT that created the key).
 */
export interface MvccEvent {
  type: EventTypeValue;
  kv: KeyValue;
  prevKv: KeyValue | null;
}
