export { createLogger, nopLogger, parseLogLevel, isLogLevel } from './logger';
export { hexId, formatGoDuration, formatGoDurationMs, formatLogTime } from './format';
export { sinksForOutputs, fileSink, streamSink, nullSink } from './sinks';
export { LOG_LEVELS } from './types';
export type { Logger, LogLevel, LogFields, LogValue, LogSink, LoggerOptions } from './types';
export { logProcessWarnings } from './process_warnings';
