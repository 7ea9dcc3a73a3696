/** An error etcdutl reports as "Error: <message>" and exit status 1, as etcd's etcdutl does. */
export class EtcdutlError extends Error {}
