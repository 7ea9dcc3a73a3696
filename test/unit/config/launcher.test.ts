import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { testTempDir } from '../../helpers/temp_dir';

const LAUNCHER = path.resolve(__dirname, '../../../bin/etcd');
const UTL_LAUNCHER = path.resolve(__dirname, '../../../bin/etcdutl');

// A throwaway repo root whose "tsc" is a stub that counts its runs and writes the two entry points
// (bin/etcd's and bin/etcdutl's) echoing their arguments, so the launchers' own logic is what is tested.
function fakeRoot(): string {
  const root = testTempDir('etcd-launcher-');
  fs.mkdirSync(path.join(root, 'bin'));
  fs.copyFileSync(LAUNCHER, path.join(root, 'bin', 'etcd'));
  fs.chmodSync(path.join(root, 'bin', 'etcd'), 0o755);
  fs.copyFileSync(UTL_LAUNCHER, path.join(root, 'bin', 'etcdutl'));
  fs.chmodSync(path.join(root, 'bin', 'etcdutl'), 0o755);
  fs.mkdirSync(path.join(root, 'node_modules', '.bin'), { recursive: true });
  const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
  fs.writeFileSync(
    tsc,
    [
      '#!/usr/bin/env bash',
      'echo run >> builds.txt',
      'sleep 0.5',
      'mkdir -p dist/src/etcdutl',
      'echo \'console.log(JSON.stringify(process.argv.slice(2)))\' > dist/src/main.js',
      'echo \'console.log(JSON.stringify(["utl", ...process.argv.slice(2)]))\' > dist/src/etcdutl/main.js',
      'exit 2',
    ].join('\n'),
  );
  fs.chmodSync(tsc, 0o755);
  return root;
}

describe('bin/etcd launcher', () => {
  it('builds once even when started in parallel through a symlink, then passes arguments through', async () => {
    const root = fakeRoot();
    const linkDir = testTempDir('etcd-link-');
    const link = path.join(linkDir, 'etcd');
    fs.symlinkSync(path.join(root, 'bin', 'etcd'), link);
    const runOne = () =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const p = spawn(link, ['--name', 'a b', '--x=1'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        p.stdout.on('data', (d: Buffer) => (out += d.toString()));
        p.on('close', (code) => resolve({ code, out }));
      });
    const results = await Promise.all([runOne(), runOne(), runOne()]);
    for (const r of results) {
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out)).toEqual(['--name', 'a b', '--x=1']);
    }
    expect(fs.readFileSync(path.join(root, 'builds.txt'), 'utf8').trim().split('\n')).toEqual(['run']);
  });

  it('bin/etcdutl builds through bin/etcd, and a dist/ made before etcdutl existed is rebuilt once', () => {
    const root = fakeRoot();
    let r = spawnSync(path.join(root, 'bin', 'etcdutl'), ['snapshot', 'status', 'x.db'], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(['utl', 'snapshot', 'status', 'x.db']);
    fs.rmSync(path.join(root, 'dist', 'src', 'etcdutl'), { recursive: true });
    r = spawnSync(path.join(root, 'bin', 'etcd'), ['--version'], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(0);
    expect(fs.existsSync(path.join(root, 'dist', 'src', 'etcdutl', 'main.js'))).toBe(true);
    expect(fs.readFileSync(path.join(root, 'builds.txt'), 'utf8').trim().split('\n')).toEqual(['run', 'run']);
  });

  it('reports a failed build', () => {
    const root = fakeRoot();
    fs.writeFileSync(path.join(root, 'node_modules', '.bin', 'tsc'), '#!/usr/bin/env bash\necho "src/x.ts: broken"\nexit 1\n');
    const r = spawnSync(path.join(root, 'bin', 'etcd'), [], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('src/x.ts: broken');
  });
});
