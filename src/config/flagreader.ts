// Typed reads of a parsed flag set.

import { FeatureGateValue } from './featuregates';
import type { FlagSet } from './flagset';
import type { EtcdUrl } from './urls';
import {
  BoolValue,
  DurationValue,
  IntegerValue,
  SelectiveMultiValue,
  SelectiveValue,
  StringValue,
  StringsValue,
  Uint32Value,
  UniqueStringsValue,
  UniqueUrlsValue,
} from './values';

/** Typed reads of the flag set; a wrong kind is a programming error in the flag table. */
export class Flags {
  constructor(readonly fs: FlagSet) {}
  private get<T>(name: string, ctor: abstract new (...a: never[]) => T): T {
    const v = this.fs.lookup(name);
    if (!(v instanceof ctor)) throw new Error(`flag ${name} is not a ${ctor.name}`);
    return v;
  }
  str(name: string): string {
    return this.get(name, StringValue).v;
  }
  bool(name: string): boolean {
    return this.get(name, BoolValue).v;
  }
  /** Integers beyond 2^53 are clamped: none of these limits is meaningful that high. */
  num(name: string): number {
    const v = this.get(name, IntegerValue).v;
    const max = BigInt(Number.MAX_SAFE_INTEGER);
    return Number(v > max ? max : v < -max ? -max : v);
  }
  uint32(name: string): number {
    return Number(this.get(name, Uint32Value).v);
  }
  ns(name: string): bigint {
    return this.get(name, DurationValue).ns;
  }
  ms(name: string): number {
    return Number(this.ns(name)) / 1e6;
  }
  urls(name: string): EtcdUrl[] {
    return [...this.get(name, UniqueUrlsValue).urls];
  }
  urlValues(name: string): string[] {
    return [...this.get(name, UniqueUrlsValue).values];
  }
  uniqueStrings(name: string): string[] {
    return this.get(name, UniqueStringsValue).sorted();
  }
  strings(name: string): string[] {
    return [...this.get(name, StringsValue).v];
  }
  select(name: string): string {
    return this.get(name, SelectiveValue).v;
  }
  selectMulti(name: string): string[] {
    return [...this.get(name, SelectiveMultiValue).vs];
  }
  gates(): FeatureGateValue {
    return this.get('feature-gates', FeatureGateValue);
  }
}
