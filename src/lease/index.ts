export { Lessor, MAX_LEASE_TTL_SEC, LEASE_REVOKE_RATE_PER_SEC } from './lessor';
export type { LeaseDb, LessorOptions, LeaseTimeToLive } from './lessor';
export { LeaseIdGenerator } from './lease-id';
export { encodeLeaseRecord, decodeLeaseRecord, leaseKey, leaseIdFromKey } from './lease-record';
export type { LeaseRecord } from './lease-record';
