// Go's flag package parse loop (flag.ContinueOnError), which etcd uses: "-x" and "--x" are the
// same, "--x=v" and "--x v" set a value, boolean flags take no separate argument, parsing stops
// at the first non-flag argument or after "--", and later settings override earlier ones.

import { FLAG_SPECS, type FlagSpec } from './flags';
import { goQuote } from './goparse';
import { FlagValueError, type FlagValue } from './values';

export interface FlagEntry {
  readonly spec: FlagSpec;
  readonly value: FlagValue;
}

export type FlagParseOutcome =
  | { kind: 'ok'; positional: string[] }
  | { kind: 'help' }
  /** `message` is the line Go prints before the usage text. */
  | { kind: 'error'; message: string };

export class FlagSet {
  private readonly formal = new Map<string, FlagEntry>();
  /** Flags set on the command line or from the environment, in the order first set. */
  readonly actual = new Set<string>();

  constructor(specs: readonly FlagSpec[] = FLAG_SPECS) {
    for (const spec of specs) this.formal.set(spec.name, { spec, value: spec.make() });
  }

  lookup(name: string): FlagValue | undefined {
    return this.formal.get(name)?.value;
  }

  /** All flags sorted by name, as Go's VisitAll walks them. */
  all(): FlagEntry[] {
    return [...this.formal.values()].sort((a, b) => (a.spec.name < b.spec.name ? -1 : a.spec.name > b.spec.name ? 1 : 0));
  }

  isSet(name: string): boolean {
    return this.actual.has(name);
  }

  /** flag.FlagSet.Set: returns the Value's own error text, unwrapped. */
  set(name: string, value: string): string | undefined {
    const e = this.formal.get(name);
    if (e === undefined) return `no such flag -${name}`;
    try {
      e.value.set(value);
    } catch (err) {
      if (err instanceof FlagValueError) return err.message;
      throw err;
    }
    this.actual.add(name);
    return undefined;
  }

  parse(args: readonly string[]): FlagParseOutcome {
    let i = 0;
    while (i < args.length) {
      const s = args[i];
      if (s.length < 2 || s[0] !== '-') break;
      let minuses = 1;
      if (s[1] === '-') {
        minuses = 2;
        if (s.length === 2) {
          i++;
          break;
        }
      }
      let name = s.slice(minuses);
      if (name.length === 0 || name[0] === '-' || name[0] === '=') {
        return { kind: 'error', message: `bad flag syntax: ${s}` };
      }
      i++;
      let hasValue = false;
      let value = '';
      const eq = name.indexOf('=', 1);
      if (eq > 0) {
        value = name.slice(eq + 1);
        hasValue = true;
        name = name.slice(0, eq);
      }
      const entry = this.formal.get(name);
      if (entry === undefined) {
        if (name === 'help' || name === 'h') return { kind: 'help' };
        return { kind: 'error', message: `flag provided but not defined: -${name}` };
      }
      const v = entry.value;
      if (v.isBool) {
        try {
          v.set(hasValue ? value : 'true');
        } catch (err) {
          if (!(err instanceof FlagValueError)) throw err;
          return {
            kind: 'error',
            message: hasValue
              ? `invalid boolean value ${goQuote(value)} for -${name}: ${err.message}`
              : `invalid boolean flag ${name}: ${err.message}`,
          };
        }
      } else {
        if (!hasValue && i < args.length) {
          hasValue = true;
          value = args[i];
          i++;
        }
        if (!hasValue) return { kind: 'error', message: `flag needs an argument: -${name}` };
        try {
          v.set(value);
        } catch (err) {
          if (!(err instanceof FlagValueError)) throw err;
          return { kind: 'error', message: `invalid value ${goQuote(value)} for flag -${name}: ${err.message}` };
        }
      }
      this.actual.add(name);
    }
    return { kind: 'ok', positional: args.slice(i) };
  }
}
