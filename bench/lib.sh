# Helpers the bench scripts share (bench/nodes/run, bench/terminal/run): sourced, not run.
#
# Before sourcing, set BENCH_NAME (the log prefix, "nodes") and ROOT (the repository).
# Sourcing sets OUT (bench/out), MiB, GiB, SUDO, and a trap that stops every pid in PIDS
# and removes WORK on exit.

OUT=$ROOT/bench/out
MiB=$((1024 * 1024))
GiB=$((1024 * MiB))
# A bench measures one person's requests as fast as they come; the per-person rates
# (`[limits] *_per_minute`) would have it measure refusals, so its gateways count none.
export FERRY_LIMITS__UPLOADS_PER_MINUTE=0 FERRY_LIMITS__DELIVERIES_PER_MINUTE=0 \
  FERRY_LIMITS__TOOL_CALLS_PER_MINUTE=0

log() { printf '[bench %s %s] %s\n' "$BENCH_NAME" "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- tools
SUDO=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || die "not root and no sudo: this bench runs sshd for root's key"
  SUDO=(sudo)
fi
SSHD=/usr/sbin/sshd

# install_missing CHECK=PACKAGE...: installs each PACKAGE whose CHECK is missing, from
# Debian's packages. CHECK is a command, an absolute path that must be executable, or
# py:MODULE, a module python3 must import.
install_missing() {
  local missing=() pair check
  for pair in "$@"; do
    check=${pair%%=*}
    case $check in
      /*) [[ -x $check ]] && continue ;;
      py:*) python3 -c "import ${check#py:}" 2>/dev/null && continue ;;
      *) command -v "$check" >/dev/null && continue ;;
    esac
    missing+=("${pair#*=}")
  done
  [[ ${#missing[@]} == 0 ]] && return
  log "installing ${missing[*]}"
  # Keep the packages from starting a system sshd or nginx while they install.
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 755 "$policy"
    added_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    "${SUDO[@]}" apt-get update >/dev/null
    "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
  fi
  [[ $added_policy == 1 ]] && "${SUDO[@]}" rm -f "$policy"
  return 0
}

# build_ferry: builds ferry in release (or takes BENCH_FERRY=PATH, for before/after runs),
# makes the run's folder WORK=bench/out/$BENCH_NAME.XXXXXX and copies the binary into it as
# FERRY, so a rebuild during the run changes nothing. Sets FERRY_COMMIT.
build_ferry() {
  local built=${BENCH_FERRY:-$ROOT/target/release/ferry}
  if [[ -z ${BENCH_FERRY:-} ]]; then
    log "building ferry (release)"
    (cd "$ROOT" && cargo build --release -q -p ferry-cli)
  fi
  [[ -x $built ]] || die "no ferry at $built"
  mkdir -p "$OUT"
  WORK=$(realpath "$(mktemp -d "$OUT/$BENCH_NAME.XXXXXX")")
  mkdir "$WORK/bin"; cp "$built" "$WORK/bin/ferry"
  FERRY=$WORK/bin/ferry
  FERRY_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  [[ -z ${BENCH_FERRY:-} ]] || FERRY_COMMIT="$BENCH_FERRY (given)"
}

# ---------------------------------------------------------------- cleanup
PIDS=()
MADE_RUN_SSHD=0
WORK=
bench_cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  [[ $MADE_RUN_SSHD == 1 ]] && rmdir /run/sshd 2>/dev/null
  [[ -z $WORK ]] || rm -rf "$WORK"
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

forget_pid() {
  local keep=() pid
  for pid in "${PIDS[@]}"; do [[ $pid == "$1" ]] || keep+=("$pid"); done
  PIDS=("${keep[@]}")
}
stop_pid() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  forget_pid "$1"
}

# ---------------------------------------------------------------- numbers
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now_ns() { date +%s%N; }
# Median of the numbers on stdin (one per line).
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a/b; else print "n/a"}'; }
mbps() { awk -v bytes="$1" -v s="$2" 'BEGIN {printf "%.0f", bytes/1e6/s}'; }
secs() { awk -v ns="$1" 'BEGIN {printf "%.4f\n", ns/1e9}'; }
kib_to_mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k/1024}'; }
# json_get KEY... <JSON: the value at that path of the JSON on stdin.
json_get() { python3 -c 'import json,sys; v=json.load(sys.stdin); [v := v[k] for k in sys.argv[1:]]; print(v)' "$@"; }
# Share of both cores busy over 2 s, from /proc/stat, in percent.
cpu_busy_pct() {
  local a b
  a=($(awk '/^cpu / {print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)); sleep 2
  b=($(awk '/^cpu / {print $2+$3+$4+$7+$8, $5+$6}' /proc/stat))
  awk -v bu=$((b[0] - a[0])) -v id=$((b[1] - a[1])) 'BEGIN {printf "%.0f", 100*bu/(bu+id)}'
}
# CPU seconds (user + system) a process has used so far.
CLK_TCK=$(getconf CLK_TCK)
cpu_secs() { awk -v hz="$CLK_TCK" '{printf "%.2f\n", ($14 + $15) / hz}' "/proc/$1/stat"; }
cpu_delta() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f\n", b - a}'; }
# Peak resident memory: reset (clear_refs 5), then read after the measure, in KiB.
reset_peak() { local p; for p in "$@"; do echo 5 >"/proc/$p/clear_refs"; done; }
peak_kib() { awk '$1 == "VmHWM:" {print $2}' "/proc/$1/status"; }
# Flush earlier writes so they do not land in the next timed run; warm the sources.
settle() { sync; cat "$@" >/dev/null; }
# verdict VALUE TARGET >=|<=: "met", "**missed**", or "?" when VALUE is n/a.
verdict() { awk -v v="$1" -v t="$2" -v dir="$3" 'BEGIN {if (v == "n/a") print "?"; else if ((dir == ">=" && v >= t) || (dir == "<=" && v <= t)) print "met"; else print "**missed**"}'; }

# ---------------------------------------------------------------- sshd
# start_sshd: its own sshd for root on a free loopback port, with a host key and a client
# key made for the run (key authentication only). Sets SSH_PORT, SSH_OPTS (ssh's options
# for the client key), SSH_CIPHER and SSH_VERSION.
start_sshd() {
  SSH_DIR=$WORK/ssh
  mkdir -p "$SSH_DIR"
  ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/client_key"
  cp "$SSH_DIR/client_key.pub" "$SSH_DIR/authorized_keys"
  SSH_PORT=$(free_port)
  local sftp_server=/usr/lib/openssh/sftp-server
  [[ -x $sftp_server ]] || sftp_server=internal-sftp
  cat >"$SSH_DIR/sshd_config" <<EOF
ListenAddress 127.0.0.1
HostKey $SSH_DIR/host_key
PidFile $SSH_DIR/sshd.pid
AuthorizedKeysFile $SSH_DIR/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp $sftp_server
EOF
  if [[ ! -d /run/sshd ]]; then mkdir -m 755 /run/sshd; MADE_RUN_SSHD=1; fi
  "$SSHD" -D -e -f "$SSH_DIR/sshd_config" -p "$SSH_PORT" 2>"$SSH_DIR/sshd.log" &
  PIDS+=($!)
  SSH_OPTS=(-i "$SSH_DIR/client_key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes)
  for _ in $(seq 1 100); do
    ssh "${SSH_OPTS[@]}" -p "$SSH_PORT" root@127.0.0.1 true 2>/dev/null && break
    sleep 0.1
  done
  ssh "${SSH_OPTS[@]}" -p "$SSH_PORT" root@127.0.0.1 true || die "sshd does not let the key in: $(cat "$SSH_DIR/sshd.log")"
  SSH_CIPHER=$(ssh -v "${SSH_OPTS[@]}" -o LogLevel=DEBUG1 -p "$SSH_PORT" root@127.0.0.1 true 2>&1 \
    | sed -n 's/.*kex: server->client cipher: \([^ ]*\) MAC: \([^ ]*\).*/\1 (MAC \2)/p' | head -n1)
  SSH_VERSION=$(ssh -V 2>&1)
}

# ---------------------------------------------------------------- ferry: gateway and node
# start_gateway: `ferry serve --data $DATA` on 127.0.0.1:$GW_PORT, output appended to
# $WORK/gateway.out and .err; waits until it answers. Sets GW_PID.
start_gateway() {
  RUST_LOG=warn "$FERRY" serve --data "$DATA" --listen "127.0.0.1:$GW_PORT" \
    >>"$WORK/gateway.out" 2>>"$WORK/gateway.err" &
  GW_PID=$!
  PIDS+=("$GW_PID")
  for _ in $(seq 1 200); do
    curl -s -o /dev/null "http://127.0.0.1:$GW_PORT/" && return
    kill -0 "$GW_PID" 2>/dev/null || die "ferry serve exited: $(cat "$WORK/gateway.err")"
    sleep 0.05
  done
  die "ferry serve does not answer on $GW_PORT"
}
# node_field NAME KEY: KEY of the node named NAME in `ferry node list`, empty if none.
node_field() {
  "$FERRY" node list --data "$DATA" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    node = json.loads(line)
    if node.get("name") == sys.argv[1]:
        print(node.get(sys.argv[2], ""))' "$@" || true
}
wait_node() { # NAME KEY VALUE: until the node's KEY is VALUE, at most 60 s; NODE_PID is its
  local i
  for i in $(seq 1 600); do
    [[ $(node_field "$1" "$2") == "$3" ]] && return
    kill -0 "$NODE_PID" 2>/dev/null || die "ferry node run exited: $(cat "$WORK/node-$1.err")"
    sleep 0.1
  done
  die "node $1 never had $2 = $3: $(cat "$WORK/node-$1.err")"
}
# start_node NAME ARG...: `ferry node run` against the gateway, with the state in
# $WORK/node-NAME, an empty HOME of its own in $WORK/node-NAME-home (a terminal's shell
# starts without the machine's dotfiles, which may be slow or hold locks), and output in
# $WORK/node-NAME.out and .err; waits until it shows pending and approves it with
# `ferry node approve`. Sets NODE_PID and NODE_ID.
start_node() {
  local name=$1
  shift
  mkdir -p "$WORK/node-$name-home"
  HOME="$WORK/node-$name-home" RUST_LOG=warn "$FERRY" node run --gateway "ws://127.0.0.1:$GW_PORT" --name "$name" \
    --state "$WORK/node-$name" "$@" >"$WORK/node-$name.out" 2>"$WORK/node-$name.err" &
  NODE_PID=$!
  PIDS+=("$NODE_PID")
  for _ in $(seq 1 300); do
    [[ -n $(node_field "$name" id) ]] && break
    sleep 0.1
  done
  NODE_ID=$(node_field "$name" id)
  [[ -n $NODE_ID ]] || die "the node never showed in ferry node list: $(cat "$WORK/node-$name.err")"
  "$FERRY" node approve "$NODE_ID" --data "$DATA" >/dev/null
}
