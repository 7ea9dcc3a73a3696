// The parsers that face untrusted bytes, fuzzed for a fixed budget in every test run (issue 51);
// scripts/fuzz/run.ts is the long run. The budget is small here (FUZZ_BUDGET_MS per target,
// default 2 s): the long run is what explores, this keeps what it found fixed.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FuzzTarget } from '../../../scripts/fuzz/engine';
import { REPO_ROOT } from '../../helpers/etcd-process';
import { TARGETS } from '../../../scripts/fuzz/targets';

const BUDGET_MS = Number(process.env['FUZZ_BUDGET_MS'] ?? '2000');
const target = (name: string): FuzzTarget => TARGETS.find((t) => t.name === name)!;

// V8 reports coverage of plain Node modules only (vitest's module runner evaluates these files in
// a way the inspector's coverage does not list), so the run is the built script, in a child.
function runFuzzer(args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [path.join(REPO_ROOT, 'dist', 'scripts', 'fuzz', 'run.js'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, FUZZ_OUT: fs.mkdtempSync(path.join(os.tmpdir(), 'fuzz-out-')) },
    timeout: 140_000,
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('fuzzing, a fixed budget per target', () => {
  it('every target: no crash, hang or disagreement', () => {
    const r = runFuzzer([`--minutes=${BUDGET_MS / 60_000}`, '--execs=1000000', '--seed=20261208']);
    expect(r.out).not.toMatch(/finding \d+ \(/);
    expect(r.status, r.out).toBe(0);
    for (const t of TARGETS) expect(r.out).toMatch(new RegExp(`^${t.name}: \\d+ execs`, 'm'));
  }, BUDGET_MS * TARGETS.length + 60_000);

  it('finds what only coverage leads to: a 4-byte magic behind nested checks', () => {
    const r = runFuzzer(['--targets=planted', '--minutes=1.5', '--execs=300000', '--seed=7', '--max-findings=1']);
    expect(r.out).toContain('planted bug found');
    expect(r.status).toBe(1);
  }, 150_000);
});

describe('what fuzzing found, kept as regressions', () => {
  it('a tag with field number 0, over 32 bits or in over 5 bytes: our request decoders refuse it as protobufjs (and etcd) do', () => {
    const kv = target('kv-request-codecs');
    // Range with field 0 (tag 0x00), then a tag varint of 2^35 + (1 << 3 | 2) aliasing key.
    // ...and a small tag in 6 bytes (protobufjs refuses more than 5).
    for (const body of [Buffer.from([0x00, 0x01]), Buffer.from([0x8a, 0x80, 0x80, 0x80, 0x80, 0x01, 0x01, 0x61]), Buffer.from('cd9e8180840000', 'hex')]) {
      for (let method = 0; method < 5; method++) expect(() => kv.run(Buffer.concat([Buffer.from([method]), body]))).not.toThrow();
    }
  });

  it('a peer message whose entry protobufjs decodes with a bytes field of another shape is read, not a TypeError', () => {
    const m = Buffer.from('48030802180120032802300a3a0908001003180b620178600a500058006200', 'hex');
    expect(() => target('raft-messages').run(m)).not.toThrow();
  });

  it('a peer message with a number beyond 2^53 is an unmarshal error, not an assertion', () => {
    // MsgApp (type 3) whose term (field 4) is 2^60.
    const m = Buffer.from([0x08, 0x03, 0x20, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]);
    expect(() => target('raft-messages').run(m)).not.toThrow();
  });
});
