/** Reading the TCK's pytest report (`-rA`) and comparing two runs of it. */

export interface TckResult {
  passed: Set<string>;
  /** Failed or errored tests, with pytest's one-line reason when it gave one. */
  failed: Map<string, string>;
  skipped: number;
}

/**
 * The short test summary of `pytest -rA`: `PASSED <id>`, `FAILED <id> - <reason>`, `ERROR <id> - <reason>`, and
 * `SKIPPED [n] <file>:<line>: <reason>` (skips are counted, not named: pytest names their location, not the test).
 */
export function parseTck(output: string): TckResult {
  const result: TckResult = { passed: new Set(), failed: new Map(), skipped: 0 };
  for (const raw of output.split('\n')) {
    const m = /^(PASSED|FAILED|ERROR) (tests\/\S+)(?: - (.*))?$/.exec(raw.trim());
    if (m) {
      if (m[1] === 'PASSED') result.passed.add(m[2]!);
      else result.failed.set(m[2]!, m[3] ?? '');
      continue;
    }
    const s = /^SKIPPED \[(\d+)\]/.exec(raw.trim());
    if (s) result.skipped += Number(s[1]);
  }
  return result;
}

/** The tests that fail through the gateway but not directly, and those that fail both ways. */
export function compare(direct: TckResult, through: TckResult): { onlyThrough: string[]; both: string[] } {
  const onlyThrough = [...through.failed.keys()].filter((t) => !direct.failed.has(t)).sort();
  const both = [...through.failed.keys()].filter((t) => direct.failed.has(t)).sort();
  return { onlyThrough, both };
}

/** Two runs of disjoint parts of a suite, as one run. */
export function merge(a: TckResult, b: TckResult): TckResult {
  return { passed: new Set([...a.passed, ...b.passed]), failed: new Map([...a.failed, ...b.failed]), skipped: a.skipped + b.skipped };
}
