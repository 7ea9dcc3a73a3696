// The long fuzzing run (issue 51): every target (or those named) for a number of executions each,
// with progress lines and a summary; a finding's input is written to FUZZ_OUT (default
// /tmp/etcd-ts-fuzz) and the exit status is 1.
//   node dist/scripts/fuzz/run.js [--execs=1000000] [--minutes=60] [--seed=1] [--targets=hpack,kv-request-codecs] [--max-findings=8]
import fs from 'node:fs';
import path from 'node:path';
import { fuzz } from './engine';
import { PLANTED, TARGETS } from './targets';

function arg(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
}

const execs = Number(arg('execs', '1000000'));
const minutes = Number(arg('minutes', '60'));
const seed = Number(arg('seed', '1'));
const maxFindings = Number(arg('max-findings', '8'));
const names = arg('targets', TARGETS.map((t) => t.name).join(',')).split(',');
const out = process.env['FUZZ_OUT'] ?? '/tmp/etcd-ts-fuzz';

let failed = false;
const summary: string[] = [];
for (const name of names) {
  const t = [...TARGETS, PLANTED].find((x) => x.name === name);
  if (t === undefined) throw new Error(`no fuzz target ${name} (${TARGETS.map((x) => x.name).join(', ')})`);
  const r = fuzz(t, {
    maxExecs: execs,
    budgetMs: minutes * 60_000,
    seed,
    maxFindings,
    progressEveryMs: 30_000,
    onProgress: (p) => console.log(`${p.target}: ${p.execs} execs, ${Math.round(p.execs / (p.ms / 1000))}/s, corpus ${p.corpus}, features ${p.features}, findings ${p.findings.length}`),
  });
  const line = `${r.target}: ${r.execs} execs in ${(r.ms / 1000).toFixed(0)} s (${Math.round(r.execs / (r.ms / 1000))}/s), corpus ${r.corpus}, features ${r.features}, findings ${r.findings.length}`;
  console.log(line);
  summary.push(line);
  for (const [i, f] of r.findings.entries()) {
    failed = true;
    fs.mkdirSync(out, { recursive: true });
    const file = path.join(out, `${r.target}-${i}.bin`);
    fs.writeFileSync(file, f.input);
    console.log(`  finding ${i} (${file}): ${f.error.split('\n').slice(0, 4).join('\n    ')}`);
  }
}
console.log(`\n${summary.join('\n')}`);
process.exit(failed ? 1 : 0);
