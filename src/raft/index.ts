// Public surface of the Raft core.
export * from './types';
export * from './errors';
export { MemoryStorage } from './storage';
export type { EntryDataReader } from './storage';
export type { Storage } from './storage';
export { encodeConfChange, decodeConfChange } from './confchange';
export { RawNode } from './raw-node';
export { Raft } from './raft';
export { ProgressState } from './progress';
