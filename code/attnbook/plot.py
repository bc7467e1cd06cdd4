"""Plots every chapter uses: attention heatmaps, training curves, accuracy by length.

Each function draws on ``ax`` if you give one, or on a new figure otherwise (``title`` is an
optional title), and returns the ``matplotlib.axes.Axes`` it drew on. None of them calls ``plt.show()``: in a notebook
the figure shows at the end of the cell; in a script, call ``plt.show()`` yourself.
"""

import matplotlib.ticker
import numpy as np
import torch

__all__ = ["show_attention", "plot_history", "plot_accuracy_by_length"]

#: Metrics ``plot_history`` draws by default (those missing from the history are skipped).
DEFAULT_HISTORY_METRICS = ("train_loss", "valid_loss")

#: Source tokens longer than this many characters make the x labels vertical.
_ROTATE_LABELS_LONGER_THAN = 2


def show_attention(weights, src_tokens, tgt_tokens, ax=None, title=None):
    """Draw attention weights as a labelled heatmap with a colorbar.

    Row ``t`` shows where output step ``t`` looked: its weights over the source
    positions. The colour scale is fixed to [0, 1], so heatmaps of different models
    can be compared by eye. A space token is shown as ``␣`` so it stays visible.

    Shapes:
        weights: (T, S), a tensor or an array; rows are output steps, columns are
            source positions. For a batch, pick one example: ``weights[0]``.
        src_tokens: S tokens (a list of strings, or a string of characters), along x.
        tgt_tokens: T tokens, along y.

    Raises:
        ValueError: if ``weights`` is not 2-D, does not match the token counts, or has
            values outside [0, 1] (raw scores instead of softmax weights).
    """
    weights = _to_numpy(weights, "weights")
    src_labels = _token_labels(src_tokens)
    tgt_labels = _token_labels(tgt_tokens)
    _check_attention_shape(weights, len(src_labels), len(tgt_labels))
    _check_in_unit_interval(weights)

    if ax is None:
        width = min(12.0, 2.0 + 0.4 * len(src_labels))
        height = min(10.0, 1.5 + 0.4 * len(tgt_labels))
        ax = _new_axes(figsize=(width, height))

    image = ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.figure.colorbar(image, ax=ax, label="attention weight")
    ax.grid(False)

    ax.set_xticks(range(len(src_labels)))
    rotation = 90 if max(map(len, src_labels), default=0) > _ROTATE_LABELS_LONGER_THAN else 0
    ax.set_xticklabels(src_labels, rotation=rotation)
    ax.set_yticks(range(len(tgt_labels)))
    ax.set_yticklabels(tgt_labels)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title is not None:
        ax.set_title(title)
    return ax


def plot_history(history, metrics=DEFAULT_HISTORY_METRICS, ax=None):
    """Plot training metrics, one line per metric, over epochs 1, 2, ..., n.

    Shapes:
        history: a dict ``{metric name: [value per epoch]}``, or an object with an
            ``.as_dict()`` method that returns one (such as the ``History`` that
            ``fit`` returns). ``None`` values (an epoch without that metric) leave a gap.

    Args:
        metrics: a metric name or a sequence of names. With the default
            ``("train_loss", "valid_loss")`` the ones the history lacks are skipped
            (training without validation data still plots); a name you pass yourself
            must exist.
    Raises:
        ValueError: for a metric the history does not have; the message lists the
            available ones.
    """
    data = _history_dict(history)
    metrics = _metrics_to_plot(data, metrics)
    if ax is None:
        ax = _new_axes()
    for name in metrics:
        values = np.array(data[name], dtype=float)  # None -> nan, drawn as a gap
        epochs = np.arange(1, len(values) + 1)
        ax.plot(epochs, values, marker="o" if len(values) <= 30 else None, label=name)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss" if all(name.endswith("loss") for name in metrics) else "value")
    ax.legend()
    return ax


def plot_accuracy_by_length(curves, ax=None, title=None):
    """Plot exact match against source length, one line per labelled curve.

    Shapes:
        curves: ``{label: {source length: exact match}}``, e.g.
            ``{"seq2seq": accuracy_by_length(...), "attention": ...}``; values in [0, 1].

    Raises:
        ValueError: if ``curves`` is empty or a curve is not a dict.
    """
    if not isinstance(curves, dict) or not curves:
        raise ValueError(
            "curves must be a non-empty dict {label: {source length: exact match}}, "
            f"got {curves!r}"
        )
    if ax is None:
        ax = _new_axes()
    for label, curve in curves.items():
        if not isinstance(curve, dict):
            raise ValueError(
                f"curve {label!r} must be a dict {{source length: exact match}}, "
                f"got {type(curve).__name__}"
            )
        lengths = sorted(curve)
        ax.plot(lengths, [curve[n] for n in lengths], marker="o", label=str(label))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("source length")
    ax.set_ylabel("exact match")
    ax.legend()
    if title is not None:
        ax.set_title(title)
    return ax


def _new_axes(figsize=None):
    """A new figure with one Axes (pyplot is imported only here, when needed)."""
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def _to_numpy(values, name: str) -> np.ndarray:
    """A float NumPy array from a tensor (detached, on the CPU) or anything array-like."""
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().double().numpy()
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a tensor or an array of numbers: {error}") from None


def _token_labels(tokens) -> list[str]:
    """Tokens as tick labels: strings, with a space shown as a visible '␣'."""
    if isinstance(tokens, torch.Tensor):
        tokens = tokens.tolist()
    return ["␣" if str(token) == " " else str(token) for token in tokens]


def _check_attention_shape(weights: np.ndarray, num_src: int, num_tgt: int) -> None:
    shape = tuple(weights.shape)
    if weights.ndim != 2:
        raise ValueError(
            f"weights must be 2-D (output steps, source positions) but have shape {shape}; "
            "for a batch, pass one example, e.g. weights[0]"
        )
    if shape != (num_tgt, num_src):
        raise ValueError(
            f"weights have shape {shape} but there are {num_tgt} target tokens and "
            f"{num_src} source tokens; expected shape ({num_tgt}, {num_src})"
        )


def _check_in_unit_interval(weights: np.ndarray, tolerance: float = 1e-6) -> None:
    finite = weights[np.isfinite(weights)]
    if finite.size and (finite.min() < -tolerance or finite.max() > 1 + tolerance):
        raise ValueError(
            f"attention weights must lie in [0, 1], but these range from {finite.min():.3g} "
            f"to {finite.max():.3g}; did you pass scores instead of softmax weights?"
        )


def _history_dict(history) -> dict:
    if hasattr(history, "as_dict"):
        history = history.as_dict()
    if not isinstance(history, dict):
        raise ValueError(
            "history must be a dict {metric: [value per epoch]} or have an .as_dict() "
            f"method, got {type(history).__name__}"
        )
    return history


def _metrics_to_plot(data: dict, metrics) -> list[str]:
    """The metric names to draw; unknown names raise a ValueError listing the known ones."""
    available = ", ".join(map(str, data)) or "(none)"
    if isinstance(metrics, str):
        metrics = [metrics]
    if tuple(metrics) == DEFAULT_HISTORY_METRICS:
        metrics = [name for name in metrics if name in data]
        if not metrics:
            raise ValueError(
                f"history has none of the default metrics {DEFAULT_HISTORY_METRICS}; "
                f"pass metrics=... with some of the available ones: {available}"
            )
    for name in metrics:
        if name not in data:
            raise ValueError(f"unknown metric {name!r}; the history has: {available}")
    if not metrics:
        raise ValueError(f"metrics is empty; choose some of: {available}")
    return list(metrics)
