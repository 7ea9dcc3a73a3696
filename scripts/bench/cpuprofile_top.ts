// Top functions of a V8 .cpuprofile (from `node --cpu-prof`, or bench.sh --cpu-prof=DIR): self and
// inclusive time, by function and file:line, with our dist/ paths mapped back to src/ lines when a
// source map is beside the file.
//   node dist/scripts/bench/cpuprofile_top.js FILE.cpuprofile [--top=40] [--filter=src/] [--from-sec=5]
import assert from 'node:assert';
import fs from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Enough of a source map (v3, one source) to map a generated line back to the TS line. */
class LineMap {
  private readonly lines: Array<number | undefined> = [];
  readonly source: string;

  constructor(map: { sources: string[]; mappings: string }) {
    this.source = map.sources[0] ?? '';
    const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    let srcLine = 0;
    map.mappings.split(';').forEach((group, genLine) => {
      let first: number | undefined;
      for (const seg of group.split(',')) {
        if (!seg) continue;
        const vals: number[] = [];
        let shift = 0;
        let value = 0;
        for (const ch of seg) {
          const d = B64.indexOf(ch);
          assert(d >= 0, 'bad source map');
          value += (d & 31) << shift;
          if (d & 32) shift += 5;
          else {
            vals.push(value & 1 ? -(value >> 1) : value >> 1);
            value = 0;
            shift = 0;
          }
        }
        if (vals.length >= 4) {
          srcLine += vals[2];
          if (first === undefined) first = srcLine;
        }
      }
      this.lines[genLine] = first;
    });
  }

  /** 0-based generated line -> 1-based source line. */
  sourceLine(genLine: number): number | undefined {
    const l = this.lines[genLine];
    return l === undefined ? undefined : l + 1;
  }
}

const maps = new Map<string, LineMap | null>();

function location(cf: CallFrame): string {
  const url = cf.url.replace(/^file:\/\//, '');
  if (!url) return '(native)';
  let map = maps.get(url);
  if (map === undefined) {
    map = null;
    try {
      const m = JSON.parse(fs.readFileSync(`${url}.map`, 'utf8')) as { sources: string[]; mappings: string };
      map = new LineMap(m);
    } catch {
      map = null;
    }
    maps.set(url, map);
  }
  if (map) {
    const line = map.sourceLine(cf.lineNumber);
    // Ours: repo-relative (src/..., scripts/...); a dependency: its package name first.
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
    const src = pkg ? `${pkg}/${map.source.replace(/^(\.\.\/)+/, '')}` : map.source.replace(/^.*?\/?(?=(src|scripts)\/)/, '');
    return `${src}:${line ?? '?'}`;
  }
  const short = url.replace(/^.*\/node_modules\//, 'node_modules/');
  return `${short}:${cf.lineNumber + 1}`;
}

function main(): void {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith('--'));
  assert(file, 'usage: cpuprofile_top FILE.cpuprofile [--top=N] [--filter=TEXT]');
  const top = Number(args.find((a) => a.startsWith('--top='))?.slice(6) ?? 40);
  const filter = args.find((a) => a.startsWith('--filter='))?.slice(9);
  // Skips the first seconds (start-up: module loading, proto parsing) to see the steady state.
  const fromUs = Number(args.find((a) => a.startsWith('--from-sec='))?.slice(11) ?? 0) * 1e6;
  const p = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  let atUs = 0;
  let skippedUs = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    atUs += dt;
    if (atUs < fromUs) {
      skippedUs += dt;
      continue;
    }
    selfUs.set(p.samples[i], (selfUs.get(p.samples[i]) ?? 0) + dt);
  }
  const totalUs = p.endTime - p.startTime - skippedUs;
  let idleUs = 0;
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const n = byId.get(id);
    assert(n);
    if (n.callFrame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const key = `${n.callFrame.functionName || '(anonymous)'} ${location(n.callFrame)}`;
    self.set(key, (self.get(key) ?? 0) + us);
    // Inclusive: every distinct frame on the stack gets the sample once.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cn = byId.get(cur);
      assert(cn);
      const k = `${cn.callFrame.functionName || '(anonymous)'} ${location(cn.callFrame)}`;
      if (seen.has(k)) continue;
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + us);
    }
  }
  const busyUs = totalUs - idleUs;
  const pct = (us: number): string => `${((100 * us) / busyUs).toFixed(1)}%`.padStart(6);
  process.stdout.write(`profile ${file}: ${(totalUs / 1e6).toFixed(1)} s, busy ${(busyUs / 1e6).toFixed(1)} s (percentages of busy)\n`);
  const show = (title: string, m: Map<string, number>): void => {
    process.stdout.write(`\n${title}\n`);
    const rows = [...m].filter(([k]) => !filter || k.includes(filter)).sort((a, b) => b[1] - a[1]).slice(0, top);
    for (const [k, us] of rows) process.stdout.write(`${pct(us)} ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}\n`);
  };
  show('self time', self);
  show('inclusive time', incl);
}

main();
