/**
 * The house's shape, checked from the code itself (issue 33): the import graph has no circle, folders import each
 * other one way only, the layers point down (task/ at the bottom, src/ never reaching into activities/ or
 * workflows/ but through the worker), each runtime's folder (src/api, src/core, src/worker, src/embedded, src/cli)
 * imports only what it may, the worker's own code alone imports @temporalio/activity, the activities reach
 * nothing of the API process, src/main.ts and the tests wire a process by one createProcess, no source file over
 * 600 lines and no function over 150.
 * Reads the sources with the TypeScript compiler's parser; starts nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '..');
/** The code that ships (tests, fixtures and examples are not rooms of the house). */
const SOURCE_DIRS = ['src', 'task', 'workflows', 'activities', 'bench', 'scripts', 'bin'];
const MAX_FILE_LINES = 600;
const MAX_FUNCTION_LINES = 150;

function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ts|js|mjs)$/.test(name) && !name.endsWith('.d.ts')) out.push(relative(ROOT, path).split(sep).join('/'));
    }
  };
  for (const dir of SOURCE_DIRS) if (existsSync(join(ROOT, dir))) walk(join(ROOT, dir));
  return out.sort();
}

const FILES = sourceFiles();
const parsed = new Map(FILES.map((file) => [file, ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), ts.ScriptTarget.ES2022, true)]));

/** The project files a file imports (static imports, re-exports, require() and import() of a literal path). */
function importsOf(file: string): string[] {
  return specifiersOf(file).filter((s) => s.startsWith('.')).map((s) => resolveImport(file, s)).filter((f): f is string => f !== undefined);
}

/** Every module specifier a file names (static imports, re-exports, require() and import() of a literal path). */
function specifiersOf(file: string): string[] {
  const source = parsed.get(file)!;
  const specifiers: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      specifiers.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.arguments.length === 1 && ts.isStringLiteral(node.arguments[0])) {
      const callee = node.expression;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      const isResolve = ts.isPropertyAccessExpression(callee) && callee.getText(source) === 'require.resolve';
      if (isRequire || isResolve || callee.kind === ts.SyntaxKind.ImportKeyword) specifiers.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return specifiers;
}

function resolveImport(from: string, specifier: string): string | undefined {
  const base = join(dirname(from), specifier).split(sep).join('/');
  for (const candidate of [base, `${base}.ts`, `${base}.js`, `${base}/index.ts`, `${base}/index.js`]) if (parsed.has(candidate)) return candidate;
  return undefined;
}

const GRAPH = new Map(FILES.map((file) => [file, [...new Set(importsOf(file))]]));

/** Strongly connected components with more than one member (Tarjan), i.e. the circles of a graph. */
function circles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (v: string): void => {
    indices.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) connect(v);
  return found;
}

/**
 * A file's room: its folder in its runtime (src/api/a2a, src/core/agents, …), a runtime folder without subfolders
 * (src/worker, src/cli, src/embedded), the top folder (task, workflows, …), or itself.
 */
function roomOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] !== 'src') return parts[0];
  if (parts.length === 2) return file;
  if (parts[1] === 'api' || parts[1] === 'core') return parts.length > 3 ? `src/${parts[1]}/${parts[2]}` : file;
  return `src/${parts[1]}`;
}

/** The folders of src/, one per runtime, and what each may not import (type imports included). */
const RUNTIMES = ['api', 'core', 'worker', 'embedded', 'cli'];
const MAY_NOT: Record<string, string[]> = {
  'src/core/': ['src/api/', 'src/worker/', 'src/embedded/', 'src/cli/', 'src/main.ts', 'src/process.ts', 'activities/', 'workflows/'],
  'src/api/': ['src/worker/', 'src/embedded/', 'src/cli/', 'src/main.ts', 'src/process.ts', 'activities/'],
  'src/worker/': ['src/api/', 'src/embedded/', 'src/cli/', 'src/main.ts', 'src/process.ts'],
  'src/embedded/': ['src/api/', 'src/worker/', 'src/cli/', 'src/main.ts', 'src/process.ts', 'activities/', 'workflows/'],
  'src/cli/': ['src/api/', 'src/worker/', 'src/embedded/', 'src/main.ts', 'src/process.ts', 'activities/', 'workflows/'],
  'activities/': ['src/api/', 'src/worker/', 'src/embedded/', 'src/cli/', 'src/main.ts', 'src/process.ts'],
};

test('src/ is split by runtime: each file sits in src/api, src/core, src/worker, src/embedded or src/cli, but the start and the composition root', () => {
  const loose = FILES.filter((f) => f.startsWith('src/') && !RUNTIMES.includes(f.split('/')[1]) && !['src/main.ts', 'src/process.ts'].includes(f));
  assert.deepEqual(loose, []);
});

test('each runtime imports only what it may: the core nothing of the API or the worker, the API nothing of the worker', () => {
  const wrong: string[] = [];
  for (const [file, targets] of GRAPH) {
    const rule = Object.entries(MAY_NOT).find(([from]) => file.startsWith(from));
    if (!rule) continue;
    for (const target of targets) if (rule[1].some((p) => (p.endsWith('/') ? target.startsWith(p) : target === p))) wrong.push(`${file} → ${target}`);
  }
  assert.deepEqual(wrong, []);
});

test('no import circle between files (type-only imports count: they are arrows a reader follows too)', () => {
  assert.deepEqual(circles(GRAPH), []);
});

test('rooms import each other one way only: no circle between folders', () => {
  const rooms = new Map<string, string[]>();
  for (const [file, targets] of GRAPH) {
    const from = roomOf(file);
    const list = rooms.get(from) ?? [];
    for (const target of targets) if (roomOf(target) !== from && !list.includes(roomOf(target))) list.push(roomOf(target));
    rooms.set(from, list);
  }
  assert.deepEqual(circles(rooms), []);
});

test('the layers point down: task/ imports nothing of the project; src/ reaches workflows/ and activities/ only through the worker', () => {
  const wrong: string[] = [];
  for (const [file, targets] of GRAPH) {
    for (const target of targets) {
      if (file.startsWith('task/') && !target.startsWith('task/')) wrong.push(`${file} → ${target}`);
      const intoWorkerSide = target.startsWith('workflows/') || target.startsWith('activities/');
      if (file.startsWith('src/') && intoWorkerSide && !file.startsWith('src/worker/')) wrong.push(`${file} → ${target}`);
      if (file.startsWith('workflows/') && target.startsWith('src/') && !typeOnly(file, target)) wrong.push(`${file} → ${target} (workflows import types only)`);
    }
  }
  assert.deepEqual(wrong, []);
});

/** Whether every import of `target` in `file` is `import type`. */
function typeOnly(file: string, target: string): boolean {
  const source = parsed.get(file)!;
  return source.statements.every((s) => {
    if (!ts.isImportDeclaration(s) || !ts.isStringLiteral(s.moduleSpecifier)) return true;
    if (resolveImport(file, s.moduleSpecifier.text) !== target) return true;
    const clause = s.importClause;
    if (!clause) return false;
    if (clause.isTypeOnly) return true;
    const named = clause.namedBindings;
    return clause.name === undefined && named !== undefined && ts.isNamedImports(named) && named.elements.every((e) => e.isTypeOnly);
  });
}

/**
 * The API process alone (src/api/: HTTP, gRPC, the hub's sockets, MCP, the console), the CLI, the embedded servers
 * and the process's own start and composition. The worker runs none of it.
 */
const API_PROCESS = ['src/api/', 'src/cli/', 'src/embedded/', 'src/main.ts', 'src/process.ts'];
/** The worker's own code: the activities and the worker's start (the workflows run in their sandbox). */
const WORKER_OWN = (file: string) => file.startsWith('activities/') || file.startsWith('src/worker/');

test('@temporalio/activity is imported by the worker’s own code only (activities/, src/worker/)', () => {
  const wrong = FILES.filter((file) => !WORKER_OWN(file) && specifiersOf(file).includes('@temporalio/activity'));
  assert.deepEqual(wrong, []);
});

test('the activities reach nothing of the API process, not even through the core', () => {
  const wrong: string[] = [];
  for (const start of FILES.filter((f) => f.startsWith('activities/'))) {
    const seen = new Set([start]);
    const path = new Map<string, string>([[start, start]]);
    const todo = [start];
    while (todo.length > 0) {
      const file = todo.pop()!;
      for (const target of GRAPH.get(file) ?? []) {
        if (seen.has(target)) continue;
        seen.add(target);
        path.set(target, `${path.get(file)} → ${target}`);
        if (API_PROCESS.some((p) => target === p || (p.endsWith('/') && target.startsWith(p)))) wrong.push(path.get(target)!);
        else todo.push(target);
      }
    }
  }
  assert.deepEqual([...new Set(wrong)], []);
});

test('one composition root: src/main.ts and the tests\' startGateway wire a process by createProcess alone', () => {
  const wiring = /\b(buildApp|buildWorkerApp|createWorker|createHubWorker|superviseWorker|createActivities)\(/;
  for (const file of ['src/main.ts', 'test/helpers/harness.ts']) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    assert.match(text, /\bcreateProcess\(/, `${file} calls createProcess`);
    assert.doesNotMatch(text, wiring, `${file} wires a part itself`);
  }
});

test(`no source file over ${MAX_FILE_LINES} lines`, () => {
  const long = FILES.map((file) => ({ file, lines: parsed.get(file)!.getLineAndCharacterOfPosition(parsed.get(file)!.end).line + 1 }))
    .filter((f) => f.lines > MAX_FILE_LINES)
    .map((f) => `${f.file}: ${f.lines}`);
  assert.deepEqual(long, []);
});

test(`no function over ${MAX_FUNCTION_LINES} lines`, () => {
  const long: string[] = [];
  for (const [file, source] of parsed) {
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.end).line;
        if (end - start + 1 > MAX_FUNCTION_LINES) long.push(`${file}:${start + 1} ${nameOf(node, source)} (${end - start + 1} lines)`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  assert.deepEqual(long, []);
});

function nameOf(node: ts.Node, source: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name) return named.name.getText(source);
  if (ts.isVariableDeclaration(node.parent)) return node.parent.name.getText(source);
  if (ts.isPropertyAssignment(node.parent)) return node.parent.name.getText(source);
  return '(anonymous)';
}
