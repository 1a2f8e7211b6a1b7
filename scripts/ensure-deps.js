#!/usr/bin/env node
// Runs before `npm start`, `npm test` and `npm run bench` (pre-scripts): when node_modules is missing or does
// not match package-lock.json, runs `npm ci` first, so both commands work on a fresh clone. Dependency-free on
// purpose: it runs before anything is installed. npm records what it installed in node_modules/.package-lock.json;
// a package of the lock file that is absent there (unless optional, e.g. another platform's build, or a dev
// dependency in production) or present at another version means the install is stale.
'use strict';
const { execFileSync } = require('node:child_process');
const { mkdirSync, readFileSync, rmSync, statSync } = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const production = process.env.NODE_ENV === 'production';

function read(file) {
  try {
    return JSON.parse(readFileSync(path.join(root, file), 'utf8'));
  } catch {
    return undefined;
  }
}

/** Why the installed modules do not match the lock file, or undefined when they do. */
function staleness() {
  const wanted = read('package-lock.json');
  if (!wanted) return undefined; // nothing to compare with: leave it to npm
  const installed = read('node_modules/.package-lock.json');
  if (!installed) return 'node_modules is missing';
  const have = installed.packages ?? {};
  for (const [name, want] of Object.entries(wanted.packages ?? {})) {
    if (name === '' || want.link) continue;
    const got = have[name];
    if (!got) {
      if (want.optional || (production && want.dev)) continue;
      return `${name} is not installed`;
    }
    if (got.version !== want.version) return `${name} is ${got.version}, the lock file says ${want.version}`;
  }
  return undefined;
}

/**
 * Runs `fn` holding a lock directory, so that two commands started at once on a fresh clone (`npm start` in one
 * terminal, `npm run example:agent` in another) do not run npm ci over each other: the second waits, then finds
 * the modules installed. A lock left by a killed install is taken over after 15 minutes. scripts/build.js takes
 * its own lock (`name`) the same way, held until its promise settles when `fn` is async.
 */
function locked(fn, name = '.ensure-deps.lock', doing = 'installing the dependencies') {
  const lock = path.join(root, name);
  const stale = 15 * 60_000;
  for (let said = false; ; ) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      let age = 0;
      try {
        age = Date.now() - statSync(lock).mtimeMs;
      } catch {
        continue; // released meanwhile
      }
      if (age > stale) {
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (!said) console.error(`${path.basename(process.argv[1] ?? '', '.js')}: another command is ${doing}; waiting for it`);
      said = true;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
    }
  }
  const release = () => rmSync(lock, { recursive: true, force: true });
  let result;
  try {
    result = fn();
  } catch (err) {
    release();
    throw err;
  }
  // An async `fn` (the build) holds the lock until it settles.
  if (result instanceof Promise) return result.finally(release);
  release();
  return result;
}

module.exports = { locked };

if (require.main === module && staleness()) {
  locked(() => {
    const why = staleness(); // again: whoever held the lock may have installed them
    if (!why) return;
    console.error(`ensure-deps: ${why}; running npm ci`);
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    execFileSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
  });
}
