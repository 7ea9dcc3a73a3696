// Contracts of the logger. The JSON shape follows etcd's zap configuration so that
// tools which parse etcd's logs (level, ts, caller, msg, then fields) keep working.

/** zap's levels, lowest first. `dpanic` behaves like `error` in production builds. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'dpanic', 'panic', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A value a field may carry. bigint prints as a JSON number (zap.Uint64); use `hexId` for IDs. */
export type LogValue =
  | string
  | number
  | bigint
  | boolean
  | null
  | undefined
  | Error
  | Date
  | Buffer
  | readonly LogValue[]
  | { readonly [key: string]: LogValue };

export type LogFields = Readonly<Record<string, LogValue>>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Logs, flushes, then throws (zap's Panic). */
  panic(msg: string, fields?: LogFields): never;
  /** Logs, flushes synchronously, then exits the process with status 1 (zap's Fatal). */
  fatal(msg: string, fields?: LogFields): never;
  /** Generic entry point; `panic`/`fatal` levels are only logged here, never thrown or exited. */
  log(level: LogLevel, msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every entry (after the entry's own leading keys). */
  child(fields: LogFields): Logger;
  /** Whether an entry at `level` would be written (skip building costly fields otherwise). */
  enabled(level: LogLevel): boolean;
  /** Writes out everything buffered, synchronously. */
  flush(): void;
}

/** Where encoded lines go. `write` receives one or more complete lines. */
export interface LogSink {
  write(chunk: string): void;
  /** Synchronous best-effort write used for fatal entries and at exit. */
  writeSync(chunk: string): void;
  close?(): void;
}

export interface LoggerOptions {
  /** `--log-level`; default 'info'. */
  level?: LogLevel;
  /** `--log-outputs`: 'default' | 'stderr' | 'stdout' | '/dev/null' | file path. Default ['default'] (stderr). */
  outputs?: readonly string[];
  /** `--log-format`; default 'json'. */
  format?: 'json' | 'console';
  /** Replace the outputs with these sinks (tests, embedding). */
  sinks?: readonly LogSink[];
  /** Add a `caller` key ("dir/file.ts:line"); costs a stack capture per entry. Default false. */
  caller?: boolean;
  /**
   * zap's sampling as etcd configures it: per second, the first `initial` entries with the same
   * level+message are written, then every `thereafter`-th. Default {initial: 100, thereafter: 100};
   * `false` disables.
   */
  sampling?: { initial: number; thereafter: number } | false;
  /** Wall clock in epoch milliseconds (fractional allowed); tests inject a fixed clock. */
  nowMs?: () => number;
  /** Bound on bytes waiting to be written; entries beyond it are dropped and counted. Default 8 MiB. */
  maxBufferedBytes?: number;
}
