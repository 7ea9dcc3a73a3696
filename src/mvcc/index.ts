export { MvccStore, toRangeEnd, KEY_DB } from './store';
export type { RangeOptions, RangeResult, RangeReader, WriteTxn, EventsListener } from './store';
export * from './types';
