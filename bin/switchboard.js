#!/usr/bin/env node
// The `switchboard` command (package.json `bin`): runs the TypeScript CLI through tsx, as `npm start` runs the server.
'use strict';
require('tsx/cjs');
require('../src/cli/main.ts')
  .main()
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
