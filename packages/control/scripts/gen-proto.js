#!/usr/bin/env node
// Generates the gRPC face's TypeScript (messages, service definitions, clients) from proto/sandbox/v1/*.proto
// into src/grpc/gen/ with protoc (Debian's protobuf-compiler, installed by scripts/setup) and ts-proto.
// The output is a build product: gitignored, regenerated when a .proto or this script is newer than it.
// docs/decisions.md, "The gRPC face is grpc-js with our own `.proto` files of the original's wire", says why
// generated code is not committed.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const protoRoot = join(pkg, 'proto');
const protoDir = join(protoRoot, 'sandbox', 'v1');
const outDir = join(pkg, 'src', 'grpc', 'gen');
const stamp = join(outDir, '.stamp');
const plugin = join(pkg, 'node_modules', '.bin', 'protoc-gen-ts_proto');
// Timestamp and Duration come from libprotobuf-dev; protoc also searches its own include dir.
const wellKnown = '/usr/include';

const protos = readdirSync(protoDir)
  .filter((name) => name.endsWith('.proto'))
  .map((name) => join('sandbox', 'v1', name));
const inputs = [fileURLToPath(import.meta.url), ...protos.map((p) => join(protoRoot, p))];
const mtime = (file) => {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return -1;
  }
};
if (mtime(stamp) >= Math.max(...inputs.map(mtime))) process.exit(0);

const options = [
  'outputServices=grpc-js', // service definitions for @grpc/grpc-js servers and typed clients
  'esModuleInterop=true',
  'importSuffix=.js', // ESM with explicit specifiers (NodeNext)
  'forceLong=number', // sizes and limits fit in 2^53; ts-proto throws rather than lose precision
  'useDate=true', // Timestamp fields as Date
  'env=node', // bytes as Buffer
  'oneof=unions-value', // UploadChunk.content as a discriminated union
  'outputJsonMethods=false',
  'useOptionals=messages',
];
rmSync(outDir, { recursive: true, force: true });
mkdirSync(outDir, { recursive: true });
try {
  execFileSync(
    'protoc',
    [
      `--plugin=protoc-gen-ts_proto=${plugin}`,
      `--ts_proto_out=${outDir}`,
      `--ts_proto_opt=${options.join(',')}`,
      `-I${protoRoot}`,
      `-I${wellKnown}`,
      ...protos,
    ],
    { stdio: 'inherit' },
  );
} catch (err) {
  if (err.code === 'ENOENT') {
    console.error('gen-proto: protoc not found; run `bash scripts/setup` (it installs protobuf-compiler)');
  }
  process.exit(1);
}
writeFileSync(stamp, `${new Date().toISOString()}\n`);
