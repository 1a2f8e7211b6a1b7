// The documents hold together: the README stays a guide (at most 250 lines), its map links every file
// of docs/, and every relative link in the README and docs/ reaches a file that exists and, with an anchor, a
// heading of that file (anchors as GitHub makes them).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.join(__dirname, '..');
const DOCS = readdirSync(path.join(ROOT, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);
const FILES = ['README.md', ...DOCS];
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/** The text outside fenced code blocks: links and headings in code are not links and headings. */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, each space a hyphen. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a file's headings (a repeated heading gets -1, -2, … as on GitHub). */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const m of prose(read(file)).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every relative link of a file: [text](target), with the target's path resolved from the file's folder. */
function linksOf(file: string): { target: string; path: string; anchor?: string }[] {
  return [...prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z]+:/i.test(target))
    .map((target) => {
      const [p, anchor] = target.split('#') as [string, string | undefined];
      return { target, path: p ? path.posix.join(path.posix.dirname(file), p) : file, anchor };
    });
}

test('the README is a guide of at most 250 lines', () => {
  const lines = read('README.md').split('\n').length;
  assert.ok(lines <= 250, `README.md has ${lines} lines`);
});

test("the README's map links every file of docs/", () => {
  const linked = new Set(linksOf('README.md').map((l) => l.path));
  for (const doc of DOCS) assert.ok(linked.has(doc), `README.md does not link ${doc}`);
});

test('every relative link reaches a file, and a heading of it', () => {
  const dead: string[] = [];
  for (const file of FILES) {
    for (const link of linksOf(file)) {
      if (!existsSync(path.join(ROOT, link.path))) dead.push(`${file}: ${link.target} (no file ${link.path})`);
      else if (link.anchor !== undefined && link.path.endsWith('.md') && !anchorsOf(link.path).has(link.anchor)) {
        dead.push(`${file}: ${link.target} (no heading #${link.anchor} in ${link.path})`);
      }
    }
  }
  assert.deepEqual(dead, []);
});
