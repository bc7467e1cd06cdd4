"""attnbook.plot: attention heatmaps, training curves, accuracy by length."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnbook.plot import plot_accuracy_by_length, plot_history, show_attention  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _labels(tick_labels):
    return [label.get_text() for label in tick_labels]


def _weights(rows, cols):
    return torch.softmax(torch.randn(rows, cols, generator=torch.Generator().manual_seed(0)), dim=-1)


# ------------------------------------------------------------------------ show_attention


def test_show_attention_labels_axes_and_colorbar():
    weights = _weights(3, 5)
    ax = show_attention(weights, list("hello"), ["a", "b", "<eos>"], title="alignment")
    assert _labels(ax.get_xticklabels()) == list("hello")
    assert _labels(ax.get_yticklabels()) == ["a", "b", "<eos>"]
    assert ax.get_title() == "alignment"
    assert ax.get_xlabel() == "source" and ax.get_ylabel() == "output"
    image = ax.images[0]
    assert image.get_array().shape == (3, 5)
    np.testing.assert_allclose(image.get_array(), weights.numpy(), rtol=1e-6)
    assert image.get_clim() == (0.0, 1.0)
    assert len(ax.figure.axes) == 2  # the heatmap and its colorbar


def test_show_attention_accepts_arrays_strings_and_grad_tensors():
    weights = _weights(2, 3).requires_grad_()
    ax = show_attention(weights, "a b", "xy")
    assert _labels(ax.get_xticklabels()) == ["a", "␣", "b"]
    assert _labels(ax.get_yticklabels()) == ["x", "y"]
    show_attention(np.full((2, 3), 1 / 3), ["1", "2", "3"], ["x", "y"])


def test_show_attention_draws_on_the_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    ax = show_attention(_weights(2, 2), "ab", "cd", ax=right)
    assert ax is right
    assert right.images and not left.images


def test_show_attention_rotates_long_source_tokens():
    short = show_attention(_weights(2, 3), "abc", "xy")
    assert short.get_xticklabels()[0].get_rotation() == 0
    long = show_attention(_weights(2, 2), ["<bos>", "hello"], "xy")
    assert long.get_xticklabels()[0].get_rotation() == 90


def test_show_attention_shape_mismatch_message():
    with pytest.raises(ValueError) as error:
        show_attention(_weights(3, 5), list("abcde"), list("wxyz"))
    assert "weights have shape (3, 5) but there are 4 target tokens and 5 source tokens" in str(error.value)


def test_show_attention_rejects_a_batch():
    with pytest.raises(ValueError, match=r"must be 2-D .* shape \(1, 3, 5\).*weights\[0\]"):
        show_attention(torch.rand(1, 3, 5), "abcde", "xyz")


def test_show_attention_rejects_scores_outside_unit_interval():
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\].*scores instead of softmax"):
        show_attention(torch.tensor([[2.0, -1.0]]), "ab", "x")


# -------------------------------------------------------------------------- plot_history


class _FakeHistory:
    def as_dict(self):
        return {"train_loss": [2.0, 1.5, 1.2], "valid_loss": [2.1, 1.7, 1.6], "valid_exact_match": [0.1, 0.3, 0.4]}


def test_plot_history_default_plots_losses_over_epochs():
    ax = plot_history({"train_loss": [3.0, 2.0, 1.0, 0.5], "valid_loss": [3.1, 2.5, 2.0, 1.9]})
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["train_loss", "valid_loss"]
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(), [1, 2, 3, 4])
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), [3.1, 2.5, 2.0, 1.9])
    assert ax.get_xlabel() == "epoch" and ax.get_ylabel() == "loss"
    assert ax.get_legend() is not None


def test_plot_history_accepts_an_object_with_as_dict():
    ax = plot_history(_FakeHistory(), metrics="valid_exact_match")
    assert [line.get_label() for line in ax.get_lines()] == ["valid_exact_match"]
    assert ax.get_ylabel() == "value"


def test_plot_history_default_skips_a_missing_valid_loss():
    ax = plot_history({"train_loss": [1.0, 0.5]})
    assert [line.get_label() for line in ax.get_lines()] == ["train_loss"]


def test_plot_history_none_values_leave_gaps():
    ax = plot_history({"train_loss": [1.0, None, 0.5]}, metrics=["train_loss"])
    assert np.isnan(ax.get_lines()[0].get_ydata()[1])


def test_plot_history_unknown_metric_lists_available_ones():
    with pytest.raises(ValueError) as error:
        plot_history(_FakeHistory(), metrics=("train_loss", "val_loss"))
    message = str(error.value)
    assert "unknown metric 'val_loss'" in message
    assert "train_loss, valid_loss, valid_exact_match" in message


def test_plot_history_rejects_other_types():
    with pytest.raises(ValueError, match=r"history must be a dict"):
        plot_history([1.0, 2.0])


# --------------------------------------------------------------- plot_accuracy_by_length


def test_plot_accuracy_by_length_one_line_per_curve():
    curves = {
        "seq2seq": {12: 0.1, 4: 0.9, 8: 0.5},
        "attention": {4: 1.0, 8: 0.95, 12: 0.9},
    }
    ax = plot_accuracy_by_length(curves, title="exact match by length")
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["seq2seq", "attention"]
    np.testing.assert_array_equal(lines[0].get_xdata(), [4, 8, 12])  # sorted by length
    np.testing.assert_array_equal(lines[0].get_ydata(), [0.9, 0.5, 0.1])
    assert ax.get_xlabel() == "source length" and ax.get_ylabel() == "exact match"
    low, high = ax.get_ylim()
    assert low <= 0 and 1 <= high < 1.1
    assert ax.get_title() == "exact match by length"


def test_plot_accuracy_by_length_errors():
    with pytest.raises(ValueError, match=r"non-empty dict"):
        plot_accuracy_by_length({})
    with pytest.raises(ValueError, match=r"curve 'rnn' must be a dict"):
        plot_accuracy_by_length({"rnn": [0.5, 0.4]})


def test_no_function_calls_show(monkeypatch):
    monkeypatch.setattr(plt, "show", lambda *a, **k: pytest.fail("plt.show() was called"))
    show_attention(_weights(2, 2), "ab", "cd")
    plot_history({"train_loss": [1.0]})
    plot_accuracy_by_length({"a": {1: 1.0}})
