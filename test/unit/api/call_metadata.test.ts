// A direct unary call builds its grpc-js Metadata only when a handler may find something in it.
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { metadataValues, type MetadataCarrier } from '../../../src/api/call_metadata';
import { callAuth } from '../../../src/api/auth';

/** A carrier that answers mayCarry from a header list and counts how often its Metadata is built. */
function carrier(headers: Record<string, string>): MetadataCarrier & { built: number } {
  return {
    built: 0,
    get metadata(): grpc.Metadata {
      this.built++;
      const md = new grpc.Metadata();
      for (const [k, v] of Object.entries(headers)) md.set(k, v);
      return md;
    },
    mayCarry: (key: string) => headers[key] !== undefined,
  };
}

describe('metadataValues', () => {
  it('reads a key the call carries', () => {
    const c = carrier({ hasleader: 'true' });
    expect(metadataValues(c, 'hasleader')).toEqual(['true']);
    expect(c.built).toBe(1);
  });

  it('builds no Metadata for a key the call cannot carry', () => {
    const c = carrier({ other: 'x' });
    expect(metadataValues(c, 'hasleader')).toEqual([]);
    expect(c.built).toBe(0);
  });

  it("reads grpc-js's calls (no mayCarry) through their Metadata", () => {
    const md = new grpc.Metadata();
    md.set('token', 't1');
    expect(metadataValues({ metadata: md }, 'token')).toEqual(['t1']);
  });
});

describe('callAuth on a direct call', () => {
  it('finds the token, or the gateway authorization, and builds nothing when neither is there', () => {
    expect(callAuth(carrier({ token: 'abc' })).token).toBe('abc');
    expect(callAuth(carrier({ authorization: 'xyz' })).token).toBe('xyz');
    const none = carrier({ 'user-agent': 'etcdctl' });
    expect(callAuth(none)).toEqual({});
    expect(none.built).toBe(0);
  });
});
