// The logging surface of this runtime: the shared one from @agentfense/protocol, tagged runtime-bwrap.
import { createStderrLogger as createTagged } from '@agentfense/protocol';
import type { RuntimeLogger } from '@agentfense/protocol';

export type { RuntimeLogger };

/** Default logger: drops debug, writes warnings to stderr as one JSON line (pass pino to do better). */
export function createStderrLogger(): RuntimeLogger {
  return createTagged('runtime-bwrap');
}
