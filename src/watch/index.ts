export { WatchHub } from './watch-hub';
export type { WatchHubOptions, HubWatchStream } from './watch-hub';
export * from './types';
