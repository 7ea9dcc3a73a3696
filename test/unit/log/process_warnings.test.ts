import { describe, expect, it } from 'vitest';
import { createLogger, logProcessWarnings } from '../../../src/log';
import { memorySink } from '../../helpers/log_sink';

/** Both the 'warning' event (a later tick) and the logger's write (a later loop turn) come after emitWarning. */
function loopTurns(n: number): Promise<void> {
  return n === 0 ? Promise.resolve() : new Promise((resolve) => setImmediate(() => resolve(loopTurns(n - 1))));
}

describe("Node's process warnings", () => {
  it('become JSON log entries: warn level, with the code, DEP0123 at debug only', async () => {
    const sink = memorySink();
    const log = createLogger({ level: 'debug', sinks: [sink] });
    const undo = logProcessWarnings(log);
    try {
      process.emitWarning('something is deprecated', { type: 'DeprecationWarning', code: 'DEP9999' });
      process.emitWarning('Setting the TLS ServerName to an IP address is not permitted by RFC 6066.', { type: 'DeprecationWarning', code: 'DEP0123' });
      await loopTurns(3);
    } finally {
      undo();
    }
    const mine = sink.lines().filter((l) => l['msg'] === 'Node.js process warning');
    expect(mine.map((l) => [l['level'], l['code'], l['name'], l['warning']])).toEqual([
      ['warn', 'DEP9999', 'DeprecationWarning', 'something is deprecated'],
      ['debug', 'DEP0123', 'DeprecationWarning', 'Setting the TLS ServerName to an IP address is not permitted by RFC 6066.'],
    ]);

    // At the default level, DEP0123 does not show; others do.
    const quiet = memorySink();
    const undo2 = logProcessWarnings(createLogger({ level: 'info', sinks: [quiet] }));
    try {
      process.emitWarning('ignored server name', { type: 'DeprecationWarning', code: 'DEP0123' });
      process.emitWarning('possible leak', { type: 'MaxListenersExceededWarning' });
      await loopTurns(3);
    } finally {
      undo2();
    }
    expect(quiet.lines().map((l) => [l['level'], l['name'], l['warning'], 'code' in l])).toEqual([['warn', 'MaxListenersExceededWarning', 'possible leak', false]]);
  });
});
