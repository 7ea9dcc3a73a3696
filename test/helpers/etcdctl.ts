// Runs the real etcdctl (v3 API) against an endpoint.
import assert from 'node:assert';
import { ChildProcess, spawn } from 'node:child_process';
import { waitFor } from './wait';

export const ETCDCTL_BIN = '/usr/bin/etcdctl';

export interface RunResult {
  stdout: string;
  stderr: string;
  /** Exit code; null if killed by the timeout. */
  code: number | null;
}

export interface EtcdctlOptions {
  /** `127.0.0.1:port` or a URL. */
  endpoint: string;
  /** Written to stdin, then stdin is closed (e.g. `txn -i`). */
  input?: string;
  timeoutMs?: number;
  /** Another etcdctl (e.g. a reference build, test/helpers/reference.ts); default ETCDCTL_BIN. */
  bin?: string;
}

const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

function ctlEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  // Inherited ETCDCTL_* settings (endpoints, certs) would change what is tested.
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ETCD')) env[k] = v;
  env['ETCDCTL_API'] = '3';
  return env;
}

/** Run a command to completion (bounded) and capture its output. */
export function runProcess(
  cmd: string,
  args: string[],
  { input, timeoutMs = 15_000, env }: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv },
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env: env ?? process.env });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c: Buffer) => {
      if (stdout.length < MAX_OUTPUT_BYTES) stdout += c.toString('utf8');
    });
    p.stderr.on('data', (c: Buffer) => {
      if (stderr.length < MAX_OUTPUT_BYTES) stderr += c.toString('utf8');
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
    p.stdin.on('error', () => undefined);
    if (input !== undefined) p.stdin.write(input);
    p.stdin.end();
  });
}

/** `etcdctl --endpoints=<endpoint> ...args` with ETCDCTL_API=3. */
export function etcdctl(args: string[], opts: EtcdctlOptions): Promise<RunResult> {
  return runProcess(opts.bin ?? ETCDCTL_BIN, [`--endpoints=${opts.endpoint}`, '--command-timeout=10s', ...args], {
    input: opts.input,
    timeoutMs: opts.timeoutMs ?? 15_000,
    env: ctlEnv(),
  });
}

/** A long-running etcdctl (e.g. `watch`) whose output the test reads while it runs. */
export class BackgroundEtcdctl {
  readonly proc: ChildProcess;
  private out = '';
  private err = '';

  constructor(args: string[], opts: { endpoint: string; maxLifetimeMs?: number }) {
    this.proc = spawn(ETCDCTL_BIN, [`--endpoints=${opts.endpoint}`, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: ctlEnv(),
    });
    this.proc.stdout?.on('data', (c: Buffer) => {
      if (this.out.length < MAX_OUTPUT_BYTES) this.out += c.toString('utf8');
    });
    this.proc.stderr?.on('data', (c: Buffer) => {
      if (this.err.length < MAX_OUTPUT_BYTES) this.err += c.toString('utf8');
    });
    const t = setTimeout(() => this.stop(), opts.maxLifetimeMs ?? 60_000);
    t.unref();
    this.proc.on('exit', () => clearTimeout(t));
  }

  stdout(): string {
    return this.out;
  }
  stderr(): string {
    return this.err;
  }

  /** Wait until stdout matches (bounded). */
  async waitForOutput(re: RegExp, timeoutMs = 10_000): Promise<string> {
    return waitFor(`etcdctl output ${re} (have ${JSON.stringify(this.out)}, stderr ${JSON.stringify(this.err)})`, () => {
      const m = re.exec(this.out);
      return m ? m[0] : undefined;
    }, { timeoutMs, intervalMs: 20 });
  }

  stop(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      assert(this.proc.pid !== undefined);
      this.proc.kill('SIGKILL');
    }
  }
}
