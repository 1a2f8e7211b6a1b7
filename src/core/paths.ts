/**
 * Where this code runs from: the TypeScript sources under tsx (`src/…`), or the compiled build (`npm run build`:
 * `dist/src/…`); this file is src/core/paths.ts. Files outside the compiled tree (scripts/, .tools/) are found from the repository root.
 */
import path from 'node:path';

/** Whether this is the compiled build (plain `node dist/src/main.js`), not the sources run by tsx. */
export const COMPILED = path.extname(__filename) === '.js';

/** The repository root: the parent of src/, or of dist/ in the compiled build. */
export const REPO_ROOT = path.resolve(__dirname, COMPILED ? '../../..' : '../..');

/** Where `npm run build` writes the compiled code and the prebuilt workflow bundles. */
export const DIST_DIR = path.join(REPO_ROOT, 'dist');
