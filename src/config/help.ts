// `etcd --help`: the short usage (stderr) and the flag reference (stdout), built from the
// flag table so names and defaults cannot drift from what the parser accepts.

import { FLAG_SPECS, HELP_SECTIONS } from './flags';

export const USAGE_TEXT = `Usage:

  etcd [flags]
    Start an etcd server.

  etcd --version
    Print the version of etcd.

  etcd -h | --help
    Print this help and the list of flags.

  etcd --config-file
    Read the server configuration from a file; command line flags and environment variables are then ignored.

  etcd gateway
    Run the stateless TCP forwarding proxy (not available in this server).

  etcd grpc-proxy
    Run the stateless gRPC reverse proxy (not available in this server).
`;

function buildFlagsText(): string {
  let out = '';
  for (const section of HELP_SECTIONS) {
    out += `\n${section}:\n`;
    for (const f of FLAG_SPECS) {
      if (f.section !== section) continue;
      out += `  --${f.name}${f.defText === '' ? '' : ' ' + f.defText}\n    ${f.help}\n`;
    }
  }
  out += '\nCAUTION: unsafe flags may break the guarantees of the consensus protocol!\n';
  out += '\nEvery flag can also be given as an environment variable: ETCD_ + the name in upper case\n';
  out += 'with dashes as underscores (--initial-cluster-token -> ETCD_INITIAL_CLUSTER_TOKEN).\n';
  out += 'A flag given on the command line must not also be set in the environment.\n';
  return out;
}

/** What etcd prints to stdout for -h/--help (followed by a newline). */
export const FLAGS_TEXT = buildFlagsText();
