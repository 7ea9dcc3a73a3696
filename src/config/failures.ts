// How parsing fails, mirroring where etcd fails: each kind is reported differently.

/** etcd's Validate failure: logged as warn "failed to verify flags", exit 1. */
export class Invalid extends Error {}
/** ConvertToZapLevel panics on an unknown level: Go prints "panic: ..." and exits 2. */
export class PanicExit extends Error {}
/** Fails later in etcd (embed.StartEtcd): fatal "discovery failed", exit 1. */
export class StartFailure extends Error {}

export const ERR_UNSET_ADVERTISE_CLIENT_URLS = '--advertise-client-urls is required when --listen-client-urls is set explicitly';
