# Sourced by the multi-process test scripts (bash).

# weft's shared-memory segments in /dev/shm now.
shm_segments() { ls /dev/shm | grep -c '^weft-' || true; }

# no_leftovers EXE BEFORE: after a job, no process named like EXE may run and
# /dev/shm may hold no more weft segments than BEFORE; says what is left (and
# kills it) and returns 1 otherwise.
no_leftovers() {
  local name bad=0
  sleep 0.5
  name=$(basename "$1" | cut -c1-15)  # pgrep -x matches the kernel's 15-character process name
  if pgrep -x "$name" >/dev/null; then echo "FAIL: leftover processes"; pkill -9 -x "$name"; bad=1; fi
  [ "$(shm_segments)" -le "$2" ] || { echo "FAIL: leftover shm segments: $(ls /dev/shm | grep '^weft-' | tr '\n' ' ')"; bad=1; }
  return $bad
}

# rank_pid PATTERN RANK: the pid of the process whose command line matches
# PATTERN (pgrep -f) and whose environment says WEFT_RANK=RANK; empty if none.
rank_pid() {
  local p
  for p in $(pgrep -f -- "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "WEFT_RANK=$2" && { echo "$p"; return; }
  done
}
