export { MvccStore, toRangeEnd, KEY_DB, appendKeyRecord } from './store';
export type { RangeOptions, RangeResult, RangeReader, WriteTxn, EventsListener } from './store';
export * from './types';
