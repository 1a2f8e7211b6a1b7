/**
 * ProtoJSON names. A2A 1.0's JSON is ProtoJSON, whose parsers must accept a field by its proto name
 * (`message_id`) as well as by its JSON name (`messageId`); SDK agents do. The RPC core renames proto names to
 * JSON names once, before the params are validated, so everything after it sees one spelling.
 */

/**
 * Fields whose value is free-form (a google.protobuf.Struct or Value): what the caller put there is data, not
 * message fields, and keeps its keys exactly.
 */
const FREE_FORM = new Set(['metadata', 'data', 'params']);

const PROTO_NAME = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/;
const jsonName = (protoName: string) => protoName.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/**
 * A copy of `value` with every proto field name (`snake_case`) renamed to its JSON name, outside free-form
 * values. When a message has a field under both names, the JSON name's value wins.
 */
export function withJsonNames(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withJsonNames);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  const renamed: [string, unknown][] = [];
  for (const [key, child] of Object.entries(value)) {
    const converted = FREE_FORM.has(key) ? child : withJsonNames(child);
    if (PROTO_NAME.test(key)) renamed.push([jsonName(key), converted]);
    else out[key] = converted;
  }
  for (const [key, child] of renamed) if (!Object.hasOwn(out, key)) out[key] = child;
  return out;
}
