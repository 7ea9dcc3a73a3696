// Flag value types, one per kind of etcd flag (Go's flag.Value implementations in the
// standard library and in etcd's pkg/flags). `set` throws FlagValueError whose message is
// the text Go's flag package puts after "invalid value ... for flag -x: ".

import type { EtcdUrl } from './urls';
import { parseEtcdUrlList } from './urls';
import { GoRangeError, parseGoBool, parseGoDuration, parseGoInt, parseGoUint } from './goparse';

export class FlagValueError extends Error {}

// The standard library maps strconv failures to these two short texts.
const PARSE_ERROR = 'parse error';
const RANGE_ERROR = 'value out of range';

export interface FlagValue {
  /** Bool-like flags take no argument (`--flag` means true). */
  readonly isBool: boolean;
  set(s: string): void;
}

export class StringValue implements FlagValue {
  readonly isBool = false;
  constructor(public v: string) {}
  set(s: string): void {
    this.v = s;
  }
}

export class BoolValue implements FlagValue {
  readonly isBool = true;
  constructor(public v: boolean) {}
  set(s: string): void {
    const b = parseGoBool(s);
    if (b === undefined) throw new FlagValueError(PARSE_ERROR);
    this.v = b;
  }
}

/** Go's uint/uint64/int/int64 flags (IntSize is 64 on the platforms etcd supports). */
export class IntegerValue implements FlagValue {
  readonly isBool = false;
  constructor(
    public v: bigint,
    private readonly signed: boolean,
  ) {}
  set(s: string): void {
    try {
      this.v = this.signed ? parseGoInt(s, 64) : parseGoUint(s, 64);
    } catch (e) {
      throw new FlagValueError(e instanceof GoRangeError ? RANGE_ERROR : PARSE_ERROR);
    }
  }
}

/** etcd's own uint32 flag: it returns strconv's error text unchanged. */
export class Uint32Value implements FlagValue {
  readonly isBool = false;
  constructor(public v: bigint) {}
  set(s: string): void {
    try {
      this.v = parseGoUint(s, 32);
    } catch (e) {
      if (e instanceof GoRangeError) this.v = 0xffffffffn;
      throw new FlagValueError((e as Error).message);
    }
  }
}

export class DurationValue implements FlagValue {
  readonly isBool = false;
  constructor(public ns: bigint) {}
  set(s: string): void {
    try {
      this.ns = parseGoDuration(s);
    } catch {
      throw new FlagValueError(PARSE_ERROR);
    }
  }
}

/** flags.UniqueURLs: a validated, de-duplicated, sorted URL list, plus allowed non-URL texts. */
export class UniqueUrlsValue implements FlagValue {
  readonly isBool = false;
  values = new Set<string>();
  urls: EtcdUrl[] = [];
  private readonly allowed: ReadonlySet<string>;
  constructor(initial: string, exceptions: readonly string[]) {
    this.allowed = new Set(exceptions);
    if (initial !== '') this.set(initial);
  }
  set(s: string): void {
    if (this.values.has(s)) return;
    if (this.allowed.has(s)) {
      // An allowed exception (e.g. "" or "*") is recorded but leaves the URL list as it was.
      this.values.add(s);
      return;
    }
    let parsed: EtcdUrl[];
    try {
      parsed = parseEtcdUrlList(s);
    } catch (e) {
      throw new FlagValueError((e as Error).message);
    }
    this.values = new Set();
    this.urls = [];
    for (const u of parsed) {
      if (this.values.has(u.text)) continue;
      this.values.add(u.text);
      this.urls.push(u);
    }
  }
}

/** flags.UniqueStringsValue: a comma-separated set, read back sorted. */
export class UniqueStringsValue implements FlagValue {
  readonly isBool = false;
  values = new Set<string>();
  constructor(initial: string) {
    if (initial !== '') this.set(initial);
  }
  set(s: string): void {
    this.values = new Set(s.split(','));
  }
  sorted(): string[] {
    return [...this.values].sort();
  }
}

/** flags.StringsValue: a comma-separated list, kept in order. */
export class StringsValue implements FlagValue {
  readonly isBool = false;
  v: string[] = [];
  set(s: string): void {
    this.v = s.split(',');
  }
}

/** flags.SelectiveStringValue: one of a fixed set; the first is the default. */
export class SelectiveValue implements FlagValue {
  readonly isBool = false;
  v: string;
  constructor(readonly valids: readonly string[]) {
    this.v = valids[0];
  }
  set(s: string): void {
    if (!this.valids.includes(s)) throw new FlagValueError('invalid value');
    this.v = s;
  }
}

/** flags.SelectiveStringsValue: a comma-separated subset of a fixed set, accumulated and sorted. */
export class SelectiveMultiValue implements FlagValue {
  readonly isBool = false;
  vs: string[] = [];
  constructor(readonly valids: readonly string[]) {}
  set(s: string): void {
    for (const part of s.split(',')) {
      if (!this.valids.includes(part)) throw new FlagValueError(`invalid value "${part}"`);
      this.vs.push(part);
    }
    this.vs.sort();
  }
}

/** flags.IgnoredFlag: a long-gone flag, accepted without argument and without effect. */
export class IgnoredValue implements FlagValue {
  readonly isBool = true;
  set(): void {}
}
