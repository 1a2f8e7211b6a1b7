#!/usr/bin/env node
// Runs before `npm start`, `npm test` and `npm run bench` (pre-scripts): when node_modules is missing or does
// not match package-lock.json, runs `npm ci` first, so both commands work on a fresh clone. Dependency-free on
// purpose: it runs before anything is installed. npm records what it installed in node_modules/.package-lock.json;
// a package of the lock file that is absent there (unless optional, e.g. another platform's build, or a dev
// dependency in production) or present at another version means the install is stale.
'use strict';
const { execFileSync } = require('node:child_process');
const { readFileSync } = require('node:fs');
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

const why = staleness();
if (why) {
  console.error(`ensure-deps: ${why}; running npm ci`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
}
