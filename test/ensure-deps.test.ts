// scripts/ensure-deps.js (npm's pre-script for start, test and bench) run for real on a scratch project: it runs
// `npm ci` exactly when node_modules is missing or differs from package-lock.json. A stand-in `npm` on PATH
// records the call instead of installing.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';

const dir = mkdtempSync(path.join(tmpdir(), 'ensure-deps-'));
after(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(path.join(dir, 'scripts'));
copyFileSync(path.join(__dirname, '..', 'scripts', 'ensure-deps.js'), path.join(dir, 'scripts', 'ensure-deps.js'));
const bin = path.join(dir, 'bin');
mkdirSync(bin);
const calls = path.join(dir, 'npm-calls');
writeFileSync(path.join(bin, 'npm'), `#!/bin/sh\necho "$*" >> "${calls}"\n`, { mode: 0o755 });

const lock = {
  name: 'p',
  lockfileVersion: 3,
  packages: {
    '': { name: 'p' },
    'node_modules/a': { version: '1.0.0' },
    'node_modules/b': { version: '2.0.0', dev: true },
    'node_modules/other-platform': { version: '1.0.0', optional: true },
  },
};
const installed = (packages: Record<string, { version: string }>) => {
  mkdirSync(path.join(dir, 'node_modules'), { recursive: true });
  writeFileSync(path.join(dir, 'node_modules', '.package-lock.json'), JSON.stringify({ name: 'p', lockfileVersion: 3, packages }));
};
writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(lock));

/** Runs the script; returns what it printed and whether it ran `npm ci`. */
function run(env: Record<string, string> = {}): { ranCi: boolean; stderr: string } {
  rmSync(calls, { force: true });
  let stderr = '';
  try {
    execFileSync(process.execPath, [path.join(dir, 'scripts', 'ensure-deps.js')], {
      env: { PATH: `${bin}:${process.env.PATH}`, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    stderr = String((err as { stderr?: Buffer }).stderr);
    throw new Error(stderr);
  }
  const ran = existsSync(calls) ? readFileSync(calls, 'utf8') : '';
  return { ranCi: /^ci\b/m.test(ran), stderr };
}

test('no node_modules: npm ci', () => {
  rmSync(path.join(dir, 'node_modules'), { recursive: true, force: true });
  assert.equal(run().ranCi, true);
});

test('installed as locked (another platform\'s optional build absent): nothing to do', () => {
  installed({ 'node_modules/a': { version: '1.0.0' }, 'node_modules/b': { version: '2.0.0' } });
  assert.equal(run().ranCi, false);
});

test('a package at another version, or one missing: npm ci', () => {
  installed({ 'node_modules/a': { version: '0.9.0' }, 'node_modules/b': { version: '2.0.0' } });
  assert.equal(run().ranCi, true);
  installed({ 'node_modules/b': { version: '2.0.0' } });
  assert.equal(run().ranCi, true);
});

test('production (npm ci --omit=dev, as the Dockerfile does): dev dependencies are not required', () => {
  installed({ 'node_modules/a': { version: '1.0.0' } });
  assert.equal(run({ NODE_ENV: 'production' }).ranCi, false);
  assert.equal(run().ranCi, true);
});

test('two commands started at once on a fresh clone: one runs npm ci, the other waits for it and runs none', async () => {
  rmSync(path.join(dir, 'node_modules'), { recursive: true, force: true });
  rmSync(calls, { force: true });
  // An npm that takes a second to "install" what the lock file names.
  const slowBin = path.join(dir, 'slow-bin');
  mkdirSync(slowBin, { recursive: true });
  const done = JSON.stringify({ name: 'p', lockfileVersion: 3, packages: { 'node_modules/a': { version: '1.0.0' }, 'node_modules/b': { version: '2.0.0' } } });
  writeFileSync(
    path.join(slowBin, 'npm'),
    `#!/bin/sh\necho "$*" >> "${calls}"\nsleep 1\nmkdir -p "${dir}/node_modules"\necho '${done}' > "${dir}/node_modules/.package-lock.json"\n`,
    { mode: 0o755 },
  );
  const start = () =>
    new Promise<number>((resolve) =>
      spawn(process.execPath, [path.join(dir, 'scripts', 'ensure-deps.js')], { env: { PATH: `${slowBin}:${process.env.PATH}` }, stdio: 'ignore' }).on('exit', (code) => resolve(code ?? -1)),
    );
  assert.deepEqual(await Promise.all([start(), start()]), [0, 0]);
  assert.equal(readFileSync(calls, 'utf8').split('\n').filter((l) => /^ci\b/.test(l)).length, 1, 'npm ci ran once');
  assert.equal(existsSync(path.join(dir, '.ensure-deps.lock')), false, 'the lock is released');
});
