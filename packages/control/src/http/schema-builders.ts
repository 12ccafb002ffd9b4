// The two shapes every schema of the HTTP API is built from: request objects (closed, some fields
// required) and response objects (every field present; clients ignore fields added later).

/** A JSON Schema object (the subset we write: plain data). */
export type Schema = Readonly<Record<string, unknown>>;

export function object(
  title: string,
  properties: Record<string, Schema>,
  required: readonly string[] = [],
): Schema {
  return { title, type: 'object', properties, required: [...required], additionalProperties: false };
}

/** Response objects may gain fields in later versions: clients must ignore unknown ones. */
export function outObject(title: string, properties: Record<string, Schema>): Schema {
  return {
    title,
    type: 'object',
    properties,
    required: Object.keys(properties),
    additionalProperties: false,
  };
}
