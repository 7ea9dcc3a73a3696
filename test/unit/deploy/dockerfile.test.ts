// deploy/Dockerfile without Docker: its COPY sources exist, its image puts `etcd` on the PATH and
// exposes etcd's ports, and its RUN commands work when run as a script on this machine (the
// build stage in a copy of the sources, with npm's cache; the final stage with its paths moved
// into a temp dir). apt-get is the one command not run: this machine's openssl and etcdctl stand in for it.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const DOCKERFILE = path.join(ROOT, 'deploy', 'Dockerfile');

interface Instruction {
  op: string;
  args: string;
  line: number;
}

interface Stage {
  from: string;
  name: string | undefined;
  steps: Instruction[];
}

function parseDockerfile(src: string): Stage[] {
  const stages: Stage[] = [];
  const lines = src.split('\n');
  for (let i = 0; i < lines.length; i++) {
    let text = lines[i]!;
    const start = i + 1;
    if (/^\s*(#|$)/.test(text)) continue;
    while (text.endsWith('\\') && i + 1 < lines.length) text = `${text.slice(0, -1)} ${lines[++i]!.trim()}`;
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(text);
    if (!m) throw new Error(`Dockerfile line ${start}: cannot parse ${text}`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!f) throw new Error(`Dockerfile line ${start}: bad FROM`);
      stages.push({ from: f[1]!, name: f[2], steps: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`Dockerfile line ${start}: ${op} before FROM`);
    stages[stages.length - 1]!.steps.push({ op, args, line: start });
  }
  return stages;
}

const stages = parseDockerfile(fs.readFileSync(DOCKERFILE, 'utf8'));
const [build, final] = stages as [Stage, Stage];
const temps: string[] = [];
afterAll(() => {
  for (const d of temps) fs.rmSync(d, { recursive: true, force: true });
});

function copyArgs(step: Instruction): { from: string | undefined; srcs: string[]; dest: string } {
  let args = step.args;
  let from: string | undefined;
  const m = /^--from=(\S+)\s+(.*)$/.exec(args);
  if (m) {
    from = m[1];
    args = m[2]!;
  }
  const parts = args.split(/\s+/);
  return { from, srcs: parts.slice(0, -1), dest: parts[parts.length - 1]! };
}

describe('deploy/Dockerfile', () => {
  it('builds in one stage and ships etcd on the PATH with its ports in the other', () => {
    expect(stages).toHaveLength(2);
    expect(build.from).toMatch(/^node:20/);
    expect(final.from).toMatch(/^node:20/);
    const expose = final.steps.filter((s) => s.op === 'EXPOSE').flatMap((s) => s.args.split(/\s+/));
    expect(expose).toEqual(expect.arrayContaining(['2379', '2380', '2381']));
    const cmd = final.steps.find((s) => s.op === 'CMD');
    expect(JSON.parse(cmd!.args)).toEqual(['etcd']);
    const runs = final.steps.filter((s) => s.op === 'RUN').map((s) => s.args).join('\n');
    expect(runs).toMatch(/ln -sf? \S+\/bin\/etcd \/usr\/local\/bin\/etcd/);
    for (const s of build.steps.filter((x) => x.op === 'COPY')) {
      for (const src of copyArgs(s).srcs) expect(fs.existsSync(path.join(ROOT, src)), src).toBe(true);
    }
  });

  it('runs its RUN commands as a script here: npm ci, the TypeScript build, prune; then etcd --version and etcdutl version from the PATH', () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'dockerfile-'));
    temps.push(work);
    // Build stage: WORKDIR and COPY emulated in a directory standing for the image's file system.
    const image = (p: string): string => path.join(work, 'build-root', p);
    let cwd = image('/');
    for (const s of build.steps) {
      if (s.op === 'WORKDIR') {
        cwd = image(s.args);
        fs.mkdirSync(cwd, { recursive: true });
      } else if (s.op === 'COPY') {
        const { srcs, dest } = copyArgs(s);
        const destAbs = dest.startsWith('/') ? image(dest) : path.join(cwd, dest);
        for (const src of srcs) {
          const to = dest.endsWith('/') || srcs.length > 1 ? path.join(destAbs, path.basename(src)) : destAbs;
          fs.cpSync(path.join(ROOT, src), to, { recursive: true });
        }
      } else if (s.op === 'RUN') {
        const r = spawnSync('bash', ['-ec', s.args], {
          cwd,
          encoding: 'utf8',
          timeout: 240_000,
          // Only what npm has cached: the test must not depend on the network.
          env: { ...process.env, npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false' },
        });
        expect(r.status, `Dockerfile line ${s.line}: RUN ${s.args}\n${r.stdout}\n${r.stderr}`).toBe(0);
      }
    }
    const workdir = cwd;
    // The build's output must not need dev dependencies (pruned) to start.
    expect(fs.existsSync(path.join(workdir, 'dist', 'src', 'main.js'))).toBe(true);
    expect(fs.existsSync(path.join(workdir, 'node_modules', 'typescript'))).toBe(false);

    // Final stage: COPY --from=build lands the workdir; RUNs run with /usr/local/bin and the
    // install dir moved into the temp dir.
    const binDir = path.join(work, 'usr-local-bin');
    fs.mkdirSync(binDir, { recursive: true });
    const copy = final.steps.find((s) => s.op === 'COPY')!;
    const installDir = copyArgs(copy).dest;
    for (const s of final.steps.filter((x) => x.op === 'RUN')) {
      if (/apt-get/.test(s.args)) {
        // What it installs: openssl for --auto-tls, etcdctl (Debian's etcd-client) as etcd's image has it.
        expect(s.args).toMatch(/\betcd-client\b/);
        expect(spawnSync('openssl', ['version']).status).toBe(0);
        expect(spawnSync('etcdctl', ['version']).status).toBe(0);
        continue;
      }
      const script = s.args.split(installDir).join(workdir).split('/usr/local/bin').join(binDir);
      const r = spawnSync('bash', ['-ec', script], {
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, PATH: `${binDir}:${process.env['PATH']}` },
      });
      expect(r.status, `Dockerfile line ${s.line}: RUN ${script}\n${r.stdout}\n${r.stderr}`).toBe(0);
    }
    const version = execFileSync(path.join(binDir, 'etcd'), ['--version'], { encoding: 'utf8' });
    expect(version).toMatch(/^etcd Version: 3\./);
    const utl = execFileSync(path.join(binDir, 'etcdutl'), ['version'], { encoding: 'utf8' });
    expect(utl).toMatch(/^etcdutl version: 3\./);
  }, 600_000);
});
