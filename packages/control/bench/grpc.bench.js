// gRPC Exec round trip: in one process, a ControlPlane with a running bwrap sandbox, the gRPC
// face (`createGrpcServer`, as `agentfense serve` runs it) on an ephemeral loopback port over the same
// plane, and a client built from the generated sandbox.v1 code. Measures `true` through the library's
// exec and through a gRPC Exec call, interleaved in pairs so machine noise hits both alike, and prints
// both p50s and their ratio against the target (≤ 1.3×). Client and server share this process's event
// loop, so the gRPC figure includes both ends' work: a conservative measurement. Run as root after
// `pnpm build`: `pnpm bench:grpc` (AF_BENCH_GRPC_ROUNDS changes the pair count). Exits 1 over target.
import console from 'node:console';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { credentials } from '@grpc/grpc-js';
import { pino } from 'pino';
import { ControlPlane, controlPlaneBackend, createGrpcServer } from '../dist/index.js';
import { SandboxServiceClient } from '../dist/grpc/gen/sandbox/v1/sandbox.js';

const TARGET_RATIO = 1.3;
const ROUNDS = Number(process.env.AF_BENCH_GRPC_ROUNDS ?? 300);
const WARMUP = 30;

/** The value at fraction `q` of `values` (nearest rank). */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
const ms = (n) => `${n.toFixed(2)} ms`;

function grpcExec(client, request) {
  return new Promise((resolve, reject) => {
    client.exec(request, (err, reply) => (err === null ? resolve(reply) : reject(err)));
  });
}

const root = await mkdtemp(join(tmpdir(), 'af-bench-grpc-'));
let plane;
let server;
let client;
let failed;
try {
  const repo = join(root, 'repo');
  await mkdir(join(repo, 'src'), { recursive: true });
  await writeFile(join(repo, 'src', 'app.py'), 'print("hi")\n');
  plane = await ControlPlane.open({
    dataDir: join(root, 'data'),
    reapIntervalMs: 0,
    logger: pino({ level: 'warn' }),
  });
  // Shared with the API faces: a locally linked codebase is not reachable through them otherwise.
  const { id: codebaseId } = await plane.linkCodebase({ path: repo, apiVisible: true });
  const { id } = await plane.createSandbox({ codebaseId, preset: 'agent-safe' });
  await plane.startSandbox(id);

  server = createGrpcServer({ backend: controlPlaneBackend(plane), insecureNoAuth: true });
  const { port } = await server.listen({ host: '127.0.0.1', port: 0 });
  client = new SandboxServiceClient(`127.0.0.1:${port}`, credentials.createInsecure());

  const library = async () => {
    const started = performance.now();
    const result = await plane.run(id, 'true', { encoding: 'buffer' });
    const elapsed = performance.now() - started;
    if (result.exitCode !== 0) throw new Error(`library exec exited ${result.exitCode}`);
    return elapsed;
  };
  const viaGrpc = async () => {
    const started = performance.now();
    const reply = await grpcExec(client, { sandboxId: id, command: 'true', stdin: '', env: {}, workdir: '' });
    const elapsed = performance.now() - started;
    if (reply.exitCode !== 0) throw new Error(`gRPC Exec exited ${reply.exitCode}`);
    return elapsed;
  };

  for (let i = 0; i < WARMUP; i += 1) {
    await library();
    await viaGrpc();
  }
  const libTimes = [];
  const grpcTimes = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    // Alternate which goes first, so neither always runs right after the other's cleanup.
    if (i % 2 === 0) {
      libTimes.push(await library());
      grpcTimes.push(await viaGrpc());
    } else {
      grpcTimes.push(await viaGrpc());
      libTimes.push(await library());
    }
  }
  const libP50 = quantile(libTimes, 0.5);
  const grpcP50 = quantile(grpcTimes, 0.5);
  const ratio = grpcP50 / libP50;
  failed = ratio > TARGET_RATIO;
  console.log(
    `library exec \`true\`:   p50 ${ms(libP50)}, p99 ${ms(quantile(libTimes, 0.99))} (${ROUNDS} runs)`,
  );
  console.log(
    `gRPC Exec \`true\`:      p50 ${ms(grpcP50)}, p99 ${ms(quantile(grpcTimes, 0.99))} (${ROUNDS} runs)`,
  );
  console.log(
    `gRPC / library p50: ${ratio.toFixed(2)}× (+${ms(grpcP50 - libP50)}; target ≤ ${TARGET_RATIO}×: ${
      failed ? 'OVER TARGET' : 'ok'
    })`,
  );
} finally {
  client?.close();
  await server?.close();
  await plane?.close().catch((err) => console.error('closing the control plane failed:', err));
  await rm(root, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
