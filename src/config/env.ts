// ETCD_* environment variables, applied as etcd's pkg/flags does: a variable sets the flag of
// the same name (ETCD_ + upper case, '-' -> '_') unless the command line set it; a variable
// shadowed by a command-line flag is fatal; unknown ETCD_* variables are warned about.

import type { FlagSet } from './flagset';
import { goQuote } from './goparse';
import type { ConfigNotice } from './types';

export const ENV_PREFIX = 'ETCD';

export function flagToEnv(name: string): string {
  return `${ENV_PREFIX}_${name.replace(/-/g, '_').toUpperCase()}`;
}

export type EnvOutcome = { kind: 'ok' } | { kind: 'error'; message: string } | { kind: 'fatal' };

export function applyEnv(fs: FlagSet, env: NodeJS.ProcessEnv, notices: ConfigNotice[]): EnvOutcome {
  const alreadySet = new Set<string>();
  for (const e of fs.all()) if (fs.isSet(e.spec.name)) alreadySet.add(flagToEnv(e.spec.name));

  const used = new Set<string>();
  let lastError: string | undefined;
  for (const e of fs.all()) {
    const key = flagToEnv(e.spec.name);
    if (alreadySet.has(key)) continue;
    const val = env[key];
    if (val === undefined || val === '') continue;
    used.add(key);
    const err = fs.set(e.spec.name, val);
    if (err !== undefined) {
      // etcd keeps going and reports the last failure.
      lastError = `invalid value ${goQuote(val)} for ${key}: ${err}`;
      continue;
    }
    notices.push({
      level: 'info',
      msg: 'recognized and used environment variable',
      fields: { 'variable-name': key, 'variable-value': val },
    });
  }

  for (const [key, val] of Object.entries(env)) {
    if (val === undefined || used.has(key)) continue;
    if (alreadySet.has(key)) {
      notices.push({
        level: 'fatal',
        msg: 'conflicting environment variable is shadowed by corresponding command-line flag (either unset environment variable or disable flag))',
        fields: { 'environment-variable': key },
      });
      return { kind: 'fatal' };
    }
    if (key.startsWith(`${ENV_PREFIX}_`)) {
      notices.push({
        level: 'warn',
        msg: 'unrecognized environment variable',
        fields: { 'environment-variable': `${key}=${val}` },
      });
    }
  }
  return lastError === undefined ? { kind: 'ok' } : { kind: 'error', message: lastError };
}
