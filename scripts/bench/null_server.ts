// Starts scripts/bench/null_put_server (built by build-benchmark.sh): a gRPC KV server that does
// nothing for a put but append it to a file and fdatasync it. Its put-1c p50 is measured beside the
// fdatasync floor, to show how far above that floor the client's side alone puts any server.
import assert from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { waitExit } from './servers';

export interface NullServer {
  endpoint: string;
  pid: number;
  stop(): Promise<void>;
}

/** Zero-filling its 64 MiB log takes well under a second; a slow disk gets this long. */
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;

export async function startNullServer(bin: string, workDir: string): Promise<NullServer> {
  const dir = fs.mkdtempSync(path.join(workDir, 'null-'));
  const child = spawn(bin, ['--listen=127.0.0.1:0', `--log=${path.join(dir, 'null-put.log')}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  // An interrupted battery exits through process.exit: the server must not outlive it.
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const stop = async (): Promise<void> => {
    process.removeListener('exit', killOnExit);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await waitExit(child, STOP_TIMEOUT_MS);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const endpoint = await readyEndpoint(child);
    assert(typeof child.pid === 'number');
    return { endpoint, pid: child.pid, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The "ready 127.0.0.1:PORT" line the server prints once it listens. */
function readyEndpoint(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`null server: no "ready" line within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
    assert(child.stdout && child.stderr);
    child.stderr.on('data', (d: Buffer) => {
      if (err.length < 4096) err += d.toString('utf8');
    });
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const m = /^ready (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      } else if (out.length > 4096) {
        clearTimeout(timer);
        reject(new Error(`null server: unexpected output ${out.slice(0, 200)}`));
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`null server exited (${signal ?? code}): ${err.trim().slice(0, 300)}`));
    });
  });
}
