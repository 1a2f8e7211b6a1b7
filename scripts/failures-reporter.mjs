// A node:test reporter that prints nothing until the run ends, then one block per failed test: its file, the
// suites it sits in, its name and the first lines of its error. CI shows the tail of a long TAP log; this puts
// the failures there. Used by scripts/test.sh beside the TAP reporter.
export default async function* failuresReporter(source) {
  const failures = [];
  const open = []; // names of the suites/tests started and not yet ended, by nesting level
  for await (const event of source) {
    if (event.type === 'test:start') open[event.data.nesting] = event.data.name;
    if (event.type !== 'test:fail') continue;
    const { name, nesting, file, details } = event.data;
    const error = details?.error;
    // A suite fails when a test in it fails; the test's own block already says why.
    if (error?.failureType === 'subtestsFailed') continue;
    const cause = error?.cause ?? error;
    const message = String(cause?.message ?? cause ?? 'failed').split('\n').slice(0, 12).join('\n    ');
    failures.push(`✖ ${file ?? '?'}\n  ${[...open.slice(0, nesting), name].join(' › ')}\n    ${message}\n`);
  }
  yield failures.length === 0 ? '' : `\n=== ${failures.length} failed ===\n${failures.join('\n')}`;
}
