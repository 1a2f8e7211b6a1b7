#!/usr/bin/env node
// `npm run build`: the compiled build `npm start`, the Docker image and `npm run bench` run with plain node.
//   1. tsc (tsconfig.build.json) compiles task/, src/, workflows/, activities/ and bench/ to dist/, laid out as the sources;
//   2. the files the code reads beside itself (SQL migrations, the console page) are copied next to it;
//   3. the workflow code is bundled once, here, instead of by webpack at every worker start: one bundle per set of
//      worker plugins Switchboard runs with (none; OpenTelemetry's, which adds its workflow interceptors), and per
//      failure converter (the SDK's; with SWITCHBOARD_PAYLOAD_KEY, src/core/temporal/failure-converter.ts's, which seals
//      failures' messages), named as src/worker/worker.ts's workflowBundleFile looks them up;
//   4. dist/.built is written last (dated when the build began), so an interrupted build is redone; all of it is
//      built in .dist-next/ and then swapped for dist/.
// `--if-stale` (npm's pre-script for start and bench, after ensure-deps.js) builds only when dist/ is missing or a
// source is newer than dist/.built. While it builds, stderr shows the step and the elapsed time (scripts/progress.js).
'use strict';
const { spawn } = require('node:child_process');
const { cpSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } = require('node:fs');
const path = require('node:path');
const { locked } = require('./ensure-deps');
const { progress } = require('./progress');

const root = path.resolve(__dirname, '..');
const dist = path.join(root, 'dist');
const stamp = path.join(dist, '.built');
/** What the build reads: a change to any of these makes dist/ stale. bench/ imports test/helpers and test/agents. */
const SOURCES = ['task', 'src', 'workflows', 'activities', 'bench', 'test/helpers', 'test/agents', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json', 'scripts/build.js', 'scripts/progress.js'];
/** Files read at run time from beside the code (src/core/db/migrate.ts, src/api/routes/console.ts). */
const ASSETS = ['src/core/db/migrations', 'src/api/console'];

const mtime = (file) => statSync(file, { throwIfNoEntry: false })?.mtimeMs;

/** The newest file under `rel` (a file or a directory), as [mtime, path]. */
function newest(rel) {
  const abs = path.join(root, rel);
  const st = statSync(abs, { throwIfNoEntry: false });
  if (!st) return [0, rel];
  if (!st.isDirectory()) return [st.mtimeMs, rel];
  let best = [0, rel];
  for (const entry of readdirSync(abs)) {
    const found = newest(path.join(rel, entry));
    if (found[0] > best[0]) best = found;
  }
  return best;
}

/** Why dist/ must be built again, or undefined when it is up to date. */
function staleness() {
  const built = mtime(stamp);
  if (built === undefined) return 'dist/ has not been built';
  for (const rel of SOURCES) {
    const [time, file] = newest(rel);
    if (time > built) return `${file} changed since the last build`;
  }
  return undefined;
}

/** tsc, without blocking this process (the progress timer runs meanwhile); its diagnostics are printed if it fails. */
function tsc(outDir) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.build.json'), '--outDir', outDir], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(Object.assign(new Error(`tsc failed (exit ${code}):\n${out}`), { output: out }))));
  });
}

async function build() {
  const started = new Date();
  const shown = progress('build');
  try {
    await buildInto(started, shown);
    shown.done();
  } catch (err) {
    shown.failed();
    throw err;
  }
}

async function buildInto(started, shown) {
  // Built beside dist/ and swapped in at the end: a process running from dist/ (a worker that restarts reads its
  // bundle again) never finds it half-written or missing, and a failed build leaves the last one in place.
  const next = path.join(root, '.dist-next');
  const old = path.join(root, '.dist-old');
  rmSync(next, { recursive: true, force: true });
  shown.step('compiling TypeScript (tsc)');
  await tsc(next);
  for (const rel of ASSETS) cpSync(path.join(root, rel), path.join(next, rel), { recursive: true });

  // Required here, not at the top: `--if-stale` with an up-to-date dist/ loads nothing.
  const { bundleWorkflowCode, DefaultLogger } = require('@temporalio/worker');
  const { OpenTelemetryPlugin } = require('@temporalio/interceptors-opentelemetry');
  const { Resource } = require('@opentelemetry/resources');
  const { NoopSpanProcessor } = require('@opentelemetry/sdk-trace-base');
  // The plugin sets main.ts gives the worker: none, or src/core/tracing-sdk.ts's when tracing is configured. A plugin
  // contributes its workflow interceptor modules to the bundle whatever its options, so placeholders do here.
  const pluginSets = [[], [new OpenTelemetryPlugin({ resource: new Resource({}), spanProcessor: new NoopSpanProcessor() })]];
  let bundle = 0;
  for (const plugins of pluginSets) {
    for (const sealedFailures of [false, true]) {
      shown.step(`bundling the workflow code (webpack), ${++bundle} of ${pluginSets.length * 2}`);
      // From the TypeScript sources, as the tests and the replay test bundle them (src/worker/worker.ts workflowBundleOptions):
      // the same code, and the inline source map points Temporal UI's workflow stack traces at workflows/*.ts.
      const { code } = await bundleWorkflowCode({
        workflowsPath: path.join(root, 'workflows'),
        preloadModules: [path.join(root, 'workflows/sandbox.ts')],
        ...(sealedFailures ? { failureConverterPath: path.join(root, 'src/core/temporal/failure-converter.ts') } : {}),
        logger: new DefaultLogger('WARN'),
        plugins,
      });
      writeFileSync(path.join(next, `workflow-bundle${plugins.map((p) => `.${p.name}`).join('')}${sealedFailures ? '.sealed-failures' : ''}.js`), code);
    }
  }
  // Dated when the build began: a source saved while it ran is newer, so the next `--if-stale` builds again.
  const nextStamp = path.join(next, path.basename(stamp));
  writeFileSync(nextStamp, `${started.toISOString()}\n`);
  utimesSync(nextStamp, started, started);
  rmSync(old, { recursive: true, force: true });
  if (statSync(dist, { throwIfNoEntry: false })) renameSync(dist, old);
  renameSync(next, dist);
  rmSync(old, { recursive: true, force: true });
}

const ifStale = process.argv.includes('--if-stale');
if (!ifStale || staleness()) {
  // One build at a time: `SWITCHBOARD_ROLE=worker npm start & SWITCHBOARD_ROLE=api npm start` on a fresh clone
  // starts two; the second waits, then finds dist/ built.
  Promise.resolve()
    .then(() =>
      locked(
        () => {
          const why = staleness(); // again: whoever held the lock may have built it
          if (ifStale && !why) return undefined;
          if (ifStale) console.error(`build: ${why}; running npm run build`);
          return build();
        },
        '.build.lock',
        'building dist/',
      ),
    )
    .catch((err) => {
      console.error(err.output ?? err);
      process.exitCode = 1;
    });
}
