// test/e2e-real/run.sh's early exits, checked without installing anything: fake `uname`, `id`
// and `apt-get` on PATH stand in for another architecture, root and a failing apt-get.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

const RUN_SH = join(__dirname, '..', '..', '..', 'test', 'e2e-real', 'run.sh');
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

/** Run run.sh with `bin` first on PATH; its exit status and stderr. */
function runSh(bin: string, env: Record<string, string> = {}): { status: number | null; stderr: string } {
  const result = spawnSync('bash', [RUN_SH], {
    encoding: 'utf8',
    timeout: 30_000,
    env: {
      ...process.env,
      PATH: `${bin}:${process.env.PATH ?? ''}`,
      DS4_E2E_REAL_CACHE: join(scratch, 'cache'),
      DS4_E2E_REAL_SCREENSHOTS: join(scratch, 'shots'),
      DS4_E2E_REAL_CHROMIUM: join(scratch, 'no-chromium'),
      DS4_E2E_REAL_REQUIRED: '',
      ...env,
    },
  });
  return { status: result.status, stderr: result.stderr };
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

  it('fails (1) with the reason when DS4_E2E_REAL_REQUIRED=1 turns a skip into a failure', () => {
    const { status, stderr } = runSh(fakeBin('apt', failingApt), { DS4_E2E_REAL_REQUIRED: '1' });
    assert.equal(status, 1, stderr);
    assert.match(stderr, /FAILED: the test is required here \(DS4_E2E_REAL_REQUIRED=1\) but would be skipped: apt-get could not install/);
  });
});
