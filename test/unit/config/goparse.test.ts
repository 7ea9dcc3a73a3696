import { describe, expect, it } from 'vitest';
import { parseGoDuration, parseGoInt, parseGoUint, goQuote } from '../../../src/config/goparse';
import { parseEtcdUrl, parseEtcdUrlList, parseInitialCluster } from '../../../src/config/urls';

describe('Go durations (time.ParseDuration)', () => {
  const ok: Array<[string, bigint]> = [
    ['0', 0n],
    ['5s', 5_000_000_000n],
    ['+5s', 5_000_000_000n],
    ['-5s', -5_000_000_000n],
    ['1m30s', 90_000_000_000n],
    ['1.5h', 5_400_000_000_000n],
    ['.5s', 500_000_000n],
    ['5.s', 5_000_000_000n],
    ['100ms', 100_000_000n],
    ['10us', 10_000n],
    ['10µs', 10_000n],
    ['10μs', 10_000n],
    ['7ns', 7n],
    ['1h2m3s4ms5us6ns', 3_723_004_005_006n],
    ['2562047h47m16.854775807s', 9_223_372_036_854_775_807n],
  ];
  for (const [s, ns] of ok) it(`${s}`, () => expect(parseGoDuration(s)).toBe(ns));

  it('rejects with Go messages', () => {
    expect(() => parseGoDuration('')).toThrow('time: invalid duration ""');
    expect(() => parseGoDuration('5')).toThrow('time: missing unit in duration "5"');
    expect(() => parseGoDuration('5x')).toThrow('time: unknown unit "x" in duration "5x"');
    expect(() => parseGoDuration('abc')).toThrow('time: invalid duration "abc"');
    expect(() => parseGoDuration('.s')).toThrow('time: invalid duration ".s"');
    expect(() => parseGoDuration('3000000h')).toThrow('time: invalid duration "3000000h"');
  });
});

describe('Go integers (strconv with base 0)', () => {
  it('prefixes, octal, underscores', () => {
    expect(parseGoUint('0', 64)).toBe(0n);
    expect(parseGoUint('0x1F', 64)).toBe(31n);
    expect(parseGoUint('0o17', 64)).toBe(15n);
    expect(parseGoUint('017', 64)).toBe(15n);
    expect(parseGoUint('0b101', 64)).toBe(5n);
    expect(parseGoUint('1_000_000', 64)).toBe(1_000_000n);
    expect(parseGoUint('0x_1F', 64)).toBe(31n);
    expect(parseGoUint('18446744073709551615', 64)).toBe(18446744073709551615n);
    expect(parseGoInt('-9223372036854775808', 64)).toBe(-9223372036854775808n);
  });
  it('errors', () => {
    expect(() => parseGoUint('08', 64)).toThrow('strconv.ParseUint: parsing "08": invalid syntax');
    expect(() => parseGoUint('_1', 64)).toThrow('invalid syntax');
    expect(() => parseGoUint('1_', 64)).toThrow('invalid syntax');
    expect(() => parseGoUint('-1', 64)).toThrow('invalid syntax');
    expect(() => parseGoUint('4294967296', 32)).toThrow('strconv.ParseUint: parsing "4294967296": value out of range');
    expect(() => parseGoInt('9223372036854775808', 64)).toThrow('strconv.ParseInt: parsing "9223372036854775808": value out of range');
  });
  it('quotes like strconv.Quote', () => {
    expect(goQuote('a"b\\c\n\x01')).toBe('"a\\"b\\\\c\\n\\x01"');
  });
});

describe('URLs (types.NewURLs)', () => {
  it('accepts etcd URL forms', () => {
    expect(parseEtcdUrl('http://127.0.0.1:2379')).toEqual({ scheme: 'http', hostname: '127.0.0.1', port: '2379', text: 'http://127.0.0.1:2379' });
    expect(parseEtcdUrl(' HTTPS://[::1]:2379 ')).toEqual({ scheme: 'https', hostname: '::1', port: '2379', text: 'https://[::1]:2379' });
    expect(parseEtcdUrl('unix://localhost:12345').scheme).toBe('unix');
    expect(parseEtcdUrl('http://10.0.0.1:80').port).toBe('80');
  });
  it('rejects with etcd messages', () => {
    expect(() => parseEtcdUrl('localhost:2379')).toThrow('URL scheme must be http, https, unix, or unixs: localhost:2379');
    expect(() => parseEtcdUrl('ftp://a:1')).toThrow('URL scheme must be http, https, unix, or unixs: ftp://a:1');
    expect(() => parseEtcdUrl('http://a')).toThrow('URL address does not have the form "host:port": http://a');
    expect(() => parseEtcdUrl('http://a:1/')).toThrow('URL must not contain a path: http://a:1/');
    expect(() => parseEtcdUrl(':2379')).toThrow('parse ":2379": missing protocol scheme');
    expect(() => parseEtcdUrl('http://a:x')).toThrow('parse "http://a:x": invalid port ":x" after host');
    expect(() => parseEtcdUrlList('')).toThrow('URL scheme must be http, https, unix, or unixs: ');
  });
  it('initial cluster with several URLs per member', () => {
    const m = parseInitialCluster('m1=http://10.0.0.2:2380,m1=http://10.0.0.1:2380,m2=https://10.0.0.3:2380');
    expect([...m.entries()].map(([k, v]) => [k, v.map((u) => u.text)])).toEqual([
      ['m1', ['http://10.0.0.1:2380', 'http://10.0.0.2:2380']],
      ['m2', ['https://10.0.0.3:2380']],
    ]);
    expect(parseInitialCluster('').size).toBe(0);
  });
});
