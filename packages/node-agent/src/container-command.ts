// The command a sandbox container runs as pid 1 until this agent attaches it: defined beside the Swarm
// adapter, which puts it in every sandbox service it creates, and re-exported for the agent's users.
export { SANDBOX_WAIT_COMMAND } from '@agentfense/orchestrator';
