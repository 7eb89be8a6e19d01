#!/usr/bin/env bash
# srun_general.sh - an interactive shell (or one command) on a SLURM compute node.
#
#   scripts/srun_general.sh                      # bash on the CPU partition, 2 h, 4 CPUs, 16G
#   scripts/srun_general.sh --time=30 --cpus=2   # 30 minutes, 2 CPUs
#   scripts/srun_general.sh -- python -c 'import os; print(os.uname())'   # run a command instead
#   scripts/srun_gpu.sh                          # same, on the GPU partition with one GPU
#
# The partition and QOS default to the "slurm" object of the rl755 config file
# ($RL755_CONFIG or ~/.config/rl755/config.json: "partition", "qos", "account"), else the
# cluster's default partition. Per-user defaults without editing this file, via environment
# variables: RL755_SRUN_PARTITION RL755_SRUN_TIME RL755_SRUN_MEM RL755_SRUN_CPUS
# RL755_SRUN_GPUS RL755_SRUN_QOS RL755_SRUN_ACCOUNT (srun_gpu.sh reads RL755_GPU_* first).
set -euo pipefail

# config_value KEY... -> the first non-empty "slurm" KEY of the rl755 config file (or nothing)
config_value() {
  local file=${RL755_CONFIG:-$HOME/.config/rl755/config.json}
  [ -f "$file" ] && command -v python3 >/dev/null || return 0
  python3 - "$file" "$@" <<'PY' 2>/dev/null || true
import json, sys
slurm = json.load(open(sys.argv[1])).get("slurm") or {}
print(next((slurm[k] for k in sys.argv[2:] if slurm.get(k)), ""))
PY
}
GPU_KEYS=()   # srun_gpu.sh: the config file's gpu_partition / gpu_qos come first
[ "${RL755_SRUN_ROLE:-}" = gpu ] && GPU_KEYS=(gpu)

PROG=${RL755_SRUN_PROG:-$(basename "$0")}
PARTITION=${RL755_SRUN_PARTITION-$(config_value ${GPU_KEYS[@]/%/_partition} partition)}
TIME=${RL755_SRUN_TIME:-2:00:00}
MEM=${RL755_SRUN_MEM:-16G}
CPUS=${RL755_SRUN_CPUS:-4}
GPUS=${RL755_SRUN_GPUS:-0}
QOS=${RL755_SRUN_QOS-$(config_value ${GPU_KEYS[@]/%/_qos} qos)}
ACCOUNT=${RL755_SRUN_ACCOUNT-$(config_value account)}
JOB_NAME=${RL755_SRUN_JOB_NAME:-interactive}
DRY_RUN=0
EXTRA=()

usage() {
  cat <<USAGE
Usage: $PROG [options] [-- command [args...]]

Starts an interactive shell (srun --pty bash) on a compute node, or runs the command
given after "--" (without a pseudo-terminal, so it also works from scripts and CI).

Options (also --name=value):
  -p, --partition NAME   partition                            (default: ${PARTITION:-the cluster default})
  -t, --time TIME        time limit: minutes, H:MM:SS, D-HH   (default: $TIME)
  -m, --mem MEM          memory per node, e.g. 16G            (default: $MEM)
  -c, --cpus N           CPUs for the task                    (default: $CPUS)
  -g, --gpus N           GPUs (--gres=gpu:N); 0 = none        (default: $GPUS)
  -q, --qos NAME         quality of service, e.g. gpu_access  (default: ${QOS:-none})
  -A, --account NAME     account to charge                    (default: ${ACCOUNT:-none})
  -J, --job-name NAME    job name                             (default: $JOB_NAME)
      --srun-arg ARG     pass ARG to srun as is (repeatable), e.g. --srun-arg=--exclusive
  -n, --dry-run          print the srun command instead of running it
  -h, --help             this help
USAGE
}

die() { echo "$PROG: $*" >&2; echo "Run '$PROG --help' for the options." >&2; exit 2; }

CMD=()
while [ $# -gt 0 ]; do
  arg=$1; shift
  if [[ $arg == --*=* ]]; then val=${arg#*=}; arg=${arg%%=*}; has_val=1; else val=""; has_val=0; fi
  need() { # take the option's value from "=value" or from the next argument
    if [ $has_val = 1 ]; then return 0; fi
    [ $# -gt 0 ] || die "option $arg needs a value"
    val=$1; shift_next=1
  }
  shift_next=0
  case $arg in
    -h|--help) usage; exit 0 ;;
    -n|--dry-run|--dry_run) DRY_RUN=1; continue ;;
    --) CMD=("$@"); break ;;
    -p|--partition|-t|--time|-m|--mem|-c|--cpus|-g|--gpus|-q|--qos|-A|--account|-J|--job-name|--job_name|--srun-arg|--srun_arg)
      need "$@"; [ $shift_next = 1 ] && shift ;;
    *) die "unknown option: $arg" ;;
  esac
  case $arg in
    -p|--partition) PARTITION=$val ;;
    -t|--time) TIME=$val ;;
    -m|--mem) MEM=$val ;;
    -c|--cpus) CPUS=$val ;;
    -g|--gpus) GPUS=$val ;;
    -q|--qos) QOS=$val ;;
    -A|--account) ACCOUNT=$val ;;
    -J|--job-name|--job_name) JOB_NAME=$val ;;
    --srun-arg|--srun_arg) EXTRA+=("$val") ;;
  esac
done

[[ $CPUS =~ ^[0-9]+$ ]] && [ "$CPUS" -ge 1 ] || die "--cpus must be a positive integer, got '$CPUS'"
[[ $GPUS =~ ^[0-9]+$ ]] || die "--gpus must be a non-negative integer, got '$GPUS'"
SRUN=(srun --time="$TIME" --mem="$MEM" --cpus-per-task="$CPUS" --ntasks=1 --nodes=1
      --job-name="$JOB_NAME")
[ -n "$PARTITION" ] && SRUN+=(--partition="$PARTITION")
[ "$GPUS" -gt 0 ] && SRUN+=(--gres="gpu:$GPUS")
[ -n "$QOS" ] && SRUN+=(--qos="$QOS")
[ -n "$ACCOUNT" ] && SRUN+=(--account="$ACCOUNT")
SRUN+=("${EXTRA[@]}")
if [ ${#CMD[@]} -gt 0 ]; then
  SRUN+=("${CMD[@]}")
else
  SRUN+=(--pty bash -l)
fi

if [ $DRY_RUN = 1 ]; then
  printf '%q ' "${SRUN[@]}"; echo
  exit 0
fi
command -v srun >/dev/null || die "srun not found: run this on a SLURM login node"
exec "${SRUN[@]}"
