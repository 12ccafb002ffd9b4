// @agentfense/launcher: af-init, the in-sandbox launcher both runtimes run as a sandbox's pid 1 (a static
// C program, native/af-init.c, built to dist/af-init by `pnpm build`), its wire protocol and the host's
// client. Everything public is exported here.
export {
  AF_INIT_MAX_FRAME_LENGTH,
  AF_INIT_MAX_OUTPUT_CHUNK,
  AF_INIT_MAX_STDIN_CHUNK,
  AF_INIT_PROTOCOL_VERSION,
  LauncherFrameDecoder,
  LauncherFrameType,
  encodeLauncherFrame,
  encodeSpawnPayload,
} from './frames.js';
export type { LauncherFrame, SpawnPayload } from './frames.js';
export { LauncherClient } from './client.js';
export type {
  LauncherCommand,
  LauncherConnectOptions,
  LauncherOutcome,
  LauncherSpawnOptions,
} from './client.js';
export { AF_INIT_PATH, afInitPath } from './binary.js';
