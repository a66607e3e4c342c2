// The canonical JSON rule of docs/approvals.md in JavaScript: run it on
// the vectors with `node canonical.mjs ../canonical-vectors.json`.
// TestCanonicalVectorsInOtherLanguages runs it.
import fs from 'node:fs';
import crypto from 'node:crypto';

// Keys sort by code point, which is UTF-8 byte order (not the default
// UTF-16 code unit order of Array.prototype.sort).
const byCodePoint = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

export function canonical(v) {
  if (v === null || typeof v === 'boolean') return JSON.stringify(v);
  // Number::toString is the rule's layout; only -0 differs.
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : JSON.stringify(v);
  if (typeof v === 'string') return JSON.stringify(v).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  return '{' + Object.keys(v).sort(byCodePoint).map((k) => canonical(k) + ':' + canonical(v[k])).join(',') + '}';
}

const file = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let failed = 0;
for (const t of file.vectors) {
  const c = canonical(JSON.parse(t.input));
  const h = crypto.createHash('sha256').update(c, 'utf8').digest('hex');
  if (c !== t.canonical || h !== t.sha256) {
    failed++;
    console.log(`FAIL ${t.name}: ${c} want ${t.canonical}`);
  }
}
console.log(`${file.vectors.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
