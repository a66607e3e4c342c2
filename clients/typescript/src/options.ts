// Checks of what callers pass in. JavaScript callers have no compiler to
// catch `call_id` where `callId` is meant, and a misspelt option silently
// ignored is the trap this package exists to remove: every options object
// is checked for unknown keys, and for the type of each known one.

import { YesguardInputError } from "./json.js";

/** A key's expected type: "string", "number" (finite), "integer" (safe, >= 0), "boolean", or "any". */
export type KeyType = "string" | "number" | "integer" | "boolean" | "any";

/**
 * Throws when `input` is not an object, has a key not in `spec`, or a key
 * whose value (when not undefined) is not of its type. A snake_case key
 * whose camelCase form is known gets a hint ("use callId").
 */
export function checkKeys(
  input: unknown,
  spec: Readonly<Record<string, KeyType>>,
  where: string,
): void {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new YesguardInputError(`${where}: want an options object, got ${input === null ? "null" : typeof input}`);
  }
  for (const [key, value] of Object.entries(input)) {
    const want = spec[key];
    if (want === undefined) {
      const camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      const hint = camel !== key && camel in spec ? `; use ${camel} (the TypeScript API is camelCase, the wire is snake_case)` : "";
      throw new YesguardInputError(`${where}: unknown option ${JSON.stringify(key)}${hint}`);
    }
    if (value === undefined || want === "any") continue;
    if (!typeMatches(value, want)) {
      throw new YesguardInputError(`${where}.${key}: want ${article(want)}, got ${describeValue(value)}`);
    }
  }
}

function typeMatches(v: unknown, want: KeyType): boolean {
  switch (want) {
    case "string":
      return typeof v === "string";
    case "boolean":
      return typeof v === "boolean";
    case "number":
      return typeof v === "number" && Number.isFinite(v);
    case "integer":
      return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
    default:
      return true;
  }
}

function article(t: KeyType): string {
  return t === "integer" ? "a non-negative integer" : `a ${t}`;
}

function describeValue(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v)}`;
  return `a ${typeof v}`;
}

/** Throws unless `v` is a non-empty string. */
export function requireString(v: unknown, where: string): string {
  if (typeof v !== "string" || v === "") {
    throw new YesguardInputError(`${where}: required (a non-empty string)`);
  }
  return v;
}
