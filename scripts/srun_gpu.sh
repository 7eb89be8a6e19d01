#!/usr/bin/env bash
# srun_gpu.sh - an interactive shell (or one command) on the GPU partition with one GPU.
#
#   scripts/srun_gpu.sh                         # bash on the GPU partition, 1 GPU, 2 h, 4 CPUs, 32G
#   scripts/srun_gpu.sh --gpus=2 --qos=gpu_access --time=8:00:00
#   scripts/srun_gpu.sh -- nvidia-smi           # run a command instead of a shell
#
# Takes the same options as srun_general.sh (run with --help). The partition and QOS default
# to the rl755 config file's "slurm" gpu_partition / gpu_qos (else partition / qos, else the
# cluster's default). Per-user defaults without editing this file: RL755_GPU_PARTITION RL755_GPU_TIME RL755_GPU_MEM RL755_GPU_CPUS
# RL755_GPU_GPUS RL755_GPU_QOS (e.g. export RL755_GPU_QOS=gpu_access) RL755_GPU_ACCOUNT.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export RL755_SRUN_PROG=$(basename "$0")
export RL755_SRUN_ROLE=gpu
unset RL755_SRUN_PARTITION RL755_SRUN_QOS RL755_SRUN_ACCOUNT  # srun_general.sh's, not ours
[ -n "${RL755_GPU_PARTITION:-}" ] && export RL755_SRUN_PARTITION=$RL755_GPU_PARTITION
export RL755_SRUN_TIME=${RL755_GPU_TIME:-2:00:00}
export RL755_SRUN_MEM=${RL755_GPU_MEM:-32G}
export RL755_SRUN_CPUS=${RL755_GPU_CPUS:-4}
export RL755_SRUN_GPUS=${RL755_GPU_GPUS:-1}
[ -n "${RL755_GPU_QOS:-}" ] && export RL755_SRUN_QOS=$RL755_GPU_QOS
[ -n "${RL755_GPU_ACCOUNT:-}" ] && export RL755_SRUN_ACCOUNT=$RL755_GPU_ACCOUNT
export RL755_SRUN_JOB_NAME=${RL755_GPU_JOB_NAME:-interactive-gpu}
exec bash "$HERE/srun_general.sh" "$@"
