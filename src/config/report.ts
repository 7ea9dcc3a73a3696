// What main does with a ParseResult: the same outputs, in the same order, as etcd.

import { createLogger, type Logger } from '../log';
import type { Config, ConfigNotice, ParseResult } from './types';

export function emitNotices(logger: Logger, notices: readonly ConfigNotice[]): void {
  for (const n of notices) logger.log(n.level, n.msg, n.fields);
}

/** The server logger as `--log-level`, `--log-outputs` and `--log-format` ask for. */
export function loggerForConfig(config: Config): Logger {
  return createLogger({ level: config.logLevel, outputs: config.logOutputs, format: config.logFormat });
}

interface Writable {
  write(s: string): unknown;
}

/**
 * For every result but 'run': writes help, version or the failure exactly where etcd writes
 * them and returns the exit status for process.exit.
 */
export function reportParseResult(
  result: Exclude<ParseResult, { kind: 'run' }>,
  stdout: Writable = process.stdout,
  stderr: Writable = process.stderr,
  logger: Logger = createLogger({ outputs: ['stderr'] }),
): number {
  switch (result.kind) {
    case 'help':
      stderr.write(result.usage);
      stdout.write(result.text);
      return 0;
    case 'version':
      stdout.write(result.text);
      return 0;
    case 'error':
      emitNotices(logger, result.notices);
      logger.flush();
      if (result.stderrText !== undefined) stderr.write(result.stderrText);
      return result.exitCode;
  }
}
