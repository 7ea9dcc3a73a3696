// The logger: level filter, zap-style sampling, a bounded buffer flushed once per
// event-loop turn (one write per sink instead of one per entry).

import assert from 'node:assert';
import { performance } from 'node:perf_hooks';
import { encodeConsoleEntry, encodeFields, encodeJsonEntry, type EntryParts } from './format';
import { sinksForOutputs } from './sinks';
import { LOG_LEVELS, type LogFields, type LogLevel, type Logger, type LoggerOptions, type LogSink } from './types';

const DEFAULT_MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
// zap keeps a fixed table of sampling counters; bound ours the same way.
const MAX_SAMPLING_KEYS = 4096;

const levelRank: Record<LogLevel, number> = {
  debug: 0,
  info: 1,
  warn: 2,
  error: 3,
  dpanic: 4,
  panic: 5,
  fatal: 6,
};

export function isLogLevel(s: string): s is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(s);
}

/** zap's Level.Set: lowercase or uppercase names, "" means info. Returns undefined when unknown. */
export function parseLogLevel(s: string): LogLevel | undefined {
  if (s === '') return 'info';
  const lower = s.toLowerCase();
  if (s !== lower && s !== s.toUpperCase()) return undefined;
  return isLogLevel(lower) ? lower : undefined;
}

function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Cores with unwritten lines; flushed synchronously if the process exits first. */
const pendingCores = new Set<Core>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const c of [...pendingCores]) c.flushSync();
  });
}

class Core {
  private buffered: string[] = [];
  private bufferedBytes = 0;
  private dropped = 0;
  private scheduled = false;
  private samplingTick = -1;
  private samplingCounts = new Map<string, number>();
  readonly minRank: number;
  readonly format: 'json' | 'console';
  readonly withCaller: boolean;
  readonly nowMs: () => number;

  constructor(
    private readonly sinks: readonly LogSink[],
    opts: LoggerOptions,
  ) {
    this.minRank = levelRank[opts.level ?? 'info'];
    this.format = opts.format ?? 'json';
    this.withCaller = opts.caller ?? false;
    this.nowMs = opts.nowMs ?? wallClockMs;
    this.sampling = opts.sampling === undefined ? { initial: 100, thereafter: 100 } : opts.sampling;
    this.maxBufferedBytes = opts.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    assert(this.maxBufferedBytes > 0);
    if (this.sampling) assert(this.sampling.initial >= 0 && this.sampling.thereafter >= 1);
  }
  private readonly sampling: { initial: number; thereafter: number } | false;
  private readonly maxBufferedBytes: number;

  /** zap's sampler: per second and per level+message, the first N entries, then every M-th. */
  sampled(level: LogLevel, msg: string, tsMs: number): boolean {
    if (!this.sampling) return true;
    const tick = Math.floor(tsMs / 1000);
    if (tick !== this.samplingTick || this.samplingCounts.size >= MAX_SAMPLING_KEYS) {
      this.samplingTick = tick;
      this.samplingCounts.clear();
    }
    const key = level + '\u0000' + msg;
    const n = (this.samplingCounts.get(key) ?? 0) + 1;
    this.samplingCounts.set(key, n);
    if (n <= this.sampling.initial) return true;
    return (n - this.sampling.initial) % this.sampling.thereafter === 0;
  }

  encode(parts: EntryParts): string {
    return this.format === 'console' ? encodeConsoleEntry(parts) : encodeJsonEntry(parts);
  }

  append(line: string): void {
    if (this.bufferedBytes + line.length > this.maxBufferedBytes) {
      this.dropped++;
      return;
    }
    this.buffered.push(line);
    this.bufferedBytes += line.length;
    if (!this.scheduled) {
      this.scheduled = true;
      pendingCores.add(this);
      installExitHook();
      setImmediate(() => this.flushAsync());
    }
  }

  private takeChunk(): string {
    let chunk = this.buffered.join('');
    if (this.dropped > 0) {
      chunk += this.encode({
        level: 'warn',
        tsMs: this.nowMs(),
        caller: undefined,
        msg: 'dropped log entries: log output is slower than the server',
        contextFields: '',
        fields: { dropped: this.dropped },
      });
      this.dropped = 0;
    }
    this.buffered = [];
    this.bufferedBytes = 0;
    return chunk;
  }

  private flushAsync(): void {
    this.scheduled = false;
    pendingCores.delete(this);
    const chunk = this.takeChunk();
    if (chunk.length === 0) return;
    for (const s of this.sinks) s.write(chunk);
  }

  flushSync(): void {
    pendingCores.delete(this);
    const chunk = this.takeChunk();
    if (chunk.length === 0) return;
    for (const s of this.sinks) s.writeSync(chunk);
  }
}

function callerOf(stack: string | undefined): string | undefined {
  if (stack === undefined) return undefined;
  // Frames: "Error", emit, the level method, then the caller we want.
  const lines = stack.split('\n');
  const frame = lines[3] ?? lines[lines.length - 1];
  const m = /\(?([^()\s]+):(\d+):\d+\)?\s*$/.exec(frame);
  if (m === null) return undefined;
  const segments = m[1].split(/[\\/]/);
  return `${segments.slice(-2).join('/')}:${m[2]}`;
}

class CoreLogger implements Logger {
  constructor(
    private readonly core: Core,
    private readonly contextFields: string,
  ) {}

  enabled(level: LogLevel): boolean {
    return levelRank[level] >= this.core.minRank;
  }

  private emit(level: LogLevel, msg: string, fields: LogFields | undefined, force: boolean): void {
    if (!this.enabled(level)) return;
    const tsMs = this.core.nowMs();
    if (!force && !this.core.sampled(level, msg, tsMs)) return;
    const caller = this.core.withCaller ? callerOf(new Error().stack) : undefined;
    this.core.append(this.core.encode({ level, tsMs, caller, msg, contextFields: this.contextFields, fields }));
  }

  log(level: LogLevel, msg: string, fields?: LogFields): void {
    this.emit(level, msg, fields, false);
  }
  debug(msg: string, fields?: LogFields): void {
    this.emit('debug', msg, fields, false);
  }
  info(msg: string, fields?: LogFields): void {
    this.emit('info', msg, fields, false);
  }
  warn(msg: string, fields?: LogFields): void {
    this.emit('warn', msg, fields, false);
  }
  error(msg: string, fields?: LogFields): void {
    this.emit('error', msg, fields, false);
  }
  panic(msg: string, fields?: LogFields): never {
    this.emit('panic', msg, fields, true);
    this.core.flushSync();
    throw new Error(msg);
  }
  fatal(msg: string, fields?: LogFields): never {
    this.emit('fatal', msg, fields, true);
    this.core.flushSync();
    process.exit(1);
  }
  child(fields: LogFields): Logger {
    return new CoreLogger(this.core, this.contextFields + encodeFields(fields));
  }
  flush(): void {
    this.core.flushSync();
  }
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const sinks = opts.sinks ?? sinksForOutputs(opts.outputs ?? ['default']);
  assert(sinks.length > 0, 'logger needs at least one sink');
  return new CoreLogger(new Core(sinks, opts), '');
}

/** A logger that writes nothing (tests, library use without logging). */
export function nopLogger(): Logger {
  return createLogger({ sinks: [{ write() {}, writeSync() {} }], level: 'fatal', sampling: false });
}
