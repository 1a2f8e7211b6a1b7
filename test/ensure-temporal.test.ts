// scripts/ensure-temporal.sh, which finds or builds the Temporal CLI, run for real in scratch clones of the repo
// (the script and scripts/progress.sh copied into a directory with no .tools). Go itself is a stand-in on PATH that
// records its calls and takes a few seconds to "build": a real cold build takes minutes (the README's figure).
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

const SCRIPTS = path.join(__dirname, '..', 'scripts');
let tmp: string;
before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'ensure-temporal-'));
});
after(() => rm(tmp, { recursive: true, force: true }));

/** A clone: the repo's scripts/ensure-temporal.sh and scripts/progress.sh, nothing else. */
async function clone(name: string): Promise<string> {
  const repo = path.join(tmp, name);
  await mkdir(path.join(repo, 'scripts'), { recursive: true });
  for (const f of ['ensure-temporal.sh', 'progress.sh']) await copyFile(path.join(SCRIPTS, f), path.join(repo, 'scripts', f));
  return repo;
}

/** A directory with a stand-in `go` that records `go <args>` and, after `seconds`, installs a stand-in temporal into GOBIN. */
async function fakeGo(seconds: number): Promise<{ bin: string; calls: () => string[] }> {
  const bin = await mkdtemp(path.join(tmp, 'go-'));
  const log = path.join(bin, 'calls');
  await writeFile(
    path.join(bin, 'go'),
    `#!/bin/sh\necho "GOBIN=$GOBIN $*" >> "${log}"\nsleep ${seconds}\nprintf '#!/bin/sh\\necho "temporal version 1.5.1"\\n' > "$GOBIN/temporal"\nchmod +x "$GOBIN/temporal"\n`,
    { mode: 0o755 },
  );
  return { bin, calls: () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []) };
}

function run(repo: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child: ChildProcess = spawn('bash', [path.join(repo, 'scripts', 'ensure-temporal.sh')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('scripts/ensure-temporal.sh', () => {
  test('uses a temporal CLI on PATH before building one', async () => {
    const repo = await clone('on-path');
    await mkdir(path.join(repo, 'bin'));
    await writeFile(path.join(repo, 'bin', 'temporal'), '#!/bin/sh\necho "temporal version 1.5.1"\n', { mode: 0o755 });
    const out = execFileSync('bash', [path.join(repo, 'scripts', 'ensure-temporal.sh')], {
      env: { PATH: `${path.join(repo, 'bin')}:/usr/bin:/bin`, HOME: repo, SWITCHBOARD_TOOLS_CACHE: path.join(repo, 'cache') },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    assert.equal(out.trim().split('\n').at(-1), path.join(repo, 'bin', 'temporal'));
  });

  test('builds once per machine: the build shows progress and its time; another clone links to it without Go', async () => {
    const cache = path.join(tmp, 'machine-cache');
    const go = await fakeGo(7);
    const first = await clone('first');
    const built = await run(first, { PATH: `${go.bin}:/usr/bin:/bin`, HOME: first, SWITCHBOARD_TOOLS_CACHE: cache });
    assert.equal(built.code, 0, built.stderr);
    const local = path.join(first, '.tools', 'bin', 'temporal');
    const shared = path.join(cache, 'temporal-cli-v1.5.1', 'temporal');
    assert.equal(built.stdout.trim(), local);
    assert.equal(readlinkSync(local), shared, '.tools/bin/temporal links to the shared build');
    assert.deepEqual(go.calls().map((c) => c.split(' ')[0]), [`GOBIN=${path.dirname(shared)}`]);
    assert.match(go.calls()[0]!, /install -trimpath .* github\.com\/temporalio\/cli\/cmd\/temporal@v1\.5\.1$/);
    // Not a terminal here: a dot every 3 s while Go works (7 s: two at least), then the time it took.
    assert.match(built.stderr, /ensure-temporal: building temporal CLI v1\.5\.1 \.{2,}/);
    const took = Number(/ensure-temporal: building temporal CLI v1\.5\.1: done in (\d+)s/.exec(built.stderr)?.[1]);
    assert.ok(took >= 7, built.stderr);

    // Another clone on the machine, with no Go at all: the shared build, linked; nothing is built again.
    const second = await clone('second');
    const reused = await run(second, { PATH: '/usr/bin:/bin', HOME: second, SWITCHBOARD_TOOLS_CACHE: cache });
    assert.equal(reused.code, 0, reused.stderr);
    assert.equal(reused.stdout.trim(), path.join(second, '.tools', 'bin', 'temporal'));
    assert.equal(readlinkSync(path.join(second, '.tools', 'bin', 'temporal')), shared);
    assert.match(reused.stderr, /using the machine's shared build/);
    assert.equal(go.calls().length, 1);
    // TEMPORAL_CLI still comes first.
    const chosen = await run(second, { PATH: '/usr/bin:/bin', HOME: second, SWITCHBOARD_TOOLS_CACHE: cache, TEMPORAL_CLI: path.join(go.bin, 'go') });
    assert.equal(chosen.stdout.trim(), path.join(go.bin, 'go'));
  });

  test('two clones building at once: one builds, the other waits for it and reuses it', async () => {
    const cache = path.join(tmp, 'race-cache');
    const go = await fakeGo(5);
    const [a, b] = await Promise.all([clone('race-a'), clone('race-b')]);
    const env = (repo: string) => ({ PATH: `${go.bin}:/usr/bin:/bin`, HOME: repo, SWITCHBOARD_TOOLS_CACHE: cache });
    const [ra, rb] = await Promise.all([run(a, env(a)), run(b, env(b))]);
    assert.equal(ra.code, 0, ra.stderr);
    assert.equal(rb.code, 0, rb.stderr);
    assert.equal(go.calls().length, 1, `one build: ${go.calls().join('\n')}`);
    assert.match(`${ra.stderr}\n${rb.stderr}`, /another clone is building the Temporal CLI/);
    for (const repo of [a, b]) assert.equal(readlinkSync(path.join(repo, '.tools', 'bin', 'temporal')), path.join(cache, 'temporal-cli-v1.5.1', 'temporal'));
  });

  test('a shared directory that cannot be written: the build goes to the clone\'s own .tools/bin', async () => {
    const go = await fakeGo(1);
    const repo = await clone('read-only');
    const blocked = path.join(tmp, 'not-a-dir');
    await writeFile(blocked, ''); // a file where the cache directory would be
    const r = await run(repo, { PATH: `${go.bin}:/usr/bin:/bin`, HOME: repo, SWITCHBOARD_TOOLS_CACHE: blocked });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), path.join(repo, '.tools', 'bin', 'temporal'));
    assert.match(r.stderr, /building into this clone's \.tools\/bin instead/);
    assert.match(readFileSync(path.join(repo, '.tools', 'bin', 'temporal'), 'utf8'), /temporal version/);
  });
});
