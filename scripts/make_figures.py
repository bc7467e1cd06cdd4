"""Draw the course's static figures into chapters/figures/.

Run from the repository root after changing a figure:

    .venv/bin/python scripts/make_figures.py

Figures that show results are drawn inside the chapter notebooks instead, from the run.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
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
]


def draw_roadmap(path: Path) -> None:
    """A left-to-right chain of chapter boxes, each naming what it adds."""
    fig, ax = plt.subplots(figsize=(12, 3.0))
    width, height, gap = 1.5, 1.9, 0.22
    for index, (number, title, adds) in enumerate(CHAPTERS):
        x = index * (width + gap)
        colour = "#dbe9f6" if index == 0 else ("#fde9c9" if index < 3 else "#e3f1dc")
        box = FancyBboxPatch((x, 0), width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                             facecolor=colour, edgecolor="#445566", linewidth=1.0)
        ax.add_patch(box)
        ax.text(x + width / 2, height - 0.2, f"Chapter {number}", ha="center", va="center",
                fontsize=8.5, color="#445566")
        ax.text(x + width / 2, height - 0.62, title, ha="center", va="center",
                fontsize=9, fontweight="bold")
        ax.text(x + width / 2, 0.45, adds, ha="center", va="center", fontsize=8)
        if index < len(CHAPTERS) - 1:
            arrow = FancyArrowPatch((x + width, height / 2), (x + width + gap, height / 2),
                                    arrowstyle="-|>", mutation_scale=10, color="#445566")
            ax.add_patch(arrow)
    ax.text(0, -0.25, "recurrent models", fontsize=8, color="#8a6d3b")
    ax.text(3 * (width + gap), -0.25, "attention without recurrence", fontsize=8, color="#3c6e2f")
    ax.set_xlim(-0.05, len(CHAPTERS) * (width + gap))
    ax.set_ylim(-0.4, height + 0.05)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def _cell(ax, x, y, label, colour, width=0.8, height=0.6):
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=colour, edgecolor="#445566", linewidth=1.0))
    ax.text(x, y, label, ha="center", va="center", fontsize=10)


def _arrow(ax, start, end, colour="#445566", style="-|>"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=10, color=colour,
                                 linewidth=1.0, shrinkA=0, shrinkB=0))


def draw_encoder_decoder(path: Path) -> None:
    """The Chapter 1 model: a GRU reads the source into c; a GRU writes the target from c."""
    fig, ax = plt.subplots(figsize=(10, 3.4))
    source, target = ["d", "e", "c", "a"], ["a", "c", "e", "d", "<eos>"]
    step = 1.2
    for j, token in enumerate(source):  # encoder
        x = j * step
        _cell(ax, x, 1.0, f"$h_{j + 1}$", "#dbe9f6")
        ax.text(x, 0.0, f"$x_{j + 1}$ = {token}", ha="center", va="center", fontsize=9)
        _arrow(ax, (x, 0.2), (x, 0.7))
        if j:
            _arrow(ax, (x - step + 0.4, 1.0), (x - 0.4, 1.0))
    c_x = len(source) * step + 0.3
    _cell(ax, c_x, 1.0, "$c$", "#f6d6d6", width=0.7)
    _arrow(ax, ((len(source) - 1) * step + 0.4, 1.0), (c_x - 0.35, 1.0))
    start = c_x + 1.3
    for i, token in enumerate(target):  # decoder
        x = start + i * step
        _cell(ax, x, 1.0, f"$s_{i + 1}$", "#fde9c9")
        previous = "<bos>" if i == 0 else target[i - 1]
        ax.text(x, 0.0, previous, ha="center", va="center", fontsize=9)
        _arrow(ax, (x, 0.2), (x, 0.7))
        ax.text(x, 2.05, token, ha="center", va="center", fontsize=9, fontweight="bold")
        _arrow(ax, (x, 1.3), (x, 1.85))
        source_x = c_x + 0.35 if i == 0 else x - step + 0.4
        _arrow(ax, (source_x, 1.0), (x - 0.4, 1.0))
        # c reaches every decoder step (Cho et al. 2014), drawn as a dashed arc from above
        ax.annotate("", xy=(x - 0.15, 1.3), xytext=(c_x, 1.3),
                    arrowprops=dict(arrowstyle="-|>", color="#b05050", linestyle="--", linewidth=0.8,
                                    connectionstyle="arc3,rad=-0.25"))
    ax.text(1.5 * step, 2.05, "encoder: reads the source", ha="center", fontsize=9, color="#2f5d8a")
    ax.text(c_x, 0.35, "context\nvector", ha="center", va="center", fontsize=8, color="#b05050")
    ax.text(start + 2 * step, -0.55, "decoder: reads the previous output token, writes the next",
            ha="center", fontsize=9, color="#8a6d3b")
    ax.set_xlim(-0.6, start + len(target) * step - 0.4)
    ax.set_ylim(-0.8, 2.9)
    ax.set_axis_off()
    fig.savefig(path, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


FIGURES_TO_DRAW = {
    "roadmap.svg": draw_roadmap,
    "encoder_decoder.svg": draw_encoder_decoder,
}


if __name__ == "__main__":
    FIGURES.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES_TO_DRAW.items():
        draw(FIGURES / name)
        print("wrote", FIGURES / name)
