# Sourced by the benchmark scripts: waiting for a quiet machine before each measurement.
# Figures taken while someone compiles are worthless on 2 cores. BUSY_MAX (percent, default
# 20) and WAIT_MAX (seconds, default 600) bound the wait.
BUSY_MAX="${BUSY_MAX:-20}"
WAIT_MAX="${WAIT_MAX:-600}"

busy_percent() {  # CPU use of the whole machine over 2 s, percent
  local a b
  a=($(head -1 /proc/stat)); sleep 2; b=($(head -1 /proc/stat))
  local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}

wait_quiet() {  # prints "# busy=…% waited=…s load=… time" once the machine is quiet
  local waited=0 busy
  while true; do
    busy=$(busy_percent)
    if (( busy <= BUSY_MAX )) || (( waited >= WAIT_MAX )); then break; fi
    sleep 5; waited=$(( waited + 7 ))
  done
  echo "# busy=${busy}% waited=${waited}s load=$(cut -d' ' -f1-3 /proc/loadavg) $(date +%T)"
}
