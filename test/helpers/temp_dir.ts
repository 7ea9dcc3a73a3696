// Temp dirs that a test file removes when its tests are done, so runs leave nothing in /tmp.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

const created: string[] = [];

// Registered when the importing test file is collected (each file imports its own copy of this
// module), so it runs after that file's tests, whichever of them made the dirs.
afterAll(() => {
  for (const dir of created.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** fs.mkdtempSync(os.tmpdir()/prefix), removed after this test file's tests. */
export function testTempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  created.push(dir);
  return dir;
}
