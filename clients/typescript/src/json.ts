// Plain JSON in, plain JSON out: the guard's `args`, `result` and
// `original_result` are google.protobuf.Struct on the wire, which carries
// exactly what JSON carries. Anything else is rejected here, with the path
// of the offending value, before a request is sent: a value JSON cannot
// carry must never be sent as `{}` (the guard would record `args={}`, allow,
// and later answer a different action DUPLICATE).

import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

export type { JsonObject, JsonValue };

/**
 * A value given to the client that the client cannot send: a bad option, or
 * a value JSON cannot carry. Thrown before anything is sent.
 */
export class YesguardInputError extends TypeError {
  override name = "YesguardInputError";
}

/**
 * Checks that `value` is a plain JSON object all the way down and returns
 * it. Rejected, naming the path (`args.when`): `undefined` (also in arrays
 * and as a property), functions, symbols, bigint, NaN and ±Infinity, Dates,
 * Maps, Sets, typed arrays and Buffers, class instances (anything whose
 * prototype is not Object.prototype or null), and cycles.
 */
export function jsonObject(value: unknown, path: string): JsonObject {
  if (!isPlainObject(value)) {
    throw new YesguardInputError(`${path}: want a plain JSON object, got ${describe(value)}`);
  }
  check(value, path, new Set());
  return value as JsonObject;
}

function check(value: unknown, path: string, seen: Set<object>): void {
  switch (typeof value) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) {
        throw new YesguardInputError(`${path}: ${value} is not a JSON number`);
      }
      return;
    case "undefined":
      throw new YesguardInputError(
        `${path}: undefined is not JSON; leave the property out or use null`,
      );
    case "bigint":
      throw new YesguardInputError(
        `${path}: a bigint is not JSON; pass a number or a string (String(n))`,
      );
    case "function":
    case "symbol":
      throw new YesguardInputError(`${path}: a ${typeof value} is not JSON`);
  }
  if (value === null) {
    return;
  }
  const obj = value as object;
  if (seen.has(obj)) {
    throw new YesguardInputError(`${path}: a cycle is not JSON`);
  }
  if (Array.isArray(obj)) {
    seen.add(obj);
    for (let i = 0; i < obj.length; i++) {
      // A hole reads as undefined and is rejected as such.
      check(obj[i], `${path}[${i}]`, seen);
    }
    seen.delete(obj);
    return;
  }
  if (!isPlainObject(obj)) {
    throw new YesguardInputError(`${path}: ${describe(obj)} is not JSON${hint(obj)}`);
  }
  if (Object.getOwnPropertySymbols(obj).length > 0) {
    throw new YesguardInputError(`${path}: a symbol-keyed property is not JSON`);
  }
  seen.add(obj);
  for (const [k, v] of Object.entries(obj)) {
    check(v, `${path}.${k}`, seen);
  }
  seen.delete(obj);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return false;
  }
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v !== "object") return `a ${typeof v}`;
  const name = (v as { constructor?: { name?: string } }).constructor?.name;
  return name ? `a ${name}` : "an object with a custom prototype";
}

function hint(v: object): string {
  if (v instanceof Date) return "; pass an ISO string (date.toISOString())";
  if (v instanceof Map) return "; pass Object.fromEntries(map)";
  if (v instanceof Set) return "; pass an array ([...set])";
  if (ArrayBuffer.isView(v)) return "; pass a base64 string";
  return "; pass a plain object";
}

/**
 * Parses the canonical JSON of a decision record field (`args`, `result`).
 * Empty text is undefined; text that is not a JSON object is returned as
 * undefined too, since redaction may have replaced it: the raw text stays
 * available beside it.
 */
export function parseJsonObject(text: string): JsonObject | undefined {
  if (text === "") return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return isPlainObject(v) ? (v as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}
