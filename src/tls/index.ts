export { describeTls, loadTlsMaterial, serverTlsOptions, tlsFilesEmpty, type TlsCommon, type TlsMaterial } from './material';
export { admitVerifiedPeer, checkAllowedPeer, goTlsError, logRejected, type RejectLogger } from './verify';
export { selfCert, subjectAltNames } from './selfcert';
export { channelCredentials, serverCredentials } from './grpc_credentials';
export { resolveMemberTls, TLS_FLAGS, type MemberTls } from './member';
export { listenPeerTls, type PeerTlsListener } from './peer_listener';
