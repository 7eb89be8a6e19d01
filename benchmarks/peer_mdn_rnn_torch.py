"""A peer for stage 4's training speed: the World Models MDN-RNN written in PyTorch, timed
at the shape `sequential_training.py` times the toolkit's, on the same machine.

    python benchmarks/peer_mdn_rnn_torch.py --batch_size=16 --sequence_length=32 \
        [--rounds=5] [--steps=10] [--num_threads=2]

PyTorch is not one of the toolkit's requirements: run this from an environment that has it
(`pip install torch` in a separate venv; numpy is the only other import). It is here so that
"how fast could this CPU train this model" is measured on the machine at hand instead of
quoted from another one.

The model is the same computation as `mdn_rnn.mdn_rnn` for CAR_RACING (422,368 parameters):
an LSTM of 256 units over inputs [z_t, a_t] (Z=32, A=3), a linear head to 5 Gaussians per
dimension of z_{t+1} (logits, means, scales 1e-3 + softplus: 480 outputs, laid out as the
Keras head's), the mixture's negative log-likelihood averaged over Z and over the steps that
have a target (the masks of `sequential_training.synthetic_slices`: every 4th sequence ends
halfway), Adam at 1e-4. Given the Keras model's weights it computes the same loss as
`model.get_loss_fn()` (checked to float rounding when this file was written).
`nn.LSTM` runs PyTorch's fused CPU kernel, with two bias vectors where Keras has one (423,392
parameters); a masked step is not carried through here, the padded steps only drop out of the
loss, which costs the same or less.

It prints the median sequences/s over `--rounds` blocks of `--steps` timed steps (the first
`--warm` steps of each block dropped), and each block's figure, so that runs of this and of
`sequential_training.py` alternated in time can be compared.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

Z, A, UNITS, MIXTURES, MIN_SCALE = 32, 3, 256, 5, 1e-3
LEARNING_RATE = 1e-4


def synthetic_batches(batch_size: int, length: int, seed: int = 0) -> list[dict]:
    """4 batches shaped and masked as `sequential_training.synthetic_slices` makes them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 4 * batch_size
    mask = np.ones((n, length), np.float32)
    mask[::4, length // 2 :] = 0
    target_mask = mask.copy()
    target_mask[::4, length // 2 - 1] = 0
    inputs = rng.normal(size=(n, length, Z + A)).astype(np.float32)
    targets = rng.normal(size=(n, length, Z)).astype(np.float32)
    return [
        {
            "inputs": inputs[i : i + batch_size],
            "targets": targets[i : i + batch_size],
            "target_mask": target_mask[i : i + batch_size],
        }
        for i in range(0, n, batch_size)
    ]


def build(torch):
    """(model parameters, loss(batch) -> scalar tensor) of the MDN-RNN."""
    nn = torch.nn

    class MdnRnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(Z + A, UNITS, batch_first=True)
            self.head = nn.Linear(UNITS, 3 * MIXTURES * Z)

        def forward(self, x):
            h, _ = self.lstm(x)  # [B, T, U]
            raw = self.head(h).view(*h.shape[:2], Z, MIXTURES, 3)  # the Keras head's layout
            scales = MIN_SCALE + torch.nn.functional.softplus(raw[..., 2])
            return raw[..., 0], raw[..., 1], scales  # logits, locs, scales [B, T, Z, K]

    model = MdnRnn()
    half_log_2pi = 0.5 * math.log(2 * math.pi)

    def loss(batch):
        logits, locs, scales = model(batch["inputs"])
        z = (batch["targets"].unsqueeze(-1) - locs) / scales
        log_normal = -0.5 * z * z - torch.log(scales) - half_log_2pi
        log_p = torch.logsumexp(torch.log_softmax(logits, -1) + log_normal, -1)  # [B, T, Z]
        nll = -log_p.mean(-1)  # [B, T]
        m = batch["target_mask"]
        return (nll * m).sum() / m.sum().clamp(min=1.0)

    return model, loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--sequence_length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--num_threads", type=int, default=None)
    args = parser.parse_args()

    import torch

    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    model, loss_fn = build(torch)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    batches = [
        {k: torch.from_numpy(v) for k, v in b.items()}
        for b in synthetic_batches(args.batch_size, args.sequence_length)
    ]
    params = sum(p.numel() for p in model.parameters())
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; MDN-RNN {params:,d} "
        f"parameters; batch {args.batch_size} x {args.sequence_length}"
    )
    block_rates, times = [], []
    for _ in range(args.rounds):
        block = []
        for i in range(args.warm + args.steps):
            t0 = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(batches[i % len(batches)])
            loss.backward()
            optimizer.step()
            loss.item()
            if i >= args.warm:
                block.append(time.perf_counter() - t0)
        times += block
        block_rates.append(args.batch_size / statistics.median(block))
    print("blocks (sequences/s):", " ".join(f"{r:.0f}" for r in block_rates))
    print(f"median sequences/s: {args.batch_size / statistics.median(times):.1f}")


if __name__ == "__main__":
    main()
