// The wire shape of a set of .proto files: every message field (number, name, type, label, oneof),
// enum value and RPC of package sandbox.v1, one sorted line each, as @grpc/proto-loader describes them.
import * as loader from '@grpc/proto-loader';

interface Field {
  name: string;
  number: number;
  label: string;
  type: string;
  typeName: string;
  oneofIndex?: number;
}
interface EnumType {
  name?: string;
  value?: { name: string; number: number }[];
}
interface MessageType {
  name?: string;
  field?: Field[];
  oneofDecl?: { name: string }[];
  nestedType?: MessageType[];
  enumType?: EnumType[];
}
interface Described {
  format?: string;
  type?: MessageType & EnumType;
}
interface Method {
  path: string;
  requestStream: boolean;
  responseStream: boolean;
  requestType: { type: { name: string } };
  responseType: { type: { name: string } };
}

export function wireShape(files: string[], includeDirs: string[]): string[] {
  const definition = loader.loadSync(files, { includeDirs, keepCase: true }) as Record<string, unknown>;
  const lines: string[] = [];
  for (const [name, entry] of Object.entries(definition)) {
    if (!name.startsWith('sandbox.v1.')) continue;
    const described = entry as Described;
    if (described.format?.includes('EnumDescriptorProto') === true) {
      enumLines(name, described.type ?? {}, lines);
    } else if (described.format?.includes('DescriptorProto') === true) {
      messageLines(name, described.type ?? {}, lines);
    } else {
      for (const m of Object.values(entry as Record<string, Method>)) {
        lines.push(
          `rpc ${m.path} ${m.requestStream ? 'stream ' : ''}${m.requestType.type.name} -> ${
            m.responseStream ? 'stream ' : ''
          }${m.responseType.type.name}`,
        );
      }
    }
  }
  return lines.sort();
}

function enumLines(name: string, type: EnumType, lines: string[]): void {
  for (const v of type.value ?? []) lines.push(`enum ${name} ${v.name}=${v.number}`);
}

/** A message's fields, then its nested messages and enums (map entries included), recursively. */
function messageLines(name: string, type: MessageType, lines: string[]): void {
  const oneofs = type.oneofDecl ?? [];
  for (const f of type.field ?? []) {
    // The descriptor fills oneofIndex with 0 by default: it means something only where a oneof exists.
    const oneof =
      oneofs.length === 0 || f.oneofIndex === undefined ? '' : ` oneof ${oneofs[f.oneofIndex]?.name ?? '?'}`;
    lines.push(`message ${name} ${f.number} ${f.name} ${f.label} ${f.type} ${f.typeName}${oneof}`.trimEnd());
  }
  for (const nested of type.nestedType ?? []) messageLines(`${name}.${nested.name ?? '?'}`, nested, lines);
  for (const nested of type.enumType ?? []) enumLines(`${name}.${nested.name ?? '?'}`, nested, lines);
}
