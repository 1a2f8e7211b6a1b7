// Lint rules the house follows, enforced: above all, workflow code stays deterministic. workflows/ runs in
// Temporal's sandbox and is replayed; it may import only @temporalio/workflow, its siblings, and *types* from
// the rest of the code (reference/style-anchors.md §8, as the Temporal samples do).
import tseslint from 'typescript-eslint';
import { importX } from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const NODE_BUILTINS = [
  'assert', 'buffer', 'child_process', 'cluster', 'crypto', 'dgram', 'dns', 'events', 'fs', 'fs/promises', 'http', 'http2', 'https',
  'net', 'os', 'path', 'perf_hooks', 'process', 'readline', 'stream', 'timers', 'tls', 'url', 'util', 'v8', 'vm', 'worker_threads', 'zlib',
];

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'dist/**', '.dist-next/**', '.dist-old/**', 'coverage/**'] },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser, parserOptions: { ecmaVersion: 2022, sourceType: 'module' } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      // Errors are Error objects, so they keep a stack and a cause.
      'no-throw-literal': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-var': 'error',
      'prefer-const': 'error',
    },
  },
  {
    // Rules that need the type checker: a promise nobody awaits loses its error (and, in an activity, its retry);
    // `any` switches the checker off where a reader most needs it. Tests may use `any` on decoded wire bodies.
    files: ['task/**/*.ts', 'src/**/*.ts', 'workflows/**/*.ts', 'activities/**/*.ts', 'bench/**/*.ts', 'test/**/*.ts', 'examples/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': ['error', {
        // node:test's test()/describe() return promises the runner itself awaits.
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }],
      }],
    },
  },
  {
    files: ['task/**/*.ts', 'src/**/*.ts', 'workflows/**/*.ts', 'activities/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'error' },
  },
  {
    // No import circle (test/house.test.ts checks the same with the folders too).
    files: ['task/**/*.ts', 'src/**/*.ts', 'workflows/**/*.ts', 'activities/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [createTypeScriptImportResolver()],
      // Without these the plugin reads only .js files and so finds no cycle in TypeScript.
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: { 'import-x/no-cycle': 'error' },
  },
  {
    // The neutral task layer: everything imports it, it imports nothing of the project (workflows run it too).
    files: ['task/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: [{ group: ['../src', '../src/*', '../src/**', '../workflows', '../workflows/*', '../activities', '../activities/*', '../activities/**'], message: 'task/ is the bottom layer: it imports nothing of src/, workflows/ or activities/' }] },
      ],
    },
  },
  // The runtimes, one folder each (docs/architecture.md, "The map"): src/api/ the API process (HTTP, gRPC, WebSocket,
  // MCP, the console), src/core/ what the API and the activities share (domain and storage: no server, no Temporal
  // worker APIs), src/worker/ and activities/ the worker, src/embedded/ the embedded Temporal and PostgreSQL that
  // `npm start` runs beside them, src/cli/ the command line (a client of the HTTP API). The arrows point down only.
  ...runtimeRule(['src/core/**/*.ts'], 'src/core/ is shared by the API and the activities: it imports nothing of the API, the worker, the embedded servers or the CLI', ['api', 'worker', 'embedded', 'cli'], ['activities', 'workflows'], ['fastify', '@fastify/*', '@temporalio/worker', '@temporalio/activity', 'ws']),
  ...runtimeRule(['activities/**/*.ts'], 'activities run in the worker: they import src/core/ and task/, nothing of the API process', ['api', 'worker', 'embedded', 'cli'], [], ['fastify', '@fastify/*', '@temporalio/worker', 'ws']),
  ...runtimeRule(['src/api/**/*.ts'], 'src/api/ is the API process: it reaches the worker only through Temporal', ['worker', 'embedded', 'cli'], ['activities'], ['@temporalio/worker', '@temporalio/activity']),
  ...runtimeRule(['src/worker/**/*.ts'], 'src/worker/ runs the workflows and activities: nothing of the API process', ['api', 'embedded', 'cli'], [], ['fastify', '@fastify/*']),
  ...runtimeRule(['src/embedded/**/*.ts'], 'src/embedded/ starts the embedded servers: nothing of the API or the worker', ['api', 'worker', 'cli'], ['activities', 'workflows'], ['fastify', '@fastify/*']),
  ...runtimeRule(['src/cli/**/*.ts'], 'the CLI is a client of the HTTP API: it shares types and task/, not the processes', ['api', 'worker', 'embedded'], ['activities', 'workflows'], ['fastify', '@fastify/*', '@temporalio/worker', '@temporalio/activity', 'pg']),
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            ...NODE_BUILTINS.flatMap((name) => [name, `node:${name}`]).map((name) => ({ name, message: 'workflow code is replayed in a sandbox: no Node built-ins (do I/O in an activity)' })),
            ...['pg', 'zod', 'fastify', 'undici', 'pino', '@temporalio/client', '@temporalio/worker', '@temporalio/activity', '@a2a-js/sdk'].map((name) => ({
              name,
              message: 'workflow code imports only @temporalio/workflow (and types from elsewhere)',
              allowTypeImports: true,
            })),
          ],
          patterns: [
            { group: ['../src/*', '../src/**', '../activities', '../activities/*'], message: 'workflows import types only from src/ and activities/', allowTypeImports: true },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'no process in workflow code' },
        { name: 'require', message: 'no require in workflow code' },
        { name: '__dirname', message: 'no file system in workflow code' },
        { name: 'fetch', message: 'no I/O in workflow code: call an activity' },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "ThrowStatement > NewExpression[callee.name='Error']", message: 'throw ApplicationFailure in workflows (a plain Error fails the workflow task and retries it forever)' },
      ],
    },
  },
);

/**
 * One runtime's import rule: none of the named src/ folders, top folders or packages (each at any depth of
 * relative path).
 */
function runtimeRule(files, message, srcFolders, topFolders, packages) {
  const up = ['..', '../..', '../../..', '../../../..'];
  const group = [
    ...srcFolders.flatMap((f) => up.flatMap((u) => [`${u}/${f}`, `${u}/${f}/*`, `${u}/${f}/**`, `${u}/src/${f}`, `${u}/src/${f}/*`, `${u}/src/${f}/**`])),
    ...topFolders.flatMap((f) => up.flatMap((u) => [`${u}/${f}`, `${u}/${f}/*`, `${u}/${f}/**`])),
  ];
  return [{
    files,
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group, message }, ...(packages.length ? [{ group: packages, message }] : [])] }],
    },
  }];
}
