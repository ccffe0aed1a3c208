"""Fit a small MLP to a noisy sine curve with ndgrad (plain SGD, no nn module yet).

Run: python examples/fit_demo.py [--steps N]. Prints the loss as it falls and the final fit error.
"""

from __future__ import annotations

import argparse
import math
import time

import ndgrad as torch  # PyTorch code, PyTorch habits


def main(steps: int = 2000, hidden: int = 32, lr: float = 0.05) -> float:
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 256).reshape(256, 1)
    y = x.sin() + 0.05 * torch.randn(256, 1)

    w1 = (torch.randn(1, hidden) * 1.0).requires_grad_()
    b1 = torch.zeros(hidden, requires_grad=True)
    w2 = (torch.randn(hidden, 1) / math.sqrt(hidden)).requires_grad_()
    b2 = torch.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]

    start = time.perf_counter()
    loss = None
    for step in range(steps + 1):
        pred = (x @ w1 + b1).tanh() @ w2 + b2
        loss = ((pred - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
        if step % (steps // 10) == 0:
            print(f"step {step:5d}  loss {loss.item():.5f}")
    print(f"final mse {loss.item():.5f} in {time.perf_counter() - start:.2f}s")
    return loss.item()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    main(args.steps)
