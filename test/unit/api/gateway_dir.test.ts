// The JSON gateway's private socket directory: a server killed with SIGKILL leaves it in the temp
// directory; the next start removes it, and never one whose server still listens or may be starting.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createGatewayDir, GATEWAY_SOCKET_NAME, sweepStaleGatewayDirs } from '../../../src/api/gateway_dir';
import { testTempDir } from '../../helpers/temp_dir';
import { waitFor } from '../../helpers/wait';

/** A gateway dir whose socket's server was killed (SIGKILL leaves the socket file behind). */
async function killedServerDir(root: string): Promise<string> {
  const dir = createGatewayDir(root);
  const sock = path.join(dir, GATEWAY_SOCKET_NAME);
  const child = spawn(process.execPath, ['-e', "require('net').createServer().listen(process.argv[1]); setInterval(() => {}, 1000)", sock], { stdio: 'ignore' });
  await waitFor('the child to listen', () => fs.existsSync(sock) || undefined);
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
  return dir;
}

function age(p: string, ms: number): void {
  const t = new Date(Date.now() - ms);
  fs.utimesSync(p, t, t);
}

describe('gateway socket directories', () => {
  it('are private to this user', () => {
    const dir = createGatewayDir(testTempDir('gw-'));
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700);
  });

  it('are removed once their server is gone for a minute, and kept while it listens or may still be starting', async () => {
    const root = testTempDir('gw-');
    const dead = await killedServerDir(root);
    age(path.join(dead, GATEWAY_SOCKET_NAME), 120_000);
    const justDied = await killedServerDir(root);
    const live = createGatewayDir(root);
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(path.join(live, GATEWAY_SOCKET_NAME), r));
    age(path.join(live, GATEWAY_SOCKET_NAME), 120_000);
    const neverBound = createGatewayDir(root);
    age(neverBound, 120_000);
    const starting = createGatewayDir(root);
    const unrelated = fs.mkdtempSync(path.join(root, 'other-'));
    age(unrelated, 120_000);
    try {
      const removed = await sweepStaleGatewayDirs(root);
      expect(removed.sort()).toEqual([dead, neverBound].sort());
      for (const d of [justDied, live, starting, unrelated]) expect(fs.existsSync(d)).toBe(true);
      for (const d of [dead, neverBound]) expect(fs.existsSync(d)).toBe(false);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
