// etcd 3.6's server feature gates (`--feature-gates=Name=true,...`), with the same
// parsing, the same errors, and the AllAlpha/AllBeta switches.

import { parseGoBool } from './goparse';
import { FlagValueError, type FlagValue } from './values';

type Stage = 'ALPHA' | 'BETA';
interface FeatureSpec {
  readonly defaultOn: boolean;
  readonly stage: Stage;
}

export const SERVER_FEATURES = {
  StopGRPCServiceOnDefrag: { defaultOn: false, stage: 'ALPHA' },
  TxnModeWriteWithSharedBuffer: { defaultOn: true, stage: 'BETA' },
  InitialCorruptCheck: { defaultOn: false, stage: 'ALPHA' },
  CompactHashCheck: { defaultOn: false, stage: 'ALPHA' },
  LeaseCheckpoint: { defaultOn: false, stage: 'ALPHA' },
  LeaseCheckpointPersist: { defaultOn: false, stage: 'ALPHA' },
  SetMemberLocalAddr: { defaultOn: false, stage: 'ALPHA' },
} as const satisfies Record<string, FeatureSpec>;
export type ServerFeature = keyof typeof SERVER_FEATURES;

const GLOBAL_SWITCHES = {
  AllAlpha: { defaultOn: false, stage: 'ALPHA' },
  AllBeta: { defaultOn: false, stage: 'BETA' },
} as const satisfies Record<string, FeatureSpec>;

const KNOWN: Readonly<Record<string, FeatureSpec>> = { ...SERVER_FEATURES, ...GLOBAL_SWITCHES };

/** The deprecated experimental flags that stand for a feature gate in 3.6. */
export const EXPERIMENTAL_FLAG_FEATURES: Readonly<Record<string, ServerFeature>> = {
  'experimental-stop-grpc-service-on-defrag': 'StopGRPCServiceOnDefrag',
  'experimental-initial-corrupt-check': 'InitialCorruptCheck',
  'experimental-compact-hash-check-enabled': 'CompactHashCheck',
  'experimental-txn-mode-write-with-shared-buffer': 'TxnModeWriteWithSharedBuffer',
  'experimental-enable-lease-checkpoint': 'LeaseCheckpoint',
  'experimental-enable-lease-checkpoint-persist': 'LeaseCheckpointPersist',
};

export class FeatureGateValue implements FlagValue {
  readonly isBool = false;
  /** Explicitly set gates (including ones switched on by AllAlpha/AllBeta). */
  readonly explicit = new Map<string, boolean>();

  set(value: string): void {
    const m = new Map<string, boolean>();
    for (const s of value.split(',')) {
      if (s.length === 0) continue;
      const eq = s.indexOf('=');
      const k = (eq >= 0 ? s.slice(0, eq) : s).trim();
      if (eq < 0) throw new FlagValueError(`missing bool value for ${k}`);
      const v = s.slice(eq + 1).trim();
      const b = parseGoBool(v);
      if (b === undefined) {
        throw new FlagValueError(`invalid value of ${k}=${v}, err: strconv.ParseBool: parsing "${v}": invalid syntax`);
      }
      m.set(k, b);
    }
    this.setFromMap(m);
  }

  setFromMap(m: ReadonlyMap<string, boolean>): void {
    for (const k of m.keys()) {
      if (!(k in KNOWN)) throw new FlagValueError(`unrecognized feature gate: ${k}`);
    }
    for (const [k, v] of m) {
      this.explicit.set(k, v);
      const stage = k === 'AllAlpha' ? 'ALPHA' : k === 'AllBeta' ? 'BETA' : undefined;
      if (stage === undefined) continue;
      for (const [name, spec] of Object.entries(SERVER_FEATURES)) {
        if (spec.stage === stage && !this.explicit.has(name)) this.explicit.set(name, v);
      }
    }
  }

  enabled(f: ServerFeature): boolean {
    return this.explicit.get(f) ?? SERVER_FEATURES[f].defaultOn;
  }

  /** "k=v,..." of the explicitly set gates, sorted, as the Go value prints itself. */
  toString(): string {
    return [...this.explicit].map(([k, v]) => `${k}=${v}`).sort().join(',');
  }

  effective(): Record<ServerFeature, boolean> {
    const out = {} as Record<ServerFeature, boolean>;
    for (const f of Object.keys(SERVER_FEATURES) as ServerFeature[]) out[f] = this.enabled(f);
    return out;
  }
}

/** Lines for `--help`: "Name=true|false (STAGE - default=x)", sorted. */
export function knownFeatureLines(): string[] {
  return Object.entries(KNOWN)
    .map(([k, s]) => `${k}=true|false (${s.stage} - default=${s.defaultOn})`)
    .sort();
}
