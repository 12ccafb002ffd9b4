// Who may reach what through the API faces (HTTP, gRPC, /mcp; docs/security.md): a codebase linked by a
// local process (`run`, `shell`, `mcp`, the library) is that user's own directory, not something the API
// was given, so the faces answer for it, its sandboxes and their sessions exactly as for an unknown id.
// The backend (backend.ts) checks every id a request names through these before it acts.
import { NotFoundError } from '@agentfense/protocol';
import type { CodebaseInfo } from '../codebases/types.js';
import type { ControlPlane } from '../control-plane.js';

/** The checks of one control plane; each throws NotFoundError, worded as for an unknown id. */
export interface ApiReach {
  /** Codebase `id` exists and API clients may reach it. */
  codebase(id: string): Promise<void>;
  /** Sandbox `id` exists and its codebase is reachable. */
  sandbox(id: string): Promise<void>;
  /** Session `id` exists and its sandbox is reachable. */
  session(id: string): Promise<void>;
  /** Whether a listed codebase is reachable (listings leave the others out). */
  listed(codebase: CodebaseInfo): Promise<boolean>;
}

export function apiReach(plane: ControlPlane): ApiReach {
  const reachable = async (codebaseId: string): Promise<boolean> =>
    (await plane.codebaseVisibility(codebaseId)) === 'api';
  const notFound = (kind: string, id: string): NotFoundError =>
    new NotFoundError(`${kind} ${id} not found`, { details: { id } });
  const sandboxReachable = async (id: string): Promise<boolean> =>
    reachable((await plane.getSandbox(id)).codebaseId);
  return {
    codebase: async (id) => {
      if (!(await reachable(id))) throw notFound('codebase', id);
    },
    sandbox: async (id) => {
      if (!(await sandboxReachable(id))) throw notFound('sandbox', id);
    },
    // A placed sandbox's session is found through its record, before any node agent is called.
    session: async (id) => {
      const placed = plane.placedSessions;
      const sandboxId =
        placed === undefined ? plane.getSession(id).info().sandboxId : await placed.sandboxOf(id);
      if (!(await sandboxReachable(sandboxId))) throw notFound('session', id);
    },
    listed: (codebase) => reachable(codebase.id),
  };
}
