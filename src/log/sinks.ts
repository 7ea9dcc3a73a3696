// Destinations for encoded log lines: the process's stderr/stdout streams, or an
// append-only file, as zap opens them for `--log-outputs`.

import fs from 'node:fs';
import type { LogSink } from './types';

// A non-blocking descriptor can refuse a synchronous write; retry a bounded number of times.
const MAX_SYNC_RETRIES = 1000;

function writeAllSync(fd: number, chunk: string): void {
  let buf = Buffer.from(chunk, 'utf8');
  let retries = 0;
  while (buf.length > 0) {
    try {
      const n = fs.writeSync(fd, buf);
      buf = buf.subarray(n);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' && retries++ < MAX_SYNC_RETRIES) continue;
      return; // Nowhere left to report a failing log output.
    }
  }
}

/** stderr/stdout: goes through the process stream so ordering with other writes is kept. */
export function streamSink(stream: NodeJS.WriteStream, fd: number): LogSink {
  return {
    write(chunk) {
      stream.write(chunk);
    },
    writeSync(chunk) {
      // Pending asynchronous writes would be overtaken; only bypass when the stream is idle.
      if (stream.writableLength > 0) stream.write(chunk);
      else writeAllSync(fd, chunk);
    },
  };
}

export function fileSink(path: string): LogSink {
  // zap opens outputs with O_WRONLY|O_APPEND|O_CREATE, mode 0666 (before umask).
  const fd = fs.openSync(path, 'a', 0o666);
  let closed = false;
  return {
    write(chunk) {
      if (!closed) writeAllSync(fd, chunk);
    },
    writeSync(chunk) {
      if (!closed) writeAllSync(fd, chunk);
    },
    close() {
      if (closed) return;
      closed = true;
      fs.closeSync(fd);
    },
  };
}

export const nullSink: LogSink = {
  write() {},
  writeSync() {},
};

/** Resolves `--log-outputs` values the way etcd's setupLogging does (journald is not supported: stderr). */
export function sinksForOutputs(outputs: readonly string[]): LogSink[] {
  // zap merges duplicate paths and lets "/dev/null" discard everything.
  const unique = [...new Set(outputs.map((o) => (o === 'default' || o === 'systemd/journal' ? 'stderr' : o)))];
  if (unique.includes('/dev/null')) return [nullSink];
  return unique.map((o) => {
    if (o === 'stderr') return streamSink(process.stderr, 2);
    if (o === 'stdout') return streamSink(process.stdout, 1);
    return fileSink(o);
  });
}
