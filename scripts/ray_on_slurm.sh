#!/usr/bin/env bash
# ray_on_slurm.sh - a Ray cluster over the nodes of the current SLURM allocation, for one command.
#
# Inside an sbatch script or salloc (any number of nodes):
#   scripts/ray_on_slurm.sh -- python scripts/data_gen/car_racing/parallel_rollout_main.py \
#       --num_rollouts=1000 --parallelism=64 --out_dir=/scratch/me/raw
# starts a Ray head on the first node and one Ray worker per other node (with srun), waits
# until every node has joined, runs the command with --ray_address=<head>:<port> appended and
# RAY_ADDRESS (and the cluster's auth token) exported, then stops Ray (its srun steps) when the command ends or the job is
# cancelled. Exits with the command's exit code. Submit it e.g. as
#   sbatch --nodes=4 --cpus-per-task=16 --mem=64G --time=8:00:00 \
#       --wrap "scripts/ray_on_slurm.sh -- python scripts/...py --flag=value"
# or with the launcher: scripts/launch.py --nodes=4 --cpus=16 --ray -- scripts/...py ...
set -euo pipefail

PROG=$(basename "$0")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PORT=${RL755_RAY_PORT:-}
ADDRESS_FLAG=ray_address
NUM_CPUS=${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-}}
NUM_GPUS=""
OBJECT_STORE=""
TIMEOUT=180
RAY_BIN=${RAY_BIN:-$(command -v ray || echo "$HERE/../.venv/bin/ray")}

usage() {
  cat <<USAGE
Usage: $PROG [options] -- command [args...]

Options (also --name=value):
  --port N                 head port (default: 6379 + SLURM_JOB_ID % 1000, so jobs sharing a
                           node do not collide)
  --num_cpus N             CPUs Ray uses per node (default: SLURM_CPUS_PER_TASK / _ON_NODE)
  --num_gpus N             GPUs per node (default: the count in CUDA_VISIBLE_DEVICES)
  --object_store_memory B  bytes of Ray object store per node (default: Ray's)
  --address_flag NAME      flag appended to the command (default: ray_address; "" = none,
                           the command then reads RAY_ADDRESS)
  --timeout S              seconds to wait for the cluster (default: $TIMEOUT)
  -h, --help               this help
Environment: RAY_BIN (default: ray on PATH, else the repo's .venv/bin/ray).
USAGE
}
die() { echo "$PROG: $*" >&2; exit 2; }
log() { echo "[$PROG $(date -u +%T)] $*" >&2; }

CMD=()
while [ $# -gt 0 ]; do
  arg=$1; shift
  if [[ $arg == --*=* ]]; then val=${arg#*=}; arg=${arg%%=*}
  elif [[ $arg == --port || $arg == --num_cpus || $arg == --num_gpus || $arg == --object_store_memory || $arg == --address_flag || $arg == --timeout ]]; then
    [ $# -gt 0 ] || die "option $arg needs a value"; val=$1; shift
  fi
  case $arg in
    -h|--help) usage; exit 0 ;;
    --port) PORT=$val ;;
    --num_cpus) NUM_CPUS=$val ;;
    --num_gpus) NUM_GPUS=$val ;;
    --object_store_memory) OBJECT_STORE=$val ;;
    --address_flag) ADDRESS_FLAG=$val ;;
    --timeout) TIMEOUT=$val ;;
    --) CMD=("$@"); break ;;
    *) die "unknown option $arg (run $PROG --help)" ;;
  esac
done
[ ${#CMD[@]} -gt 0 ] || die "give the command to run after --"
[ -n "${SLURM_JOB_ID:-}" ] || die "not inside a SLURM allocation: run it in an sbatch script or salloc"
[ -x "$RAY_BIN" ] || die "ray not found (RAY_BIN=$RAY_BIN): activate the venv or set RAY_BIN"
PYTHON=$(dirname "$RAY_BIN")/python
PORT=${PORT:-$((6379 + SLURM_JOB_ID % 1000))}
if [ -z "$NUM_GPUS" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then NUM_GPUS=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .); else NUM_GPUS=0; fi
fi

mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD=${NODES[0]}
N=${#NODES[@]}
# first address of `hostname -I` (not the 127.0.x.1 that `hostname --ip-address` may give)
HEAD_IP=$(srun --overlap --nodes=1 --ntasks=1 -w "$HEAD" bash -c 'hostname -I 2>/dev/null || hostname --ip-address' | awk '{print $1}')
[ -n "$HEAD_IP" ] || die "could not find the IP address of $HEAD"
ADDR="$HEAD_IP:$PORT"
TMP="/tmp/ray-$SLURM_JOB_ID"   # short: Ray's socket paths must stay under 108 characters
RES=(--num-gpus="$NUM_GPUS")
[ -n "$NUM_CPUS" ] && RES+=(--num-cpus="$NUM_CPUS")
[ -n "$OBJECT_STORE" ] && RES+=(--object-store-memory="$OBJECT_STORE")

# Ray >= 2.59 authenticates with a token: one fresh secret per job, handed to every node and
# to the command through the environment (srun exports it; only this user can read it).
export RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')
export RAY_AUTH_TOKEN
export RAY_USAGE_STATS_ENABLED=${RAY_USAGE_STATS_ENABLED:-0}

PIDS=()
cleanup() {
  trap - EXIT TERM INT
  if [ ${#PIDS[@]} -gt 0 ]; then
    log "stopping Ray (srun steps ${PIDS[*]})"
    kill -TERM "${PIDS[@]}" 2>/dev/null || true
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

log "starting Ray head on $HEAD ($ADDR), $N node(s), cpus/node=${NUM_CPUS:-auto} gpus/node=$NUM_GPUS"
srun --overlap --nodes=1 --ntasks=1 -w "$HEAD" \
  "$RAY_BIN" start --head --block --node-ip-address="$HEAD_IP" --port="$PORT" \
  --include-dashboard=false --temp-dir="$TMP" "${RES[@]}" &
PIDS+=("$!")
if [ "$N" -gt 1 ]; then
  srun --overlap --nodes=$((N - 1)) --ntasks=$((N - 1)) --ntasks-per-node=1 --exclude="$HEAD" \
    "$RAY_BIN" start --block --address="$ADDR" "${RES[@]}" &
  PIDS+=("$!")
fi

# wait until all N nodes are alive (retries while the head is still starting)
"$PYTHON" - "$ADDR" "$N" "$TIMEOUT" <<'PY'
import sys, time
import ray
addr, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end = time.time() + timeout
while True:
    try:
        ray.init(address=addr, logging_level="ERROR", log_to_driver=False)
        break
    except Exception as e:  # head not up yet
        if time.time() > end:
            sys.exit(f"Ray head at {addr} did not come up in {timeout}s: {e}")
        time.sleep(1)
while len([x for x in ray.nodes() if x["Alive"]]) < n:
    if time.time() > end:
        sys.exit(f"only {len([x for x in ray.nodes() if x['Alive']])} of {n} Ray nodes joined")
    time.sleep(1)
print(f"Ray cluster up: {n} node(s), resources {ray.cluster_resources()}", file=sys.stderr)
ray.shutdown()
PY

export RAY_ADDRESS=$ADDR
echo "RAY_ADDRESS=$ADDR"
[ -n "$ADDRESS_FLAG" ] && CMD+=("--$ADDRESS_FLAG=$ADDR")
log "running: ${CMD[*]}"
set +e
"${CMD[@]}"
status=$?
set -e
log "command exited with $status"
exit "$status"
