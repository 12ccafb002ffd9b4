// Process identities (pid + kernel start time) live in @agentfense/protocol: the docker runtime's container
// pool labels its containers with its owner's identity too.
export { isSameProcess, processStartTime, selfIdentity } from '@agentfense/protocol';
