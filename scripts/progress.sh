# Sourced by the scripts whose steps take minutes (a Go build): while a command runs, stderr shows that it is
# still running and for how long. On a terminal a spinner line with the elapsed time, redrawn every second;
# otherwise (CI logs, a pipe) a dot every 3 s and the elapsed time every minute, so a log never sits silent.
#
#   with_progress "building temporal CLI v1.5.1" cmd args...   runs cmd, prints "<what>: done in 6m02s", returns its status

elapsed_since() { # seconds since $1 (epoch), as 1m05s / 42s
  local s=$(($(date +%s) - $1))
  if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

with_progress() {
  local what="$1" start ticker status
  shift
  start=$(date +%s)
  (
    # sleep in the background and wait for it: the TERM below then ends the ticker at once, not after its sleep.
    nap() { sleep "$1" & naps=$!; wait "$naps"; }
    trap 'kill "$naps" 2>/dev/null; exit 0' TERM
    if [[ -t 2 ]]; then
      local frames='|/-\' i=0
      # Ends with the script too (kill -0 $$: a subshell's $$ is the script's), should the script be killed.
      while nap 1 && kill -0 $$ 2>/dev/null; do
        printf '\r%s %s: %s\033[K' "${frames:i++%4:1}" "$what" "$(elapsed_since "$start")" >&2
      done
    else
      local dots=0
      printf '%s ' "$what" >&2
      while nap 3 && kill -0 $$ 2>/dev/null; do
        printf '.' >&2
        if ((++dots % 20 == 0)); then printf ' %s\n%s ' "$(elapsed_since "$start")" "$what" >&2; fi
      done
    fi
  ) >/dev/null &
  ticker=$!
  status=0
  "$@" || status=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if [[ -t 2 ]]; then printf '\r\033[K' >&2; else printf '\n' >&2; fi
  if ((status == 0)); then echo "$what: done in $(elapsed_since "$start")" >&2; else echo "$what: FAILED (exit $status) after $(elapsed_since "$start")" >&2; fi
  return "$status"
}
