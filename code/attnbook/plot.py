"""Plots every chapter uses: attention heatmaps, training curves, accuracy by length, and the
interactive attention explorer.

Each matplotlib function draws on ``ax`` if you give one, or on a new figure otherwise (``title`` is an
optional title), and returns the ``matplotlib.axes.Axes`` it drew on. None of them calls ``plt.show()``: in a notebook
the figure shows at the end of the cell; in a script, call ``plt.show()`` yourself.
``attention_explorer`` returns HTML instead, which a notebook shows and the website keeps.
"""

import hashlib
import html
import json
import numbers
from importlib import resources

import matplotlib.ticker
import numpy as np
import torch

__all__ = ["show_attention", "attention_explorer", "AttentionExplorer", "plot_history", "plot_accuracy_by_length"]

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


def attention_explorer(query_tokens, key_tokens, weights, title=None, query=0, layer=0, head=0):
    """Interactive attention weights: point at a query token to see how much it gives each key token.

    In a notebook or on the book's website, hovering, clicking or focusing (Tab, then the arrow keys) a
    query token shades every key token by its weight and prints the weight; menus choose the layer and
    the head, or all heads at once. The output is self-contained HTML: the weights (rounded to two
    decimals) travel inside it as JSON, with the course's small script and style; nothing is fetched.

    Args:
        title: shown above the tokens.
        query, layer, head: what is shown first (indices from 0; ``head="all"`` shows every head).
    Shapes:
        query_tokens: T_q tokens (a list of strings, or a string of characters).
        key_tokens: T_k tokens.
        weights: ``(T_q, T_k)``, ``(H, T_q, T_k)`` or ``(layers, H, T_q, T_k)``, a tensor or an array;
            row ``i`` of a head is where query ``i`` looked. For a batch, pick one example.
    Returns:
        An :class:`AttentionExplorer`; its ``html`` is what the notebook displays.
    Raises:
        ValueError: if ``weights`` has another number of dimensions, does not match the token counts,
            or has values outside [0, 1]; or if ``query``, ``layer`` or ``head`` is out of range.
    """
    weights = _to_numpy(weights, "weights")
    queries, keys = _token_labels(query_tokens), _token_labels(key_tokens)
    weights = _explorer_weights(weights, len(queries), len(keys))  # (layers, H, T_q, T_k)
    _check_in_unit_interval(weights)
    _check_start(query, layer, head, weights.shape)
    data = dict(
        title="" if title is None else str(title),
        queries=queries,
        keys=keys,
        weights=np.rint(weights * 100).astype(int).tolist(),  # hundredths
        query=int(query),
        layer=int(layer),
        head=head if head == "all" else int(head),
    )
    return AttentionExplorer(data)


class AttentionExplorer:
    """What :func:`attention_explorer` returns: shows as HTML in a notebook (``_repr_html_``).

    Attributes:
        data: the explorer's contents (tokens, weights in hundredths, what is shown first).
        html: the self-contained HTML; its root element has the class ``attention-explorer`` and an id
            derived from the contents, so the same weights give the same HTML on every run.
    """

    def __init__(self, data: dict) -> None:
        self.data = data
        self.html = _explorer_html(data)

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        layers, heads = len(self.data["weights"]), len(self.data["weights"][0])
        return (
            f"AttentionExplorer({self.data['title']!r}: {layers} layer(s) x {heads} head(s), "
            f"{len(self.data['queries'])} queries x {len(self.data['keys'])} keys)"
        )


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
        raise ValueError(f"curves must be a non-empty dict {{label: {{source length: exact match}}}}, got {curves!r}")
    if ax is None:
        ax = _new_axes()
    for label, curve in curves.items():
        if not isinstance(curve, dict):
            raise ValueError(
                f"curve {label!r} must be a dict {{source length: exact match}}, got {type(curve).__name__}"
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


def _explorer_weights(weights: np.ndarray, num_queries: int, num_keys: int) -> np.ndarray:
    """Weights as ``(layers, H, T_q, T_k)``, after checking them against the token counts."""
    shape = tuple(weights.shape)
    if weights.ndim not in (2, 3, 4):
        hint = "; for a batch, pass one example, e.g. weights[0]" if weights.ndim > 4 else ""
        raise ValueError(
            f"weights must have shape (T_q, T_k), (H, T_q, T_k) or (layers, H, T_q, T_k), got shape {shape}{hint}"
        )
    if shape[-2:] != (num_queries, num_keys):
        swapped = " (swapped query_tokens and key_tokens?)" if shape[-2:] == (num_keys, num_queries) else ""
        raise ValueError(
            f"weights have shape {shape} but there are {num_queries} query tokens and {num_keys} "
            f"key tokens: the last two dimensions must be ({num_queries}, {num_keys}){swapped}"
        )
    if not np.isfinite(weights).all():
        raise ValueError(f"weights contain NaN or infinite values (shape {shape}); pass softmax weights")
    return weights.reshape((1,) * (4 - weights.ndim) + shape)


def _check_start(query, layer, head, shape) -> None:
    layers, heads, num_queries, _ = shape
    for name, value, size in (("query", query, num_queries), ("layer", layer, layers), ("head", head, heads)):
        if name == "head" and value == "all":
            continue
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value < size:
            allowed = f"an int in [0, {size - 1}]" + (' or "all"' if name == "head" else "")
            raise ValueError(
                f"{name} must be {allowed} for weights of shape (layers, H, T_q, T_k) = {shape}, got {value!r}"
            )


def _explorer_html(data: dict) -> str:
    """The explorer's HTML: tokens as text, menus, the weights as JSON, the course's script and style."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    element_id = "attention-explorer-" + hashlib.sha256(payload.encode()).hexdigest()[:12]
    layers, heads = len(data["weights"]), len(data["weights"][0])
    text = html.escape
    queries = "".join(
        f'<button type="button" class="ae-query" data-index="{i}" tabindex="-1">{text(token)}</button>'
        for i, token in enumerate(data["queries"])
    )
    keys = "".join(
        f'<span class="ae-key"><span class="ae-token">{text(token)}</span><span class="ae-weight"></span></span>'
        for token in data["keys"]
    )
    rows = "".join(
        f'<div class="ae-row" data-head="{h}"><span class="ae-label">'
        f"{f'head {h + 1}' if heads > 1 else 'keys'}</span>{keys}</div>"
        for h in range(heads)
    )
    menus = ""
    if layers > 1:
        options = "".join(f'<option value="{n}">layer {n + 1}</option>' for n in range(layers))
        menus += f'<label>layer <select class="ae-layer">{options}</select></label>'
    if heads > 1:
        options = "".join(f'<option value="{h}">head {h + 1}</option>' for h in range(heads))
        menus += f'<label>head <select class="ae-head">{options}<option value="all">all heads</option></select></label>'
    columns = f"grid-template-columns: repeat({len(data['keys']) + 1}, max-content)"
    # "<" is escaped so that no token can end the JSON's script element early.
    json_text = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (
        f'<div class="attention-explorer" id="{element_id}">'
        f"<style>{_explorer_asset('attention_explorer.css')}</style>"
        f'<div class="ae-title">{text(data["title"])}</div>'
        f'<div class="ae-controls">{menus}</div>'
        '<div class="ae-queries" role="toolbar" aria-label="query tokens">'
        f'<span class="ae-label">query</span>{queries}</div>'
        f'<div class="ae-keys" style="{columns}">{rows}</div>'
        f'<p class="ae-status" aria-live="polite">The weights show when this output\'s script runs: on the '
        f"book's website, or in a notebook once you run the cell (or trust the notebook).</p>"
        f'<script type="application/json" class="ae-data">{json_text}</script>'
        f"<script>{_explorer_asset('attention_explorer.js')}</script>"
        f"</div>"
    )


def _explorer_asset(name: str) -> str:
    return resources.files("attnbook").joinpath("static", name).read_text(encoding="utf-8")
