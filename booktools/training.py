"""A small, general training loop for classifiers: train, evaluate, predict, record the history.

    history = fit(model, train_loader, optimizer, epochs=5, eval_loader=test_loader)
    plot_history(history)

`fit` prints one line per epoch (no progress bars: the book stores and compares cell output).
Loaders yield `(inputs, targets)` batches; the model returns one row of class scores (logits)
per input; `loss_fn` takes `(logits, targets)` and returns the batch mean, like
`torch.nn.functional.cross_entropy`. Pass a `History` back to `fit` to continue training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class EpochStats:
    epoch: int
    train_loss: float
    train_accuracy: float
    eval_loss: float | None = None
    eval_accuracy: float | None = None
    seconds: float = 0.0


@dataclass
class History:
    """Per-epoch statistics, in order. `history.column("eval_accuracy")` gives one series."""

    epochs: list[EpochStats] = field(default_factory=list)

    def column(self, name: str) -> list:
        return [getattr(e, name) for e in self.epochs]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([vars(e) for e in self.epochs]).set_index("epoch")

    def __len__(self) -> int:
        return len(self.epochs)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for a model without parameters)."""
    return next(model.parameters(), torch.empty(0)).device


def train_one_epoch(model, loader, optimizer, loss_fn: LossFn = F.cross_entropy, device=None):
    """One pass over `loader`, one optimizer step per batch. Returns (mean loss, accuracy)."""
    device = device or model_device(model)
    model.train()
    total_loss, correct, count = 0.0, 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = loss_fn(logits, targets)
        loss.backward()
        optimizer.step()
        # loss is the batch mean; weight it by the batch size so a short last batch counts less
        total_loss += loss.item() * len(targets)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        count += len(targets)
    return total_loss / count, correct / count


@torch.no_grad()
def evaluate(model, loader, loss_fn: LossFn = F.cross_entropy, device=None):
    """(mean loss, accuracy) of `model` over `loader`, in eval mode and without autograd."""
    device = device or model_device(model)
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        total_loss += loss_fn(logits, targets).item() * len(targets)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        count += len(targets)
    return total_loss / count, correct / count


@torch.no_grad()
def predict(model, loader, device=None) -> torch.Tensor:
    """The model's logits for every input in `loader`, concatenated, on the CPU."""
    device = device or model_device(model)
    model.eval()
    return torch.cat([model(inputs.to(device)).cpu() for inputs, _ in loader])


def fit(
    model,
    train_loader,
    optimizer,
    epochs: int,
    *,
    loss_fn: LossFn = F.cross_entropy,
    eval_loader=None,
    eval_name: str = "test",
    device=None,
    history: History | None = None,
    log: Callable[[str], None] | None = print,
    show_time: bool = False,
) -> History:
    """Train for `epochs` more epochs, evaluating after each one if `eval_loader` is given.

    Continues `history` (numbering epochs after its last one) if one is passed. `log=None`
    prints nothing; `show_time=True` adds each epoch's wall time to its line.
    """
    history = history if history is not None else History()
    first = len(history) + 1
    last = first + epochs - 1
    for epoch in range(first, last + 1):
        start = time.perf_counter()
        train_loss, train_acc = train_one_epoch(model, train_loader, optimizer, loss_fn, device)
        stats = EpochStats(epoch, train_loss, train_acc)
        if eval_loader is not None:
            stats.eval_loss, stats.eval_accuracy = evaluate(model, eval_loader, loss_fn, device)
        stats.seconds = time.perf_counter() - start
        history.epochs.append(stats)
        if log is not None:
            line = f"epoch {epoch:{len(str(last))}d}/{last}: train loss {train_loss:.4f}, accuracy {train_acc:.2%}"
            if eval_loader is not None:
                line += f" | {eval_name} loss {stats.eval_loss:.4f}, accuracy {stats.eval_accuracy:.2%}"
            if show_time:
                line += f" ({stats.seconds:.1f} s)"
            log(line)
    return history


def plot_history(history: History, eval_name: str = "test"):
    """Loss and accuracy per epoch, training and (if recorded) evaluation. Returns the figure."""
    import matplotlib.pyplot as plt

    epochs = history.column("epoch")
    has_eval = history.epochs and history.epochs[0].eval_loss is not None
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(8, 3))
    for ax, key, title in [(ax_loss, "loss", "loss (cross-entropy)"), (ax_acc, "accuracy", "accuracy")]:
        ax.plot(epochs, history.column(f"train_{key}"), "o-", label="train")
        if has_eval:
            ax.plot(epochs, history.column(f"eval_{key}"), "s-", label=eval_name)
        ax.set(xlabel="epoch", title=title)
        ax.set_xticks(epochs)
        ax.legend()
    ax_acc.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    fig.tight_layout()
    return fig
