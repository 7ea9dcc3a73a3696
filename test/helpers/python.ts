// Runs a python-etcd3 script under Debian's /usr/bin/python3 (where python3-etcd3 is installed;
// the `python3` first on PATH may be another interpreter without it).
import { RunResult, runProcess } from './etcdctl';

export const PYTHON3_BIN = '/usr/bin/python3';

export interface PythonOptions {
  /** `127.0.0.1:port`; exported to the script as ETCD_HOST and ETCD_PORT. */
  endpoint: string;
  timeoutMs?: number;
}

export function python3Etcd(script: string, opts: PythonOptions): Promise<RunResult> {
  const [host, port] = opts.endpoint.replace(/^https?:\/\//, '').split(':');
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('PYTHON') && !k.startsWith('ETCD')) env[k] = v;
  }
  env['ETCD_HOST'] = host ?? '127.0.0.1';
  env['ETCD_PORT'] = port ?? '2379';
  env['PYTHONUNBUFFERED'] = '1';
  return runProcess(PYTHON3_BIN, ['-c', script], { timeoutMs: opts.timeoutMs ?? 30_000, env });
}

/** Run the script and parse the JSON document it prints on its last stdout line. */
export async function python3EtcdJson<T = unknown>(script: string, opts: PythonOptions): Promise<T> {
  const r = await python3Etcd(script, opts);
  const lines = r.stdout.trim().split('\n');
  const last = lines[lines.length - 1] ?? '';
  if (r.code !== 0) {
    throw new Error(`python exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  }
  try {
    return JSON.parse(last) as T;
  } catch {
    throw new Error(`python printed no JSON on its last line\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  }
}
