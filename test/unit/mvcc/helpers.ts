import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { Backend } from '../../../src/backend/backend';
import { MvccStore, type MvccStoreOptions } from '../../../src/mvcc/store';
import type { MvccEvent } from '../../../src/mvcc/types';

/** Temp dirs of this test file; they outlive closeStore (tests reopen a closed store's path). */
const tempDirs: string[] = [];
// Registered while the importing test file is collected, so it runs after that file's tests.
afterAll(() => {
  for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

export function tempDbPath(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mvcc-test-'));
  tempDirs.push(dir);
  return path.join(dir, 'member', 'snap', 'db');
}

export function openStore(dbPath = tempDbPath(), opts?: MvccStoreOptions): { backend: Backend; store: MvccStore; dbPath: string } {
  const backend = Backend.open(dbPath, { mapSizeBytes: 256 * 1024 * 1024 });
  const store = new MvccStore(backend, opts);
  return { backend, store, dbPath };
}

export async function closeStore(s: { backend: Backend; store: MvccStore }): Promise<void> {
  await s.store.close();
  await s.backend.close();
}

export const b = (s: string): Buffer => Buffer.from(s);

/** Runs one write txn in its own batch; returns its events. */
export function write(s: { backend: Backend; store: MvccStore }, fn: (txn: ReturnType<MvccStore['write']>) => unknown): MvccEvent[] {
  return s.backend.batch(() => {
    const txn = s.store.write();
    try {
      fn(txn);
    } catch (e) {
      txn.end();
      throw e;
    }
    return txn.end();
  });
}
