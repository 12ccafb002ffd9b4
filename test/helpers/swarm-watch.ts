// The Swarm tests' view of the adapter: a SwarmOrchestrator on the test cluster's manager with short
// restart and poll intervals (so a lost node is noticed in seconds), and every status its watch reports,
// kept with the time it arrived, for the tests to wait on and to time.
import { createEngineApi, type EngineApi } from '@agentfense/runtime-docker';
import type { PlacementStatus } from '@agentfense/orchestrator';
import { SwarmOrchestrator, swarmApiFrom } from '@agentfense/orchestrator/swarm';

export interface Seen {
  readonly at: number;
  readonly status: PlacementStatus;
}

export class SwarmWatch {
  readonly engine: EngineApi;
  readonly adapter: SwarmOrchestrator;
  /** Every status reported so far, in order. */
  readonly seen: Seen[] = [];
  readonly #stop = new AbortController();
  readonly #watching: Promise<void>;
  #closed: Promise<void> | undefined;

  constructor(options: {
    readonly dockerHost: string;
    readonly nodeAgentPort: number;
    readonly nodeLabel: string;
  }) {
    this.engine = createEngineApi(options.dockerHost);
    this.adapter = new SwarmOrchestrator({
      api: swarmApiFrom(this.engine),
      nodeAgent: { port: options.nodeAgentPort, nodeLabel: options.nodeLabel },
      restartDelayMs: 200,
      pollIntervalMs: 250,
    });
    const adapter = this.adapter;
    this.#watching = (async () => {
      for await (const status of adapter.watch({ signal: this.#stop.signal })) {
        this.seen.push({ at: performance.now(), status });
      }
    })();
  }

  /** The last status reported for each sandbox. */
  latest(): Map<string, PlacementStatus> {
    return new Map(this.seen.map((s) => [s.status.sandboxId, s.status]));
  }

  /** Ends the watch and closes the engine client; a second call does nothing more. */
  stop(): Promise<void> {
    this.#closed ??= (async () => {
      this.#stop.abort();
      await this.#watching;
      await this.engine.close();
    })();
    return this.#closed;
  }
}
