// test/e2e-real/run.sh's early exits, checked without installing anything: fake `uname`, `id`
// and `apt-get` on PATH stand in for another architecture, root and a failing apt-get.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

const E2E_REAL = join(__dirname, '..', '..', '..', 'test', 'e2e-real');
const RUN_SH = join(E2E_REAL, 'run.sh');
const scratch = mkdtempSync(join(tmpdir(), 'ds4-run-sh-'));
after(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A directory of fake commands (name -> shell body), to go first on PATH. */
function fakeBin(name: string, commands: Record<string, string>): string {
  const dir = join(scratch, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const [command, body] of Object.entries(commands)) {
    const file = join(dir, command);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
  }
  return dir;
}

/**
 * A PATH holding only the commands run.sh needs before its installs (so no g++, make or
 * krb5-config), plus the fakes in `bin`.
 */
function bareBin(name: string, commands: Record<string, string>): string {
  const dir = fakeBin(name, commands);
  for (const tool of ['dirname', 'realpath', 'uname', 'cat', 'sha256sum', 'cut']) {
    const found = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    symlinkSync(found, join(dir, tool));
  }
  return dir;
}

/** Run run.sh (bash by absolute path) with `path` as PATH; its exit status and stderr. */
function runShWithPath(path: string, env: Record<string, string> = {}): { status: number | null; stderr: string } {
  const bash = spawnSync('bash', ['-c', 'command -v bash'], { encoding: 'utf8' }).stdout.trim();
  const result = spawnSync(bash, [RUN_SH], {
    encoding: 'utf8',
    timeout: 30_000,
    env: {
      ...process.env,
      PATH: path,
      DS4_E2E_REAL_CACHE: join(scratch, 'cache'),
      DS4_E2E_REAL_SCREENSHOTS: join(scratch, 'shots'),
      DS4_E2E_REAL_CHROMIUM: join(scratch, 'no-chromium'),
      DS4_E2E_REAL_REQUIRED: '',
      ...env,
    },
  });
  return { status: result.status, stderr: result.stderr };
}

/** Run run.sh with `bin` first on PATH. */
function runSh(bin: string, env: Record<string, string> = {}): { status: number | null; stderr: string } {
  return runShWithPath(`${bin}:${process.env.PATH ?? ''}`, env);
}

describe('e2e-real run.sh', () => {
  const failingApt = { id: 'echo 0', 'apt-get': 'echo "E: Unable to locate package chromium" >&2; exit 100' };

  it('skips (77) naming the cause when apt-get fails, instead of a bare exit 100', () => {
    const { status, stderr } = runSh(fakeBin('apt', failingApt));
    assert.equal(status, 77, stderr);
    assert.match(stderr, /skipped: apt-get could not install chromium/);
  });

  it('skips (77) naming the architecture on a machine that is not x86_64', () => {
    const { status, stderr } = runSh(fakeBin('arm', { ...failingApt, uname: 'echo aarch64' }));
    assert.equal(status, 77, stderr);
    assert.match(stderr, /skipped: this machine is aarch64; .* x86_64 only/);
  });

  it('asks for g++, make and libkrb5-dev only when the workbench is going to be built', () => {
    const bin = bareBin('bare', failingApt);
    const cold = runShWithPath(bin, { DS4_E2E_REAL_CACHE: join(scratch, 'cold') });
    assert.equal(cold.status, 77, cold.stderr);
    assert.match(cold.stderr, /could not install chromium g\+\+ make libkrb5-dev /);
    // A warm cache: the workbench's stamp (hash of its package.json + package-lock.json).
    const warm = join(scratch, 'warm');
    mkdirSync(join(warm, 'workbench'), { recursive: true });
    const tools = join(E2E_REAL, 'tools', 'workbench');
    const stamp = createHash('sha256')
      .update(Buffer.concat([readFileSync(join(tools, 'package.json')), readFileSync(join(tools, 'package-lock.json'))]))
      .digest('hex')
      .slice(0, 16);
    writeFileSync(join(warm, 'workbench', '.installed'), `${stamp}\n`);
    const { status, stderr } = runShWithPath(bin, { DS4_E2E_REAL_CACHE: warm });
    assert.equal(status, 77, stderr);
    assert.match(stderr, /could not install chromium \(/);
  });

  it('fails (1) with the reason when DS4_E2E_REAL_REQUIRED=1 turns a skip into a failure', () => {
    const { status, stderr } = runSh(fakeBin('apt', failingApt), { DS4_E2E_REAL_REQUIRED: '1' });
    assert.equal(status, 1, stderr);
    assert.match(stderr, /FAILED: the test is required here \(DS4_E2E_REAL_REQUIRED=1\) but would be skipped: apt-get could not install/);
  });
});
