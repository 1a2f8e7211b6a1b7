// Progress for the steps of scripts/build.js that take a minute or more on a busy box (tsc, webpack), on stderr: on
// a terminal a spinner line naming the step with the elapsed time, redrawn several times a second; otherwise (CI
// logs, a pipe, the Docker build) a dot every 3 s and the elapsed time every minute, so a log never sits silent.
// The same shape as scripts/progress.sh, which the Go builds use. Dependency-free.
'use strict';

/** 65 s as "1m05s", 42 s as "42s". */
function elapsed(ms) {
  const s = Math.floor(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

/**
 * Starts showing `what` as running. `step(text)` renames what runs now; `done()` (or `failed()`) stops and prints
 * the total time. The timer is unref'd: it never keeps the process alive on its own.
 */
function progress(what, { stream = process.stderr, tty = stream.isTTY === true } = {}) {
  const start = Date.now();
  let label = what;
  let dots = 0;
  let frame = 0;
  const frames = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏';
  const line = () => `${label}: ${elapsed(Date.now() - start)}`;
  // Not a terminal: the step's name starts a line (when the first dot or the next step comes), dots follow it.
  let lineOpen = false;
  const openLine = () => {
    if (!lineOpen) stream.write(`${label} `);
    lineOpen = true;
  };
  const timer = setInterval(
    () => {
      if (tty) stream.write(`\r${frames[frame++ % frames.length]} ${line()}\x1b[K`);
      else {
        openLine();
        stream.write('.');
        if (++dots % 20 === 0) {
          stream.write(` ${elapsed(Date.now() - start)}\n`);
          lineOpen = false;
        }
      }
    },
    tty ? 250 : 3000,
  );
  timer.unref();
  const end = (how) => {
    clearInterval(timer);
    if (tty) stream.write('\r\x1b[K');
    else if (lineOpen) stream.write('\n');
    stream.write(`${what}: ${how} ${elapsed(Date.now() - start)}\n`);
  };
  return {
    step(text) {
      label = `${what}: ${text}`;
      // A line per step in a log: what runs now is said, not only dotted.
      if (!tty) {
        if (lineOpen) stream.write('\n');
        lineOpen = false;
        openLine();
      }
    },
    done: () => end('done in'),
    failed: () => end('FAILED after'),
  };
}

module.exports = { progress, elapsed };
