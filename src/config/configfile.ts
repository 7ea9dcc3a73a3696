// `--config-file`: etcd's YAML configuration. Keys are the flag names; TLS settings sit under
// client-transport-security / peer-transport-security. Values go through the same flag
// values (and so the same checks) as the command line; durations are nanosecond integers,
// as Go decodes time.Duration from the file.

import fs from 'node:fs';
import type { FlagSet } from './flagset';
import {
  BoolValue,
  DurationValue,
  FlagValueError,
  IntegerValue,
  StringsValue,
  Uint32Value,
  UniqueStringsValue,
  type FlagValue,
} from './values';
import { parseYaml, YamlError, type YamlValue } from './yaml';

const MAX_CONFIG_FILE_BYTES = 4 * 1024 * 1024;

// Command-line-only settings: etcd's file format has no field for them and ignores the keys.
const NOT_IN_FILE = new Set([
  'config-file',
  'version',
  'discovery-fallback',
  'raft-read-timeout',
  'raft-write-timeout',
  'socket-reuse-port',
  'socket-reuse-address',
]);

const SECURITY_KEYS: Readonly<Record<string, [client: string, peer: string]>> = {
  'cert-file': ['cert-file', 'peer-cert-file'],
  'key-file': ['key-file', 'peer-key-file'],
  'client-cert-file': ['client-cert-file', 'peer-client-cert-file'],
  'client-key-file': ['client-key-file', 'peer-client-key-file'],
  'client-cert-auth': ['client-cert-auth', 'peer-client-cert-auth'],
  'trusted-ca-file': ['trusted-ca-file', 'peer-trusted-ca-file'],
  'auto-tls': ['auto-tls', 'peer-auto-tls'],
  'allowed-cn': ['', 'peer-cert-allowed-cn'],
  'allowed-hostname': ['client-cert-allowed-hostname', 'peer-cert-allowed-hostname'],
  'skip-client-san-verification': ['', 'peer-skip-client-san-verification'],
  'crl-file': ['client-crl-file', 'peer-crl-file'],
};

function jsonKind(v: YamlValue): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'object') return 'object';
  return typeof v === 'boolean' ? 'bool' : typeof v === 'number' ? 'number' : 'string';
}

function goType(target: FlagValue): string {
  if (target instanceof BoolValue) return 'bool';
  if (target instanceof DurationValue) return 'time.Duration';
  if (target instanceof IntegerValue || target instanceof Uint32Value) return 'uint';
  if (target instanceof StringsValue || target instanceof UniqueStringsValue) return '[]string';
  return 'string';
}

/** The text a flag value would have been given on the command line. */
function asFlagText(key: string, target: FlagValue, v: YamlValue): string {
  const mismatch = () =>
    new FlagValueError(
      `error unmarshaling JSON: while decoding JSON: json: cannot unmarshal ${jsonKind(v)} into Go struct field configYAML.${key} of type ${goType(target)}`,
    );
  if (target instanceof BoolValue) {
    if (typeof v !== 'boolean') throw mismatch();
    return String(v);
  }
  if (target instanceof DurationValue) {
    if (typeof v !== 'number' || !Number.isInteger(v)) throw mismatch();
    return `${v}ns`;
  }
  if (target instanceof IntegerValue || target instanceof Uint32Value) {
    if (typeof v !== 'number' || !Number.isInteger(v)) throw mismatch();
    return String(v);
  }
  if (target instanceof StringsValue || target instanceof UniqueStringsValue) {
    if (!Array.isArray(v)) throw mismatch();
    return v.map((x) => (x === null ? '' : String(x))).join(',');
  }
  if (Array.isArray(v) || (typeof v === 'object' && v !== null)) throw mismatch();
  // Go converts YAML scalars to the string the target field wants.
  return String(v);
}

function setFromFile(flags: FlagSet, flagName: string, key: string, v: YamlValue): void {
  const target = flags.lookup(flagName);
  if (target === undefined || v === null) return;
  const text = asFlagText(key, target, v);
  const err = flags.set(flagName, text);
  if (err === undefined) return;
  // etcd exits right away on a bad URL list in the file.
  throw new FlagValueError(err);
}

export function readConfigFile(path: string): { [key: string]: YamlValue } {
  let st: fs.Stats;
  try {
    st = fs.statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new FlagValueError(`open ${path}: ${code === 'ENOENT' ? 'no such file or directory' : code === 'EACCES' ? 'permission denied' : String(code)}`);
  }
  if (st.size > MAX_CONFIG_FILE_BYTES) throw new FlagValueError(`read ${path}: configuration file larger than ${MAX_CONFIG_FILE_BYTES} bytes`);
  try {
    return parseYaml(fs.readFileSync(path, 'utf8'));
  } catch (e) {
    if (e instanceof YamlError) throw new FlagValueError(e.message);
    throw e;
  }
}

/** Applies a parsed configuration file to a fresh flag set (defaults only). */
export function applyConfigFile(flags: FlagSet, doc: { [key: string]: YamlValue }): void {
  for (const [key, v] of Object.entries(doc)) {
    if (key === 'client-transport-security' || key === 'peer-transport-security') {
      if (v === null) continue;
      if (typeof v !== 'object' || Array.isArray(v)) throw new FlagValueError(`invalid ${key}`);
      const peer = key === 'peer-transport-security' ? 1 : 0;
      for (const [k, sv] of Object.entries(v)) {
        const names = SECURITY_KEYS[k];
        if (names === undefined || names[peer] === '') continue;
        setFromFile(flags, names[peer], k, sv);
      }
      continue;
    }
    if (key === 'socket-options') {
      if (v === null) continue;
      if (typeof v !== 'object' || Array.isArray(v)) throw new FlagValueError(`invalid ${key}`);
      for (const [k, sv] of Object.entries(v)) {
        if (k === 'reuse-port' || k === 'reuse-address') setFromFile(flags, `socket-${k}`, k, sv);
      }
      continue;
    }
    // An old spelling etcd still maps to the current key.
    const flagName = key === 'experimental-snapshot-catch-up-entries' ? 'experimental-snapshot-catchup-entries' : key;
    if (NOT_IN_FILE.has(flagName)) continue;
    setFromFile(flags, flagName, key, v);
  }
}
