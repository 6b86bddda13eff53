// A deliberately small JSON Schema checker: the subset the Messages API accepts for structured output
// (type, properties, required, additionalProperties, items, enum, const, anyOf, min/max items/length).
// It exists so the scripted model server can refuse a scripted reply that a real model could not produce.

export interface SchemaViolation {
  path: string;
  message: string;
}

type Schema = Record<string, unknown>;

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(value: unknown, type: string): boolean {
  const actual = typeOf(value);
  if (type === 'number') return actual === 'number' || actual === 'integer';
  return actual === type;
}

export function validateJsonSchema(value: unknown, schema: unknown, path = '$'): SchemaViolation[] {
  if (schema === true || schema === undefined) return [];
  if (schema === false) return [{ path, message: 'no value is allowed here' }];
  if (typeof schema !== 'object' || schema === null) return [];
  const s = schema as Schema;
  const out: SchemaViolation[] = [];

  if (Array.isArray(s.anyOf)) {
    const ok = s.anyOf.some((sub) => validateJsonSchema(value, sub, path).length === 0);
    if (!ok) out.push({ path, message: 'matches none of anyOf' });
  }
  if ('const' in s && JSON.stringify(s.const) !== JSON.stringify(value)) {
    out.push({ path, message: `expected const ${JSON.stringify(s.const)}` });
  }
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    out.push({ path, message: `expected one of ${JSON.stringify(s.enum)}` });
  }
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (!types.some((t) => matchesType(value, t))) {
      out.push({ path, message: `expected ${types.join('|')}, got ${typeOf(value)}` });
      return out;
    }
  }
  if (typeOf(value) === 'object') {
    const obj = value as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, unknown>;
    for (const key of (s.required as string[] | undefined) ?? []) {
      if (!(key in obj)) out.push({ path: `${path}.${key}`, message: 'is required' });
    }
    for (const [key, v] of Object.entries(obj)) {
      if (key in props) out.push(...validateJsonSchema(v, props[key], `${path}.${key}`));
      else if (s.additionalProperties === false)
        out.push({ path: `${path}.${key}`, message: 'is not allowed (additionalProperties: false)' });
      else if (typeof s.additionalProperties === 'object')
        out.push(...validateJsonSchema(v, s.additionalProperties, `${path}.${key}`));
    }
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === 'number' && value.length < s.minItems)
      out.push({ path, message: `expected at least ${s.minItems} items` });
    if (typeof s.maxItems === 'number' && value.length > s.maxItems)
      out.push({ path, message: `expected at most ${s.maxItems} items` });
    if (s.items !== undefined)
      for (const [i, v] of value.entries()) out.push(...validateJsonSchema(v, s.items, `${path}[${i}]`));
  }
  if (typeof value === 'string') {
    if (typeof s.minLength === 'number' && value.length < s.minLength)
      out.push({ path, message: `expected length ≥ ${s.minLength}` });
    if (typeof s.maxLength === 'number' && value.length > s.maxLength)
      out.push({ path, message: `expected length ≤ ${s.maxLength}` });
  }
  return out;
}
