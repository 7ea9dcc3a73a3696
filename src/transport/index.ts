export { PeerTransport } from './transport';
export type { PeerTransportOptions } from './transport';
export { fetchMemberInfo } from './member_info';
export type { MemberInfo } from './member_info';
export { DEFAULT_LIMITS } from './options';
export type { TransportLimits } from './options';
export { encodeRaftMessage, decodeRaftMessage, messageToPb, messageFromPb } from './codec';
export { PEER_SERVICE } from './peer_proto';
