// parseConfig: etcd 3.6's command-line handling (etcdmain's config.parse): flag syntax, help,
// version, config file or ETCD_* variables, then building and validating the Config.

import { applyConfigFile, readConfigFile } from './configfile';
import { buildConfig } from './build';
import { applyEnv, flagToEnv } from './env';
import { ERR_UNSET_ADVERTISE_CLIENT_URLS, Invalid, PanicExit, StartFailure } from './failures';
import { Flags } from './flagreader';
import { FlagSet } from './flagset';
import { goQuote } from './goparse';
import { FLAGS_TEXT, USAGE_TEXT } from './help';
import type { ConfigNotice, ParseResult } from './types';
import { FlagValueError } from './values';
import { versionText } from './version';

function verifyFailure(message: string, notices: ConfigNotice[], runningNotice: ConfigNotice): ParseResult {
  const out: ConfigNotice[] = [...notices, runningNotice, { level: 'warn', msg: 'failed to verify flags', fields: { error: message } }];
  if (message === ERR_UNSET_ADVERTISE_CLIENT_URLS) {
    out.push({ level: 'warn', msg: 'advertise client URLs are not set', fields: { error: message } });
  }
  return { kind: 'error', message, exitCode: 1, notices: out };
}

function fromConfigFile(path: string, running: ConfigNotice): ParseResult {
  // Flags and ETCD_* variables are ignored entirely when a file is given, as in etcd.
  const fileFlags = new FlagSet();
  try {
    applyConfigFile(fileFlags, readConfigFile(path));
    const { config, warnings, afterRunning } = buildConfig(new Flags(fileFlags), true);
    const loaded: ConfigNotice = {
      level: 'info',
      msg: 'loaded server configuration, other configuration command line flags and environment variables will be ignored if provided',
      fields: { path },
    };
    return { kind: 'run', config, notices: [...warnings, loaded, running, ...afterRunning] };
  } catch (e) {
    if (e instanceof Invalid || e instanceof FlagValueError) return verifyFailure(e.message, [], running);
    if (e instanceof PanicExit) return { kind: 'error', message: e.message, exitCode: 2, notices: [], stderrText: `panic: ${e.message}\n` };
    if (e instanceof StartFailure) {
      return { kind: 'error', message: e.message, exitCode: 1, notices: [running, { level: 'fatal', msg: 'discovery failed', fields: { error: e.message } }] };
    }
    throw e;
  }
}

/**
 * Parse etcd's command line (`argv` without the program name) and ETCD_* variables.
 * `programPath` only appears in the "Running: " notice, as etcd logs its full argv.
 */
export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv, programPath = 'etcd'): ParseResult {
  // etcd dispatches these sub-commands before flag parsing; this server has neither proxy.
  if (argv[0] === 'gateway' || argv[0] === 'grpc-proxy') {
    const message = `etcd ${argv[0]} is not available in this server`;
    return { kind: 'error', message, exitCode: 1, notices: [], stderrText: `${message}\n` };
  }
  const fs = new FlagSet();
  const outcome = fs.parse(argv);
  if (outcome.kind === 'error') {
    return { kind: 'error', message: outcome.message, exitCode: 2, notices: [], stderrText: `${outcome.message}\n${USAGE_TEXT}\n` };
  }
  if (outcome.kind === 'help') return { kind: 'help', text: `${FLAGS_TEXT}\n`, usage: `${USAGE_TEXT}\n` };

  const notices: ConfigNotice[] = [];
  const running: ConfigNotice = { level: 'info', msg: 'Running: ', fields: { args: [programPath, ...argv] } };
  if (outcome.positional.length > 0) {
    return verifyFailure(`${goQuote(outcome.positional[0])} is not a valid flag`, notices, running);
  }
  const f = new Flags(fs);
  if (f.bool('version')) return { kind: 'version', text: versionText() };

  const configFile = f.str('config-file') !== '' ? f.str('config-file') : env[flagToEnv('config-file')] ?? '';
  if (configFile !== '') return fromConfigFile(configFile, running);

  // ETCD_VERSION would otherwise turn `etcd` into `etcd --version`.
  let effectiveEnv = env;
  const verVal = env.ETCD_VERSION;
  if (verVal !== undefined && verVal !== '') {
    notices.push({ level: 'warn', msg: 'cannot set special environment variable', fields: { key: 'ETCD_VERSION', value: verVal } });
    effectiveEnv = { ...env };
    delete effectiveEnv.ETCD_VERSION;
  }
  const envOutcome = applyEnv(fs, effectiveEnv, notices);
  if (envOutcome.kind === 'fatal') {
    return { kind: 'error', message: notices[notices.length - 1].msg, exitCode: 1, notices };
  }
  if (envOutcome.kind === 'error') return verifyFailure(envOutcome.message, notices, running);

  try {
    const { config, warnings, afterRunning } = buildConfig(f, false);
    return { kind: 'run', config, notices: [...notices, ...warnings, running, ...afterRunning] };
  } catch (e) {
    if (e instanceof Invalid) return verifyFailure(e.message, notices, running);
    if (e instanceof PanicExit) {
      return { kind: 'error', message: e.message, exitCode: 2, notices, stderrText: `panic: ${e.message}\n` };
    }
    if (e instanceof StartFailure) {
      return {
        kind: 'error',
        message: e.message,
        exitCode: 1,
        notices: [...notices, running, { level: 'fatal', msg: 'discovery failed', fields: { error: e.message } }],
      };
    }
    if (e instanceof FlagValueError) return verifyFailure(e.message, notices, running);
    throw e;
  }
}

