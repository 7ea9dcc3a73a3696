import { describe, expect, it } from 'vitest';
import { IntervalSet, intervalOf } from '../../../src/auth/range_perms';

const b = (s: string): Buffer => Buffer.from(s);
const none = Buffer.alloc(0);
const fromKey = Buffer.from([0]);

function set(...perms: Array<[string, string | Buffer]>): IntervalSet {
  return new IntervalSet(perms.map(([k, e]) => intervalOf(b(k), typeof e === 'string' ? b(e) : e)));
}

describe('IntervalSet (etcd range permission semantics)', () => {
  it('a single-key permission covers that key and nothing else', () => {
    const s = set(['foo', none]);
    expect(s.covers(b('foo'), none)).toBe(true);
    expect(s.covers(b('foo0'), none)).toBe(false);
    expect(s.covers(b('fo'), none)).toBe(false);
    expect(s.covers(b('foo'), b('fop'))).toBe(false);
  });

  it('a prefix permission covers keys and sub-ranges inside it, not ranges leaving it', () => {
    const s = set(['pre/', 'pre0']);
    expect(s.covers(b('pre/a'), none)).toBe(true);
    expect(s.covers(b('pre/'), b('pre0'))).toBe(true);
    expect(s.covers(b('pre/a'), b('pre/b'))).toBe(true);
    expect(s.covers(b('pre'), b('pre0'))).toBe(false);
    expect(s.covers(b('pre/'), b('pre1'))).toBe(false);
    expect(s.covers(b('pre/'), fromKey)).toBe(false);
  });

  it('a from-key permission ("\\0" end) reaches past every key', () => {
    const s = set(['k', fromKey]);
    expect(s.covers(b('zzzz'), none)).toBe(true);
    expect(s.covers(b('k'), fromKey)).toBe(true);
    expect(s.covers(b('a'), none)).toBe(false);
  });

  it('adjacent and overlapping grants from several roles merge into one cover', () => {
    const s = set(['a', 'c'], ['c', 'e'], ['d', 'g']);
    expect(s.size).toBe(1);
    expect(s.covers(b('a'), b('g'))).toBe(true);
    expect(s.covers(b('a'), b('h'))).toBe(false);
    const gap = set(['a', 'c'], ['d', 'g']);
    expect(gap.covers(b('a'), b('e'))).toBe(false);
    expect(gap.covers(b('c'), none)).toBe(false);
    expect(gap.covers(b('e'), none)).toBe(true);
  });

  it('an empty set covers nothing', () => {
    expect(set().covers(b('x'), none)).toBe(false);
  });
});
