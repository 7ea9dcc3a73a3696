import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderTypes } from './render-types';

const TYPES_FILE = path.join(__dirname, '../../../src/pb/types.ts');

describe('src/pb/types.ts', () => {
  it('matches the shapes rendered from proto/', () => {
    const rendered = renderTypes();
    if (process.env.UPDATE_PB_TYPES === '1') fs.writeFileSync(TYPES_FILE, rendered);
    expect(fs.readFileSync(TYPES_FILE, 'utf8')).toBe(rendered);
  });
});
