// @agentfense/audit-trail: a sandbox's audit trail on disk, written and read wherever the sandbox's
// worker runs — the control plane for a sandbox on its host, the node agent for one placed on a cluster
// node — so both keep the same bounded file and answer the same queries.
export { AuditWriter, DEFAULT_AUDIT_MAX_BYTES, auditMaxBytes, readAudit, rotatedAuditFile } from './trail.js';
export type { AuditQuery, AuditWriterOptions, NetworkAuditQuery } from './trail.js';
export { DENIALS_PER_WINDOW } from './collapse.js';
