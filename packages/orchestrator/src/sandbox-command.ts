// What a sandbox container placed by an orchestrator runs as pid 1 until its node agent has attached it:
// a shell that waits for af-init's socket to appear under /.agentfense (the agent attaches that directory
// after the view) and then becomes af-init, so af-init is pid 1 as with the Docker runtime. Nothing of the
// image runs before af-init has connected, and af-init connects exactly once. The Swarm adapter sets it as
// the service's command (replacing the image's entrypoint), so any image with /bin/sh and sleep can serve.
export const SANDBOX_WAIT_COMMAND: readonly string[] = [
  '/bin/sh',
  '-c',
  'until [ -S /.agentfense/sock ]; do sleep 0.1; done; exec /.agentfense/af-init --connect /.agentfense/sock',
];
