import { describe, expect, it } from 'vitest';
import { grpcGoDetails } from '../../../src/api/grpc_go_texts';

const served = { knownService: (s: string): boolean => s === 'etcdserverpb.KV', methodType: 'unary' };
const streamed = { ...served, methodType: 'bidiStream' };

describe("grpc-js's status texts as grpc-go words them", () => {
  it('maps the size limits and unknown methods, and leaves every other text alone', () => {
    expect(grpcGoDetails('Received message larger than max (10 vs 5)', served)).toBe('grpc: received message larger than max (10 vs. 5)');
    expect(grpcGoDetails('Sent message larger than max (10 vs. 5)', served)).toBe('grpc: trying to send message larger than max (10 vs. 5)');
    expect(grpcGoDetails('The server does not implement the method /etcdserverpb.KV/Foo', served)).toBe('unknown method Foo for service etcdserverpb.KV');
    expect(grpcGoDetails('The server does not implement the method /x.Y/Foo', served)).toBe('unknown service x.Y');
    expect(grpcGoDetails('Error deserializing request', served)).toBe('grpc: error unmarshalling request: bad wire-format data');
    expect(grpcGoDetails('Error deserializing request: index out of range', streamed)).toBe('grpc: failed to unmarshal the received message: bad wire-format data');
    expect(grpcGoDetails('Received compressed message but "grpc-encoding" header was identity', served)).toBe('grpc: compressed flag set with identity or empty encoding');
    for (const t of ['etcdserver: request is too large', 'Received message larger than max', '']) expect(grpcGoDetails(t, served)).toBe(t);
  });
});
