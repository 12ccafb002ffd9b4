// One sandbox's placement, derived from its service's tasks and the nodes they are on. Swarm keeps one
// task per attempt: the newest one that should run says where the sandbox is; the task that was running
// when the sandbox was last reported ready says, when it stops, whether it went with its node. Each
// change is reported once.
import type { LostReason, PlacementStatus } from '../types.js';
import { taskAddress, type SwarmNode, type SwarmTask } from './objects.js';

/** Task states after which Swarm will not run that task again (it may start a new one). */
const ENDED = new Set(['complete', 'shutdown', 'failed', 'rejected', 'remove', 'orphaned']);

function newestFirst(a: SwarmTask, b: SwarmTask): number {
  return (b.Version?.Index ?? 0) - (a.Version?.Index ?? 0);
}

export function nodeIsReady(node: SwarmNode | undefined): boolean {
  return node?.Status.State === 'ready';
}

export function nodeName(node: SwarmNode | undefined, nodeId: string | undefined): string | undefined {
  return node?.Description?.Hostname ?? nodeId;
}

/** The task serving the sandbox: running, meant to run, on a ready node. */
export function servingTask(
  tasks: readonly SwarmTask[],
  nodes: ReadonlyMap<string, SwarmNode>,
): SwarmTask | undefined {
  return [...tasks]
    .sort(newestFirst)
    .find(
      (t) =>
        t.DesiredState === 'running' &&
        t.Status.State === 'running' &&
        nodeIsReady(nodes.get(t.NodeID ?? '')),
    );
}

function lostDetail(reason: LostReason, node: string | undefined, task: SwarmTask): string {
  const what = 'its processes and sessions there ended, and changes since its last checkpoint stayed there';
  const said = task.Status.Err ?? task.Status.Message;
  const cause = said === undefined || said === '' ? '' : ` (${task.Status.State}: ${said})`;
  return reason === 'node-lost'
    ? `node ${node ?? '?'} went away${cause}; ${what}`
    : `its container on node ${node ?? '?'} stopped${cause}; ${what}`;
}

function pendingDetail(newest: SwarmTask | undefined, nodes: ReadonlyMap<string, SwarmNode>): string {
  if (newest === undefined) return 'waiting for Swarm to create its task';
  const node = nodes.get(newest.NodeID ?? '');
  if (newest.NodeID !== undefined && newest.NodeID !== '' && !nodeIsReady(node)) {
    const name = nodeName(node, newest.NodeID) ?? '?';
    return `node ${name} is ${node?.Status.State ?? 'gone'}; waiting for Swarm to place it again`;
  }
  const said = newest.Status.Err ?? newest.Status.Message;
  return said === undefined || said === '' ? newest.Status.State : `${newest.Status.State}: ${said}`;
}

export class SwarmTracker {
  /** The task that was serving when the sandbox was last reported ready. */
  private servingTaskId: string | undefined;
  private servingNode: string | undefined;
  private last: PlacementStatus | undefined;
  private everReady = false;

  constructor(readonly sandboxId: string) {}

  /**
   * Pending and never ready yet: a fresh placement, whose create is waiting for its `ready`. One placed
   * again after a loss is not (its start is long over), so a node's loss does not set every replica
   * polling the managers at the fast interval while Swarm re-places that node's sandboxes.
   */
  get awaitingFirstReady(): boolean {
    return this.last?.state === 'pending' && !this.everReady;
  }

  /** The statuses to report for the service's tasks now (`undefined`: the service is gone). */
  update(tasks: readonly SwarmTask[] | undefined, nodes: ReadonlyMap<string, SwarmNode>): PlacementStatus[] {
    const out: PlacementStatus[] = [];
    const sandboxId = this.sandboxId;
    if (tasks === undefined) {
      this.emit(out, { state: 'gone', sandboxId });
      return out;
    }
    const serving = servingTask(tasks, nodes);
    if (this.servingTaskId !== undefined && serving?.ID !== this.servingTaskId) {
      const was = tasks.find((t) => t.ID === this.servingTaskId);
      const node = was === undefined ? undefined : nodes.get(was.NodeID ?? '');
      // A task whose node is no longer ready went with it (Swarm marks such a task for shutdown once the
      // node misses its heartbeats); one that ended on a ready node is the container's own loss.
      const reason: LostReason = was !== undefined && !nodeIsReady(node) ? 'node-lost' : 'container-lost';
      const name = this.servingNode;
      this.servingTaskId = undefined;
      const detail =
        was === undefined
          ? `its task on node ${name ?? '?'} is no longer listed; the processes and sessions there ended`
          : lostDetail(reason, name, was);
      this.emit(out, { state: 'lost', sandboxId, reason, nodeName: name, detail, replaced: true });
    }
    if (serving !== undefined) {
      this.servingTaskId = serving.ID;
      this.servingNode = nodeName(nodes.get(serving.NodeID ?? ''), serving.NodeID);
      this.emit(out, { state: 'ready', sandboxId, nodeName: this.servingNode!, podIP: taskAddress(serving) });
      return out;
    }
    const newest = [...tasks].sort(newestFirst)[0];
    const wanted = tasks.some((t) => t.DesiredState === 'running' || t.DesiredState === 'ready');
    if (newest !== undefined && !wanted && ENDED.has(newest.Status.State)) {
      // No task is meant to run any more: Swarm gave up on this service (its restart policy ran out).
      const node = nodeName(nodes.get(newest.NodeID ?? ''), newest.NodeID);
      const detail = `${newest.Status.State}: ${newest.Status.Err ?? newest.Status.Message ?? ''}`;
      this.emit(out, { state: 'lost', sandboxId, reason: 'failed', nodeName: node, detail, replaced: false });
      return out;
    }
    this.emit(out, { state: 'pending', sandboxId, detail: pendingDetail(newest, nodes) });
    return out;
  }

  private emit(out: PlacementStatus[], status: PlacementStatus): void {
    if (this.last !== undefined && JSON.stringify(this.last) === JSON.stringify(status)) return;
    if (this.last?.state === 'gone') return;
    this.last = status;
    if (status.state === 'ready') this.everReady = true;
    out.push(status);
  }
}
