import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mkdirDurable } from '../../../src/runtime/fsync';

let root = '';
afterEach(() => {
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

describe('mkdirDurable', () => {
  it('creates the missing directories with the mode asked, outermost first, and nothing when they exist', () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'mkdir-durable-'));
    const deep = path.join(root, 'a', 'b', 'c');
    expect(mkdirDurable(deep)).toEqual([path.join(root, 'a'), path.join(root, 'a', 'b'), deep]);
    expect(fs.statSync(deep).isDirectory()).toBe(true);
    expect(fs.statSync(path.join(root, 'a')).mode & 0o777).toBe(0o700);
    expect(mkdirDurable(deep)).toEqual([]);
    expect(mkdirDurable(path.join(root, 'a', 'd'), 0o700, true)).toEqual([path.join(root, 'a', 'd')]);
  });

  it('fails where a file is in the way', () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'mkdir-durable-'));
    fs.writeFileSync(path.join(root, 'f'), '');
    expect(() => mkdirDurable(path.join(root, 'f', 'x'))).toThrow(/ENOTDIR/);
  });
});
