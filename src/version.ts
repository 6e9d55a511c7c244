/** agentloop's version (package.json's; a unit test keeps them equal): `--version` and `$SRV` services. */
export const AGENTLOOP_VERSION = "0.1.0";
