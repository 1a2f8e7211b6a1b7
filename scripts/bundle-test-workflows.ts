/**
 * Bundles the task workflows once for a whole test run (scripts/test.sh): both kinds, plain and with the sealed
 * failure converter, into the folder given, as `plain.js` and `sealed.js`. Every test file would otherwise bundle
 * the same sources again (a few seconds of CPU each, 80-odd times); test/helpers/harness.ts reads these instead when
 * SWITCHBOARD_TEST_WORKFLOW_BUNDLES names the folder.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, bundleWorkflowCode } from '@temporalio/worker';
import { workflowBundleOptions } from '../src/worker/worker';

async function main(dir: string): Promise<void> {
  for (const sealed of [false, true]) {
    const { code } = await bundleWorkflowCode({ ...workflowBundleOptions(undefined, sealed), logger: new DefaultLogger('WARN') });
    writeFileSync(path.join(dir, sealed ? 'sealed.js' : 'plain.js'), code);
  }
}

main(process.argv[2] ?? '.').catch((err) => {
  console.error(err);
  process.exit(1);
});
