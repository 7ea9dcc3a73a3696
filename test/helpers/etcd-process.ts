// Starts one etcd member (ours or the real one) as a child process for an integration test.
import assert from 'node:assert';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { signalGroup, spawnServer, stopGroup, trackTempDir, waitExit } from './child';
import { EtcdGrpc, isRpcError } from './grpc';
import { freePort } from './ports';
import { sleepMs } from './wait';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');

/** The server under test: `ETCD_BIN` if set (e.g. /usr/bin/etcd), else our `bin/etcd`. */
export function etcdBin(): string {
  return process.env['ETCD_BIN'] || path.join(REPO_ROOT, 'bin', 'etcd');
}

export interface StartOptions {
  bin?: string;
  /** Extra flags, appended after the cluster flags this helper sets. */
  args?: string[];
  /** Reuse an existing data dir (else a fresh temp dir). */
  dataDir?: string;
  name?: string;
  readyTimeoutMs?: number;
  /** Environment variables for the server process, beyond the runner's own (minus ETCD*). */
  env?: Readonly<Record<string, string>>;
}

export interface EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  /** `127.0.0.1:port`, the form etcdctl/python/grpc targets take. */
  readonly clientHostPort: string;
  readonly peerUrl: string;
  readonly dataDir: string;
  /** The current child process (changes on restart). */
  readonly proc: ChildProcess;
  /** SIGTERM, then SIGKILL after a bounded grace period; resolves when the process is gone. */
  stop(): Promise<void>;
  /** SIGKILL (a crash); resolves when the process is gone. */
  kill9(): Promise<void>;
  /** Start again on the same data dir and ports; resolves when it serves requests. */
  restart(): Promise<void>;
  /** Everything the process wrote to stdout and stderr (the last few MiB). */
  logs(): string;
}

const MAX_LOG_BYTES = 4 * 1024 * 1024;
// A leaked member must not outlive a hung test run for long.
const MAX_LIFETIME_SEC = 900;
const STOP_GRACE_MS = 10_000;

/** Start a single-member cluster on free ports and wait until a gRPC Range succeeds. */
export async function startEtcd(opts: StartOptions = {}): Promise<EtcdMember> {
  const bin = opts.bin ?? etcdBin();
  const name = opts.name ?? 'it-member';
  const ownDataDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-it-'));
  if (ownDataDir) trackTempDir(dataDir);
  const readyTimeoutMs = opts.readyTimeoutMs ?? 20_000;

  let logBuf: string[] = [];
  let logBytes = 0;
  const appendLog = (chunk: Buffer): void => {
    const s = chunk.toString('utf8');
    logBuf.push(s);
    logBytes += s.length;
    while (logBytes > MAX_LOG_BYTES && logBuf.length > 1) {
      logBytes -= logBuf[0]!.length;
      logBuf = logBuf.slice(1);
    }
  };
  const logs = (): string => logBuf.join('');

  let clientPort = 0;
  let peerPort = 0;
  let proc: ChildProcess | undefined;

  const launch = (): ChildProcess => {
    const clientUrl = `http://127.0.0.1:${clientPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const args = [
      `--name=${name}`,
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${clientUrl}`,
      `--advertise-client-urls=${clientUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=${name}=${peerUrl}`,
      ...(opts.args ?? []),
    ];
    appendLog(Buffer.from(`--- start ${bin} ${args.join(' ')}\n`));
    const p = spawnServer(bin, args, MAX_LIFETIME_SEC, opts.env);
    p.stdout?.on('data', appendLog);
    p.stderr?.on('data', appendLog);
    p.on('exit', (code, sig) => {
      appendLog(Buffer.from(`--- exit code=${code} signal=${sig}\n`));
    });
    p.on('error', (e) => appendLog(Buffer.from(`--- spawn error ${e.message}\n`)));
    return p;
  };

  const waitReady = async (p: ChildProcess): Promise<void> => {
    const deadline = Date.now() + readyTimeoutMs;
    const client = new EtcdGrpc(`127.0.0.1:${clientPort}`);
    try {
      for (;;) {
        if (p.exitCode !== null || p.signalCode !== null) {
          throw new Error(`etcd exited during startup (code ${p.exitCode}, signal ${p.signalCode})`);
        }
        try {
          await client.unary('KV', 'Range', { key: Buffer.from('readiness-probe') }, 1_000);
          return;
        } catch (e) {
          // A member with auth enabled serves, and refuses a request without a user.
          if (isRpcError(e) && e.details === 'etcdserver: user name is empty') return;
          // not serving yet
        }
        if (Date.now() >= deadline) throw new Error(`etcd not ready within ${readyTimeoutMs} ms`);
        await sleepMs(100);
      }
    } finally {
      client.close();
    }
  };

  const maxAttempts = 3;
  for (let attempt = 1; ; attempt++) {
    clientPort = await freePort();
    peerPort = await freePort();
    while (peerPort === clientPort) peerPort = await freePort();
    const p = launch();
    try {
      await waitReady(p);
      proc = p;
      break;
    } catch (e) {
      signalGroup(p, 'SIGKILL');
      await waitExit(p, 5_000);
      const portClash = /address already in use/i.test(logs());
      if (!portClash || attempt >= maxAttempts || !ownDataDir) {
        throw new Error(`${(e as Error).message}\n--- logs:\n${logs().slice(-8000)}`);
      }
      // Another test grabbed the port between freePort() and bind: retry with a clean dir.
      fs.rmSync(dataDir, { recursive: true, force: true });
      fs.mkdirSync(dataDir, { recursive: true });
    }
  }

  const member: EtcdMember = {
    name,
    clientUrl: `http://127.0.0.1:${clientPort}`,
    clientHostPort: `127.0.0.1:${clientPort}`,
    peerUrl: `http://127.0.0.1:${peerPort}`,
    dataDir,
    get proc(): ChildProcess {
      assert(proc !== undefined);
      return proc;
    },
    async stop(): Promise<void> {
      assert(proc !== undefined);
      await stopGroup(proc, STOP_GRACE_MS);
    },
    async kill9(): Promise<void> {
      assert(proc !== undefined);
      signalGroup(proc, 'SIGKILL');
      const gone = await waitExit(proc, 5_000);
      assert(gone, 'process did not exit after SIGKILL');
    },
    async restart(): Promise<void> {
      assert(proc !== undefined);
      assert(proc.exitCode !== null || proc.signalCode !== null, 'restart() while the process still runs');
      const p = launch();
      try {
        await waitReady(p);
      } catch (e) {
        signalGroup(p, 'SIGKILL');
        await waitExit(p, 5_000);
        throw new Error(`restart failed: ${(e as Error).message}\n--- logs:\n${logs().slice(-8000)}`);
      }
      proc = p;
    },
    logs,
  };
  return member;
}
