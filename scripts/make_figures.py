"""Draw the course's static figures into chapters/figures/.

Run from the repository root after changing a figure:

    .venv/bin/python scripts/make_figures.py

Figures that show results are drawn inside the chapter notebooks instead, from the run.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "attention-step-by-step"  # the same SVG ids on every run
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

FIGURES = Path(__file__).resolve().parent.parent / "chapters" / "figures"

#: (number, title, what it adds) for each stop on the road map.
CHAPTERS = [
    ("1", "RNN\nencoder–decoder", "one fixed-size\ncontext vector:\nthe bottleneck"),
    ("2", "Bahdanau\nattention", "a fresh context\nper output step,\nadditive scores"),
    ("3", "Luong\nattention", "dot / general /\nconcat scores,\ninput feeding"),
    ("4", "Self-\nattention", "a sequence\nattends to itself:\nQ, K, V, scaling"),
    ("5", "Multi-head\nattention", "h heads in\nsubspaces,\nconcat, then W_O"),
    ("6", "The\nTransformer", "positions, residuals,\nLayerNorm, FFN,\nno recurrence"),
    ("7", "Beyond", "encoder-only,\ndecoder-only,\nlong inputs"),
    ("8", "Today's\nblock", "RoPE, RMSNorm,\nSwiGLU, GQA,\nsliding windows"),
]


def draw_roadmap(path: Path) -> None:
    """A left-to-right chain of chapter boxes, each naming what it adds."""
    fig, ax = plt.subplots(figsize=(12, 3.0))
    width, height, gap = 1.5, 1.9, 0.22
    for index, (number, title, adds) in enumerate(CHAPTERS):
        x = index * (width + gap)
        colour = "#dbe9f6" if index == 0 else ("#fde9c9" if index < 3 else "#e3f1dc")
        box = FancyBboxPatch(
            (x, 0),
            width,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=colour,
            edgecolor="#445566",
            linewidth=1.0,
        )
        ax.add_patch(box)
        ax.text(
            x + width / 2, height - 0.2, f"Chapter {number}", ha="center", va="center", fontsize=8.5, color="#445566"
        )
        ax.text(x + width / 2, height - 0.62, title, ha="center", va="center", fontsize=9, fontweight="bold")
        ax.text(x + width / 2, 0.45, adds, ha="center", va="center", fontsize=8)
        if index < len(CHAPTERS) - 1:
            arrow = FancyArrowPatch(
                (x + width, height / 2),
                (x + width + gap, height / 2),
                arrowstyle="-|>",
                mutation_scale=10,
                color="#445566",
            )
            ax.add_patch(arrow)
    ax.text(0, -0.25, "recurrent models", fontsize=8, color="#8a6d3b")
    ax.text(3 * (width + gap), -0.25, "attention without recurrence", fontsize=8, color="#3c6e2f")
    ax.set_xlim(-0.05, len(CHAPTERS) * (width + gap))
    ax.set_ylim(-0.4, height + 0.05)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def _cell(ax, x, y, label, colour, width=0.8, height=0.6):
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=colour,
            edgecolor="#445566",
            linewidth=1.0,
        )
    )
    ax.text(x, y, label, ha="center", va="center", fontsize=10)


def _arrow(ax, start, end, colour="#445566", style="-|>"):
    ax.add_patch(
        FancyArrowPatch(
            start, end, arrowstyle=style, mutation_scale=10, color=colour, linewidth=1.0, shrinkA=0, shrinkB=0
        )
    )


def draw_encoder_decoder(path: Path) -> None:
    """The Chapter 1 model: a GRU reads the source into c; c makes s_0 and reaches every step."""
    fig, ax = plt.subplots(figsize=(11, 4.0))
    source, target = ["d", "e", "c", "a"], ["a", "c", "e", "d", "<eos>"]
    step, red, green = 1.25, "#b05050", "#3c6e2f"
    for j, token in enumerate(source):  # encoder
        x = j * step
        _cell(ax, x, 1.0, f"$h_{j + 1}$", "#dbe9f6")
        ax.text(x, 0.0, f"$x_{j + 1}$ = {token}", ha="center", va="center", fontsize=10)
        _arrow(ax, (x, 0.2), (x, 0.7))
        if j:
            _arrow(ax, (x - step + 0.4, 1.0), (x - 0.4, 1.0))
    c_x = len(source) * step + 0.25
    _cell(ax, c_x, 1.0, "$c$", "#f6d6d6", width=0.7)
    _arrow(ax, ((len(source) - 1) * step + 0.4, 1.0), (c_x - 0.35, 1.0))
    ax.text(c_x, 0.3, "context\nvector\n$c = h_4$", ha="center", va="center", fontsize=9, color=red)
    s0_x = c_x + 1.5  # s_0 = tanh(W_init c + b_init)
    _cell(ax, s0_x, 1.0, "$s_0$", "#fde9c9")
    _arrow(ax, (c_x + 0.35, 1.0), (s0_x - 0.4, 1.0))
    ax.text((c_x + s0_x) / 2 - 0.02, 1.13, "$W_{\\mathrm{init}}$", ha="center", va="bottom", fontsize=9)
    ax.text(s0_x, 0.3, "first\nstate", ha="center", va="center", fontsize=9, color="#8a6d3b")
    bus_y, out_y = 1.62, 2.2  # c's dashed line; the output layers
    last_x = s0_x + len(target) * step
    ax.plot([c_x, c_x, last_x - 0.22], [1.3, bus_y, bus_y], color=red, linewidth=1.0)
    for i, token in enumerate(target):  # decoder
        x = s0_x + (i + 1) * step
        _cell(ax, x, 1.0, f"$s_{i + 1}$", "#fde9c9")
        _arrow(ax, (x - step + 0.4, 1.0), (x - 0.4, 1.0))
        previous = "<bos>" if i == 0 else target[i - 1]
        ax.text(x, 0.0, previous, ha="center", va="center", fontsize=10)
        _arrow(ax, (x, 0.2), (x, 0.7))
        _cell(ax, x, out_y, "$W_o$", "#eeeeee", width=0.7, height=0.42)
        _arrow(ax, (x + 0.12, 1.3), (x + 0.12, out_y - 0.21))  # s_t into the output layer
        _arrow(ax, (x - 0.22, bus_y), (x - 0.22, 1.3), colour=red)  # c into the GRU step
        _arrow(ax, (x - 0.22, bus_y), (x - 0.22, out_y - 0.21), colour=red)  # and the output
        ax.plot([x - 0.22], [bus_y], "o", color=red, markersize=3.5)  # c branches here
        # the previous symbol into the output layer: around the right of s_t
        ax.plot([x + 0.22, x + 0.55, x + 0.55], [0.15, 0.45, 1.75], color=green, linewidth=0.8)
        _arrow(ax, (x + 0.55, 1.75), (x + 0.3, out_y - 0.21), colour=green)
        _arrow(ax, (x, out_y + 0.21), (x, out_y + 0.5))
        ax.text(x, out_y + 0.68, token, ha="center", va="center", fontsize=10, fontweight="bold")
    ax.text(1.5 * step, -0.55, "encoder: reads the source", ha="center", fontsize=10, color="#2f5d8a")
    ax.text(
        s0_x + step - 0.55,
        out_y,
        "output layer: reads $s_t$, $c$ and the previous symbol",
        ha="right",
        va="center",
        fontsize=9,
    )
    ax.text(
        s0_x + 3 * step,
        -0.55,
        "decoder: reads the previous output symbol and $c$, writes the next",
        ha="center",
        fontsize=10,
        color="#8a6d3b",
    )
    ax.set_xlim(-0.6, last_x + 0.75)
    ax.set_ylim(-0.8, out_y + 0.9)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def draw_additive_attention(path: Path) -> None:
    """One Bahdanau step: s_{i-1} scores every annotation h_j; the weights mix them into c_i;
    the GRU reads y_{i-1} and c_i to make s_i; the output layer reads y_{i-1}, s_i and c_i."""
    fig, ax = plt.subplots(figsize=(11, 4.9))
    weights = [0.05, 0.10, 0.70, 0.15]
    step = 1.3
    for j, weight in enumerate(weights):
        x = j * step
        _cell(ax, x, 0.0, f"$h_{j + 1}$", "#dbe9f6")
        ax.text(x, -0.65, f"$x_{j + 1}$", ha="center", fontsize=10)
        _arrow(ax, (x, -0.5), (x, -0.3))
        # the score e_ij = v^T tanh(W s_{i-1} + U h_j), then the weight alpha_ij
        _cell(ax, x, 1.2, f"$e_{{i{j + 1}}}$", "#eeeeee", width=0.7, height=0.45)
        _arrow(ax, (x, 0.3), (x, 0.97))
        ax.add_patch(
            FancyBboxPatch(
                (x - 0.3, 1.8), 0.6, 0.9 * weight + 0.02, boxstyle="square,pad=0", facecolor="#e07b39", edgecolor="none"
            )
        )
        ax.text(x, 1.72, f"$\\alpha_{{i{j + 1}}}$={weight:.2f}", ha="center", va="top", fontsize=8.5)
        _arrow(ax, (x, 1.43), (x, 1.55), colour="#888888")
    ax.text(-0.9, 1.2, "scores", ha="right", va="center", fontsize=9, color="#555555")
    ax.text(-0.9, 2.1, "softmax\nweights", ha="right", va="center", fontsize=9, color="#555555")
    s_x = len(weights) * step + 0.8
    _cell(ax, s_x, 1.2, "$s_{i-1}$", "#fde9c9")
    # s_{i-1} is compared with every annotation: a line under the score boxes, one arrow up to each
    ax.plot([0.2, s_x - 0.4], [0.62, 0.62], color="#8a6d3b", linewidth=1.0)
    ax.plot([s_x - 0.4, s_x - 0.4], [0.62, 1.2], color="#8a6d3b", linewidth=1.0)
    for j in range(len(weights)):
        _arrow(ax, (j * step + 0.2, 0.62), (j * step + 0.2, 0.97), colour="#8a6d3b")
    ax.text(s_x, 0.75, "previous\ndecoder state", ha="center", va="top", fontsize=8, color="#8a6d3b")
    c_x = 1.5 * step
    _cell(ax, c_x, 3.4, "$c_i = \\sum_j \\alpha_{ij} h_j$", "#f6d6d6", width=2.0)
    for j, weight in enumerate(weights):  # each h_j, scaled by its weight, into the sum
        ax.annotate(
            "",
            xy=(c_x, 3.1),
            xytext=(j * step, 1.82 + 0.9 * weight + 0.04),
            arrowprops=dict(arrowstyle="-|>", color="#b05050", linewidth=0.6 + 3 * weight),
        )
    ax.text(
        -0.9,
        3.0,
        "$\\alpha_{ij} h_j$:\neach annotation,\nscaled by its weight",
        ha="right",
        va="center",
        fontsize=8.5,
        color="#b05050",
    )
    for j in range(1, len(weights)):  # the encoder reads both ways
        left, right = (j - 1) * step + 0.4, j * step - 0.4
        _arrow(ax, (left, 0.1), (right, 0.1))
        _arrow(ax, (right, -0.1), (left, -0.1))
    ax.text(-0.9, 0.0, "bidirectional\nencoder", ha="right", va="center", fontsize=8.5, color="#2f5d8a")
    # the recurrent step s_i = f(s_{i-1}, y_{i-1}, c_i), then the output layer g(y_{i-1}, s_i, c_i)
    y_x = s_x + 1.6
    _cell(ax, y_x, 1.2, "$y_{i-1}$", "#e3f1dc")
    ax.text(y_x, 0.75, "previous\noutput", ha="center", va="top", fontsize=8, color="#3c6e2f")
    _cell(ax, s_x, 3.4, "$s_i$", "#fde9c9")
    ax.text(s_x, 3.85, "GRU step $f$", ha="center", va="bottom", fontsize=8, color="#555555")
    _cell(ax, y_x, 3.4, "$g$", "#eeeeee")
    ax.text(y_x, 3.85, "output layer", ha="center", va="bottom", fontsize=8, color="#555555")
    _arrow(ax, (c_x + 1.0, 3.4), (s_x - 0.4, 3.4))
    _arrow(ax, (s_x, 1.5), (s_x, 3.1))
    _arrow(ax, (y_x - 0.25, 1.5), (s_x + 0.3, 3.1), colour="#3c6e2f")  # y_{i-1} into the step
    _arrow(ax, (y_x + 0.2, 1.5), (y_x + 0.2, 3.1), colour="#3c6e2f")  # ... and into the output
    _arrow(ax, (s_x + 0.4, 3.4), (y_x - 0.4, 3.4))
    # c_i goes into the output layer too: over the top of s_i, into g's left side
    ax.plot([c_x, c_x, y_x - 1.0, y_x - 1.0], [3.7, 4.45, 4.45, 3.55], color="#445566", linewidth=1.0)
    _arrow(ax, (y_x - 1.0, 3.55), (y_x - 0.4, 3.55))
    ax.text(y_x + 0.5, 3.4, "$\\rightarrow y_i$", ha="left", va="center", fontsize=10)
    ax.set_xlim(-2.2, y_x + 1.4)
    ax.set_ylim(-0.9, 4.6)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def draw_self_attention(path: Path) -> None:
    """Self-attention for one position: its query meets every key; the softmax weights mix the values."""
    fig, ax = plt.subplots(figsize=(10, 5.2))
    tokens, weights, focus = ["the", "bat", "flew", "out"], [0.08, 0.22, 0.55, 0.15], 1
    step = 2.2
    for j, token in enumerate(tokens):
        x = j * step
        _cell(ax, x, 0.0, f"$x_{j + 1}$", "#dbe9f6")
        ax.text(x, -0.6, f"“{token}”", ha="center", fontsize=10)
        query_colour = "#fde9c9" if j == focus else "#fbf5ec"  # only the focus position's query is used here
        for dx, name, colour in ((-0.6, "q", query_colour), (0.0, "k", "#e3f1dc"), (0.6, "v", "#ead9f2")):
            _cell(ax, x + dx, 1.2, f"${name}_{j + 1}$", colour, width=0.5, height=0.45)
            _arrow(ax, (x, 0.3), (x + dx, 0.97), colour="#888888")
        _cell(ax, x, 2.45, f"$q_{focus + 1} \\cdot k_{j + 1} / \\sqrt{{d_k}}$", "#eeeeee", width=1.55, height=0.45)
        _arrow(ax, (x, 1.43), (x, 2.22), colour="#3c6e2f")  # key j into score j
        ax.add_patch(
            FancyBboxPatch(
                (x - 0.3, 3.1),
                0.6,
                1.0 * weights[j] + 0.02,
                boxstyle="square,pad=0",
                facecolor="#e07b39",
                edgecolor="none",
            )
        )
        ax.text(x - 0.4, 3.1, f"{weights[j]:.2f}", ha="right", va="bottom", fontsize=8.5)
        ax.text(x + 0.4, 3.1, f"$\\times\\, v_{j + 1}$", ha="left", va="bottom", fontsize=9, color="#7a4d99")
    q_x = focus * step - 0.6  # the focus position's query goes to every score box
    ax.plot([q_x, q_x], [1.43, 1.85], color="#8a6d3b", linewidth=1.4)
    ax.plot([-0.35, (len(tokens) - 1) * step - 0.35], [1.85, 1.85], color="#8a6d3b", linewidth=1.4)
    for j in range(len(tokens)):
        _arrow(ax, (j * step - 0.35, 1.85), (j * step - 0.35, 2.22), colour="#8a6d3b")
    ax.text(-1.5, 2.45, "scores", ha="right", va="center", fontsize=9, color="#555555")
    ax.text(-1.5, 3.35, "softmax\nweights", ha="right", va="center", fontsize=9, color="#555555")
    z_x = 1.5 * step
    _cell(ax, z_x, 4.9, f"$z_{focus + 1} = \\sum_j \\alpha_{{{focus + 1}j}}\\, v_j$", "#f6d6d6", width=2.4)
    for j in range(len(tokens)):  # each weighted value reaches z in proportion to its weight
        ax.annotate(
            "",
            xy=(z_x + 0.3 * (j - 1.5), 4.6),
            xytext=(j * step, 3.2 + 1.0 * weights[j]),
            arrowprops=dict(arrowstyle="-|>", color="#7a4d99", linewidth=0.6 + 3 * weights[j]),
        )
    ax.text(
        z_x + 1.4,
        4.9,
        "every position does the same with its own query, all at once",
        ha="left",
        va="center",
        fontsize=8.5,
        color="#555555",
    )
    ax.set_xlim(-2.6, (len(tokens) - 1) * step + 1.2)
    ax.set_ylim(-0.9, 5.3)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def draw_multi_head(path: Path) -> None:
    """Multi-head attention: h heads, each with its own small W_i^Q, W_i^K, W_i^V, side by side; concat; W^O."""
    fig, ax = plt.subplots(figsize=(10, 5.6))
    heads = [("1", "#dbe9f6"), ("2", "#e3f1dc"), ("h", "#ead9f2")]
    step, d_model = 3.0, "d_{\\mathrm{model}}"
    _cell(ax, step, -0.55, f"$X$   ($T \\times {d_model}$)", "#eeeeee", width=3.2, height=0.55)
    for index, (name, colour) in enumerate(heads):
        x = index * step
        if name == "h":
            ax.text(x - step / 2, 2.3, "…", ha="center", va="center", fontsize=22, color="#555555")
        for dx, letter in ((-0.85, "Q"), (0.0, "K"), (0.85, "V")):
            _cell(ax, x + dx, 1.1, f"$X W_{name}^{letter}$", colour, width=0.78, height=0.5)
            _arrow(ax, (step, -0.27), (x + dx, 0.85), colour="#aaaaaa")
        _cell(ax, x, 2.3, "softmax$(QK^\\top/\\sqrt{d_k})\\,V$", colour, width=2.5, height=0.55)
        for dx in (-0.85, 0.0, 0.85):
            _arrow(ax, (x + dx, 1.35), (x + dx * 0.6, 2.02))
        _cell(ax, x, 3.35, f"head$_{name}$  ($T \\times d_v$)", colour, width=1.9, height=0.5)
        _arrow(ax, (x, 2.58), (x, 3.1))
        _arrow(ax, (x, 3.6), (step + (index - 1) * 0.9, 4.2))
    _cell(ax, step, 4.45, "Concat(head$_1$, …, head$_h$)   ($T \\times h d_v$)", "#fde9c9", width=4.6, height=0.5)
    _cell(
        ax,
        step,
        5.4,
        f"$\\cdot\\, W^O$   ($h d_v \\times {d_model}$)   →   output ($T \\times {d_model}$)",
        "#f6d6d6",
        width=5.6,
        height=0.5,
    )
    _arrow(ax, (step, 4.7), (step, 5.15))
    ax.text(
        2 * step + 1.5,
        2.3,
        "each head attends\nin its own $d_k = d_{\\mathrm{model}}/h$\nfeatures, with its own\nweights",
        ha="left",
        va="center",
        fontsize=8.5,
        color="#555555",
    )
    ax.text(
        2 * step + 1.5,
        1.1,
        "each $W_i^Q$, $W_i^K$, $W_i^V$ is\n$d_{\\mathrm{model}} \\times d_k$: a slice of one\n"
        "$d_{\\mathrm{model}} \\times d_{\\mathrm{model}}$ matrix",
        ha="left",
        va="center",
        fontsize=8.5,
        color="#555555",
    )
    ax.text(
        2 * step + 1.5,
        4.9,
        "$W^O$ mixes the heads and\nreturns to the model's width,\nso the output can be added to $X$",
        ha="left",
        va="center",
        fontsize=8.5,
        color="#555555",
    )
    ax.set_xlim(-1.5, 2 * step + 4.0)
    ax.set_ylim(-1.0, 5.8)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def draw_bahdanau_luong(path: Path) -> None:
    """One decoder step of Bahdanau et al. next to one of Luong et al.: what is scored, when, and where it goes."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 7.0))
    feeding = "#b05050"  # input feeding, an option of Luong's decoder: dashed, in red
    annotation, state, attention, output = "#dbe9f6", "#fde9c9", "#ead9f2", "#f6d6d6"
    # Bahdanau: the previous state is the query; the context enters the recurrent step
    ax = left
    _cell(ax, 0.0, 0.0, "$s_{i-1}$", state, width=1.0)
    _cell(ax, 2.6, 0.0, "$h_1 \\dots h_S$", annotation, width=1.5)
    _cell(ax, 1.3, 1.3, "$e_{ij} = v^\\top \\tanh(W s_{i-1} + U h_j)$", attention, width=3.6)
    _arrow(ax, (0.0, 0.3), (0.6, 1.05))
    _arrow(ax, (2.6, 0.3), (2.0, 1.05))
    _cell(ax, 1.3, 2.4, "$\\alpha_i = \\mathrm{softmax}(e_i)$,  $c_i = \\sum_j \\alpha_{ij} h_j$", attention, width=3.9)
    _arrow(ax, (1.3, 1.6), (1.3, 2.1))
    ax.annotate(  # the annotations are also the values that c_i averages
        "",
        xy=(3.2, 2.1),
        xytext=(3.35, 0.15),
        arrowprops=dict(arrowstyle="-|>", color="#445566", connectionstyle="arc3,rad=0.3"),
    )
    _cell(ax, 0.6, 3.7, "$s_i = \\mathrm{GRU}([E y_{i-1}; c_i],\\, s_{i-1})$", state, width=3.5)
    _arrow(ax, (1.3, 2.7), (1.0, 3.4))
    ax.annotate(
        "",
        xy=(-0.6, 3.4),
        xytext=(-0.5, 0.0),
        arrowprops=dict(arrowstyle="-|>", color="#445566", connectionstyle="arc3,rad=-0.35"),
    )
    _cell(ax, 0.6, 5.0, "$p(y_i) = \\mathrm{softmax}(W_o [s_i; c_i; E y_{i-1}])$", output, width=4.3)
    _arrow(ax, (0.6, 4.0), (0.6, 4.7))
    # the previous letter's embedding: read by the recurrent step and, directly, by the output layer
    _cell(ax, -1.7, 2.4, "$E y_{i-1}$", state, width=1.0)
    _arrow(ax, (-1.45, 2.7), (-1.17, 3.55))
    ax.annotate(
        "",
        xy=(-1.3, 4.7),
        xytext=(-1.95, 2.7),
        arrowprops=dict(arrowstyle="-|>", color="#445566", connectionstyle="arc3,rad=-0.25"),
    )
    ax.annotate(
        "",
        xy=(2.3, 4.7),
        xytext=(3.1, 2.55),
        arrowprops=dict(arrowstyle="-|>", color="#445566", connectionstyle="arc3,rad=0.3"),
    )
    ax.text(3.2, 3.8, "$c_i$", ha="left", va="center", fontsize=9, color="#445566")
    ax.text(
        1.3,
        -2.2,
        "query: the previous state $s_{i-1}$\ncontext: computed before the recurrent step,\nand fed into it",
        ha="center",
        va="center",
        fontsize=9,
        color="#555555",
    )
    ax.set_title("Bahdanau et al. (Chapter 2)", fontsize=11)
    # Luong: the recurrent step first, then attention from the current state; with input feeding (optional,
    # dashed) h~_t also enters the next step, so the GRU reads [E y_{t-1}; h~_{t-1}]
    ax = right
    _cell(ax, 0.4, 0.0, "$h_t = \\mathrm{GRU}(E y_{t-1},\\, h_{t-1})$", state, width=3.0)
    ax.add_patch(
        FancyBboxPatch(
            (0.45, -1.6),
            1.8,
            0.75,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor="#ffffff",
            edgecolor=feeding,
            linestyle="--",
            linewidth=1.2,
        )
    )
    ax.text(1.35, -1.225, "previous step:\n$\\tilde h_{t-1}$", ha="center", va="center", fontsize=10)
    # what the GRU always reads: the previous letter's embedding and the previous state
    _cell(ax, -0.3, -1.225, "$E y_{t-1}$", state, width=1.0)
    _arrow(ax, (-0.3, -0.925), (-0.3, -0.3))
    _cell(ax, -1.75, -1.225, "$h_{t-1}$", state, width=0.9)
    _arrow(ax, (-1.55, -0.925), (-0.95, -0.3))
    ax.annotate(
        "",
        xy=(1.1, -0.3),
        xytext=(1.1, -0.8),
        arrowprops=dict(arrowstyle="-|>", color=feeding, linestyle="--", linewidth=1.2),
    )
    ax.text(
        2.4,
        -1.2,
        "input feeding (optional):\nthen the GRU reads\n$[E y_{t-1}; \\tilde h_{t-1}]$",
        ha="left",
        va="center",
        fontsize=9,
        color=feeding,
    )
    _cell(ax, 3.3, 1.3, "$\\bar h_1 \\dots \\bar h_S$", annotation, width=1.5)
    _cell(ax, 1.0, 1.3, "$\\mathrm{score}(h_t, \\bar h_s)$", attention, width=2.3)
    _arrow(ax, (0.7, 0.3), (0.9, 1.05))
    _arrow(ax, (2.55, 1.3), (2.15, 1.3))
    _cell(ax, 1.0, 2.4, "$a_t = \\mathrm{softmax}$,  $c_t = \\sum_s a_t(s)\\, \\bar h_s$", attention, width=3.6)
    _arrow(ax, (1.0, 1.6), (1.0, 2.1))
    _arrow(ax, (3.3, 1.6), (2.65, 2.1))  # the annotations are also the values that c_t averages
    _cell(ax, 1.0, 3.7, "$\\tilde h_t = \\tanh(W_c [c_t; h_t])$", state, width=3.0)
    _arrow(ax, (1.0, 2.7), (1.0, 3.4))
    ax.annotate(
        "",
        xy=(-0.3, 3.45),
        xytext=(-0.5, 0.3),
        arrowprops=dict(arrowstyle="-|>", color="#445566", connectionstyle="arc3,rad=-0.35"),
    )
    _cell(ax, 1.0, 5.0, "$p(y_t) = \\mathrm{softmax}(W_s \\tilde h_t)$", output, width=3.2)
    _arrow(ax, (1.0, 4.0), (1.0, 4.7))
    ax.add_patch(
        FancyBboxPatch(
            (3.5, 3.325),
            1.6,
            0.75,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor="#ffffff",
            edgecolor=feeding,
            linestyle="--",
            linewidth=1.2,
        )
    )
    ax.text(4.3, 3.7, "next step:\n$h_{t+1}$", ha="center", va="center", fontsize=10)
    ax.annotate(
        "",
        xy=(3.45, 3.7),
        xytext=(2.55, 3.7),
        arrowprops=dict(arrowstyle="-|>", color=feeding, linestyle="--", linewidth=1.2),
    )
    ax.text(
        4.3,
        4.6,
        "input feeding (optional):\n$\\tilde h_t$ joins the\nnext step's input",
        ha="center",
        va="center",
        fontsize=9,
        color=feeding,
    )
    ax.text(
        1.3,
        -2.2,
        "query: the current state $h_t$\ncontext: computed after the recurrent step,\nand "
        "combined with it for the output",
        ha="center",
        va="center",
        fontsize=9,
        color="#555555",
    )
    ax.set_title("Luong et al. (this chapter)", fontsize=11)
    for ax in (left, right):
        ax.set_xlim(-2.3, 5.4)
        ax.set_ylim(-2.7, 5.6)
        ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def _stack(ax, x, y, width, blocks, repeat_label, label_side="left"):
    """Boxes from the bottom up, each (label, colour, height), inside a frame marked ``N ×``; returns
    the box centres."""
    centres, top = [], y
    for label, colour, height in blocks:
        _cell(ax, x, top + height / 2, label, colour, width=width, height=height)
        centres.append(top + height / 2)
        top += height + 0.25
    frame = FancyBboxPatch(
        (x - width / 2 - 0.25, y - 0.2),
        width + 0.5,
        top - y + 0.15,
        boxstyle="round,pad=0.02,rounding_size=0.15",
        facecolor="none",
        edgecolor="#888888",
        linewidth=1.0,
        linestyle="--",
    )
    ax.add_patch(frame)
    label_x = x - width / 2 - 0.4 if label_side == "left" else x + width / 2 + 0.4
    ax.text(
        label_x,
        (y + top) / 2,
        repeat_label,
        ha="right" if label_side == "left" else "left",
        va="center",
        fontsize=10,
        color="#555555",
    )
    for lower, upper, (_, _, height_low), (_, _, height_up) in zip(centres, centres[1:], blocks, blocks[1:]):
        _arrow(ax, (x, lower + height_low / 2), (x, upper - height_up / 2))
    return centres, top


def draw_transformer(path: Path) -> None:
    """The whole model: an encoder stack and a decoder stack, each layer's sub-layers with residual + LayerNorm."""
    fig, ax = plt.subplots(figsize=(9, 7.4))
    width, add_norm = 2.6, ("add & LayerNorm", "#f2f2f2", 0.45)
    encoder = [("multi-head self-attention", "#dbe9f6", 0.6), add_norm, ("feed-forward", "#e3f1dc", 0.6), add_norm]
    decoder = [
        ("masked multi-head\nself-attention", "#fde9c9", 0.75),
        add_norm,
        ("multi-head cross-attention\n(keys, values: encoder)", "#ead9f2", 0.75),
        add_norm,
        ("feed-forward", "#e3f1dc", 0.6),
        add_norm,
    ]
    ex, dx, base = 0.0, 4.6, 1.4
    for x, label in ((ex, "source tokens"), (dx, "target tokens, shifted right (<bos> y₁ y₂ …)")):
        ax.text(x, -0.5, label, ha="center", va="center", fontsize=9)
        _cell(ax, x, 0.3, "embedding × √d_model\n+ positional encoding", "#eeeeee", width=width, height=0.6)
        _arrow(ax, (x, -0.3), (x, 0.0))
        _arrow(ax, (x, 0.6), (x, base))
    enc_centres, enc_top = _stack(ax, ex, base, width, encoder, "N ×")
    dec_centres, dec_top = _stack(ax, dx, base, width, decoder, "× N", label_side="right")
    for centres, blocks, x in ((enc_centres, encoder, ex), (dec_centres, decoder, dx)):  # the residual paths
        for sub, norm in zip(centres[0::2], centres[1::2]):
            ax.annotate(
                "",
                xy=(x + width / 2, norm),
                xytext=(x + width / 2, sub - 0.45),
                arrowprops=dict(arrowstyle="-|>", color="#b05050", linewidth=0.9, connectionstyle="arc3,rad=-0.5"),
            )
    ax.text(ex + width / 2 + 0.55, enc_centres[0], "residual", fontsize=8, color="#b05050", rotation=90, va="center")
    memory_y = enc_top + 0.3
    ax.text(ex, memory_y, "encoder output (memory)", ha="center", va="center", fontsize=9, color="#7a4d99")
    _arrow(ax, (ex, enc_top - 0.1), (ex, memory_y - 0.15))
    ax.annotate(
        "",
        xy=(dx - width / 2, dec_centres[2]),
        xytext=(ex + 1.0, memory_y),
        arrowprops=dict(arrowstyle="-|>", color="#7a4d99", linewidth=1.2, connectionstyle="arc3,rad=-0.2"),
    )
    _cell(ax, dx, dec_top + 0.5, "linear → softmax:\nnext-token probabilities", "#f6d6d6", width=width, height=0.6)
    _arrow(ax, (dx, dec_top - 0.1), (dx, dec_top + 0.2))
    ax.text(ex, enc_top + 1.5, "encoder", ha="center", fontsize=11, fontweight="bold", color="#2f5d8a")
    ax.text(dx, dec_top + 1.2, "decoder", ha="center", fontsize=11, fontweight="bold", color="#8a6d3b")
    ax.set_xlim(-2.6, dx + 2.2)
    ax.set_ylim(-0.8, dec_top + 1.5)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def draw_families(path: Path) -> None:
    """Who may attend to whom in the three families: encoder-only, decoder-only, encoder-decoder."""
    n = 5
    full, causal = np.ones((n, n)), np.tril(np.ones((n, n)))
    enc_dec = np.zeros((2 * n, 2 * n))
    enc_dec[:n, :n] = 1  # encoder: every source position sees every source position
    enc_dec[n:, :n] = 0.6  # cross-attention: every target position sees the whole source
    enc_dec[n:, n:] = causal  # decoder self-attention: causal
    panels = (
        ("encoder-only (BERT)\nall positions", full),
        ("decoder-only (GPT)\ncausal", causal),
        ("encoder-decoder (BART, T5)\nsource | target", enc_dec),
    )
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 3.3), gridspec_kw={"width_ratios": [1, 1, 2]})
    for ax, (title, mask) in zip(axes, panels):
        ax.imshow(mask, cmap="Blues", vmin=0, vmax=1.2)
        ax.set_xticks(np.arange(-0.5, len(mask), 1), minor=True)
        ax.set_yticks(np.arange(-0.5, len(mask), 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        ax.set(title=title, xlabel="key position", ylabel="query position")
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def draw_two_blocks(path: Path) -> None:
    """Chapter 7's pre-LN decoder layer beside today's; red notes name the four changes."""
    fig, ax = plt.subplots(figsize=(10, 6.4))
    width, changed = 3.8, "#c0392b"
    old = [
        ("LayerNorm", "#f2f2f2", 0.5),
        ("masked multi-head attention\n(4 heads, own keys and values)", "#fde9c9", 0.8),
        ("LayerNorm", "#f2f2f2", 0.5),
        ("ReLU feed-forward (2 matrices)", "#e3f1dc", 0.6),
    ]
    new = [
        ("RMSNorm", "#f2f2f2", 0.5),
        (
            "masked grouped-query attention\n(4 query heads, 2 kv heads;\nq, k rotated by position)",
            "#fde9c9",
            0.95,
        ),
        ("RMSNorm", "#f2f2f2", 0.5),
        ("SwiGLU feed-forward (3 matrices)", "#e3f1dc", 0.6),
    ]
    ox, nx, base = 0.0, 5.6, 1.5
    inputs = ((ox, "token embedding\n+ learned position table"), (nx, "token embedding\n(no position vector)"))
    for x, label in inputs:
        ax.text(x, -0.45, "characters", ha="center", va="center", fontsize=9)
        _cell(ax, x, 0.45, label, "#eeeeee", width=width, height=0.7)
        _arrow(ax, (x, -0.3), (x, 0.1))
        _arrow(ax, (x, 0.8), (x, base))
    old_centres, old_top = _stack(ax, ox, base, width, old, "N ×")
    new_centres, new_top = _stack(ax, nx, base, width, new, "N ×")
    for centres, x in ((old_centres, ox), (new_centres, nx)):  # residual: around norm + sub-layer
        for norm, sub in zip(centres[0::2], centres[1::2]):
            ax.annotate(
                "",
                xy=(x + width / 2, sub + 0.4),
                xytext=(x + width / 2, norm - 0.3),
                arrowprops=dict(arrowstyle="-|>", color="#b05050", linewidth=0.9, connectionstyle="arc3,rad=0.5"),
            )
    ax.text(ox + width / 2 + 0.45, old_centres[0] + 0.5, "residual", fontsize=8, color="#b05050", rotation=90)
    for x, top, norm, title in (
        (ox, old_top, "LayerNorm", "Chapter 7's layer (pre-LN)"),
        (nx, new_top, "RMSNorm", "today's layer (Llama-style)"),
    ):
        _cell(ax, x, top + 0.45, f"{norm} → linear:\nnext-character probabilities", "#f6d6d6", width=width, height=0.65)
        _arrow(ax, (x, top - 0.1), (x, top + 0.12))
        ax.text(x, top + 1.1, title, ha="center", fontsize=11, fontweight="bold", color="#2f5d8a")
    notes = (
        (0.45, "② rotary positions\n(in attention instead)"),
        (new_centres[0], "① RMSNorm"),
        (new_centres[1], "② rotary positions\n③ grouped-query"),
        (new_centres[2], "① RMSNorm"),
        (new_centres[3], "④ SwiGLU"),
        (new_top + 0.45, "① RMSNorm"),
    )
    for y, note in notes:
        ax.text(nx + width / 2 + 0.6, y, note, va="center", fontsize=9, color=changed)
    ax.set_xlim(ox - 2.8, nx + 4.2)
    ax.set_ylim(-0.8, max(old_top, new_top) + 1.4)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


FIGURES_TO_DRAW = {
    "families.svg": draw_families,
    "additive_attention.svg": draw_additive_attention,
    "roadmap.svg": draw_roadmap,
    "encoder_decoder.svg": draw_encoder_decoder,
    "self_attention.svg": draw_self_attention,
    "multi_head.svg": draw_multi_head,
    "transformer.svg": draw_transformer,
    "bahdanau_luong.svg": draw_bahdanau_luong,
    "two_blocks.svg": draw_two_blocks,
}


if __name__ == "__main__":
    FIGURES.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES_TO_DRAW.items():
        draw(FIGURES / name)
        print("wrote", FIGURES / name)
