import type { LogSink } from '../../src/log';

/** A log sink that keeps what it is given: the text, and its lines parsed as JSON objects. */
export function memorySink(): LogSink & { text: () => string; lines: () => Record<string, unknown>[] } {
  let out = '';
  return {
    write(c) {
      out += c;
    },
    writeSync(c) {
      out += c;
    },
    text: () => out,
    lines: () =>
      out
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
