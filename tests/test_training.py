"""attnbook.training: fit, evaluate, History, count_parameters, warmup_schedule."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from attnbook import data, tasks
from attnbook.rnn import Seq2Seq
from attnbook.training import History, count_parameters, evaluate, fit, train_on_tensors, warmup_schedule


def tiny_task(n=32, batch_size=8, seed=0):
    examples = tasks.reversal_task(n, 2, 5, seed=seed)
    src_vocab, tgt_vocab = data.build_vocabs(examples)
    batches = data.Batches(examples, src_vocab, tgt_vocab, batch_size=batch_size, shuffle=True)
    return batches, src_vocab, tgt_vocab


def tiny_model(src_vocab, tgt_vocab, seed=0):
    torch.manual_seed(seed)
    return Seq2Seq.build(len(src_vocab), len(tgt_vocab), embed_dim=8, hidden_size=32)


def test_loss_decreases_and_valid_metrics_present():
    batches, sv, tv = tiny_task()
    model = tiny_model(sv, tv)
    history = fit(model, batches, batches, epochs=5, lr=1e-2, progress=False)
    losses = history["train_loss"]
    assert losses[-1] < 0.8 * losses[0]
    for key in ("valid_loss", "teacher_forced_accuracy", "exact_match"):
        assert all(0.0 <= value for value in history[key])
    assert 0.0 <= history.last["teacher_forced_accuracy"] <= 1.0
    assert 0.0 <= history.last["exact_match"] <= 1.0
    assert model.training  # fit leaves the model in training mode


def test_history_api():
    batches, sv, tv = tiny_task()
    history = fit(tiny_model(sv, tv), batches, epochs=2, progress=False)
    assert isinstance(history, History) and len(history) == 2
    assert history["epoch"] == [1, 2]
    assert history["valid_loss"] == [None, None]  # no validation data
    assert set(history.as_dict()) == {
        "epoch",
        "train_loss",
        "valid_loss",
        "teacher_forced_accuracy",
        "exact_match",
        "seconds",
        "lr",
    }
    assert history.as_dict()["train_loss"] == history["train_loss"]
    assert history[0]["epoch"] == 1 and history[-1] == history.last
    assert history.last["epoch"] == 2 and history.last["seconds"] > 0
    assert history.last["lr"] == pytest.approx(1e-3)
    assert repr(history).startswith("History(2 epochs; last: train_loss ")
    with pytest.raises(KeyError, match="unknown history key 'acc'"):
        history["acc"]
    assert repr(History()) == "History(0 epochs)"
    steps_per_epoch = len(list(batches))
    assert len(history.step_losses) == 2 * steps_per_epoch  # one loss per optimizer step
    first_epoch = history.step_losses[:steps_per_epoch]
    assert min(first_epoch) <= history["train_loss"][0] <= max(first_epoch)


def test_evaluate_matches_a_direct_computation():
    batches, sv, tv = tiny_task()
    model = tiny_model(sv, tv)
    fit(model, batches, epochs=3, lr=1e-2, progress=False)
    batch = data.make_batch(batches.examples, sv, tv)
    metrics = evaluate(model, [batch])
    model.eval()
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in).logits
    loss = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=0)
    real = batch.tgt_out != 0
    accuracy = ((logits.argmax(-1) == batch.tgt_out) & real).sum() / real.sum()
    assert metrics["valid_loss"] == pytest.approx(loss.item(), rel=1e-5)
    assert metrics["teacher_forced_accuracy"] == pytest.approx(accuracy.item())
    assert set(metrics) == {"valid_loss", "teacher_forced_accuracy", "exact_match"}


def test_exact_match_is_one_for_a_model_that_learned():
    examples = tasks.reversal_task(16, 2, 4, seed=3)
    sv, tv = data.build_vocabs(examples)
    batch = [data.make_batch(examples, sv, tv)]
    torch.manual_seed(0)
    model = Seq2Seq.build(len(sv), len(tv), embed_dim=16, hidden_size=64)
    history = fit(model, batch, batch, epochs=50, lr=1e-2, progress=False)
    assert history.last["exact_match"] == 1.0
    assert history.last["teacher_forced_accuracy"] == 1.0


def test_pad_positions_do_not_change_the_loss():
    batches, sv, tv = tiny_task()
    model = tiny_model(sv, tv).eval()
    batch = data.make_batch(batches.examples[:4], sv, tv)
    base = evaluate(model, [batch])["valid_loss"]
    extra = torch.zeros(4, 3, dtype=torch.long)  # three more pad columns on the target
    padded = data.Batch(
        batch.src, torch.cat([batch.tgt_in, extra], 1), torch.cat([batch.tgt_out, extra], 1), batch.examples
    )
    assert evaluate(model, [padded])["valid_loss"] == pytest.approx(base, rel=1e-6)


def test_gradients_are_clipped():
    batches, sv, tv = tiny_task(n=8)
    model = tiny_model(sv, tv)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    fit(model, [next(iter(batches))], epochs=1, optimizer=optimizer, clip=1e-3, progress=False)
    step = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    assert step.norm() == pytest.approx(1e-3, rel=1e-2)  # the SGD step is the clipped gradient


def test_no_clipping_with_clip_none():
    batches, sv, tv = tiny_task(n=8)
    model = tiny_model(sv, tv)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    fit(model, [next(iter(batches))], epochs=1, optimizer=optimizer, clip=None, progress=False)
    step = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    assert step.norm() > 1e-2


def test_scheduler_is_stepped_after_every_batch():
    batches, sv, tv = tiny_task(n=32, batch_size=8)  # 4 batches per epoch
    model = tiny_model(sv, tv)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    history = fit(model, batches, epochs=2, optimizer=optimizer, scheduler=scheduler, progress=False)
    assert history["lr"] == pytest.approx([0.1 / 5, 0.1 / 9])


def test_label_smoothing_is_passed_through():
    batches, sv, tv = tiny_task(n=8)
    batch = [next(iter(batches))]
    plain = fit(tiny_model(sv, tv), batch, epochs=1, progress=False)
    smooth = fit(tiny_model(sv, tv), batch, epochs=1, label_smoothing=0.5, progress=False)
    assert smooth.last["train_loss"] != pytest.approx(plain.last["train_loss"], rel=1e-3)


def test_progress_false_prints_nothing(capsys):
    batches, sv, tv = tiny_task(n=8)
    fit(tiny_model(sv, tv), batches, batches, epochs=2, progress=False)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_progress_true_prints_one_line_per_epoch(capsys):
    batches, sv, tv = tiny_task(n=8)
    fit(tiny_model(sv, tv), batches, batches, epochs=3, progress=True)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 3 and captured.err == ""
    assert lines[0].startswith("epoch 1/3  train_loss ")
    assert "valid_loss" in lines[2] and "exact_match" in lines[2] and lines[2].endswith(" s")


def test_progress_auto_is_quiet_when_not_interactive(capsys, monkeypatch):
    batches, sv, tv = tiny_task(n=8)
    monkeypatch.delenv("ATTNBOOK_QUIET", raising=False)
    fit(tiny_model(sv, tv), batches, epochs=1)  # pytest captures stdout: not a terminal
    assert capsys.readouterr().out == ""
    monkeypatch.setattr("attnbook.training._stdout_is_tty", lambda: True)
    fit(tiny_model(sv, tv), batches, epochs=1)
    assert capsys.readouterr().out.startswith("epoch 1/1")
    monkeypatch.setenv("ATTNBOOK_QUIET", "1")
    fit(tiny_model(sv, tv), batches, epochs=1)
    assert capsys.readouterr().out == ""


def test_count_parameters():
    model = Seq2Seq.build(12, 10, embed_dim=8, hidden_size=16, bidirectional=False)
    expected = sum(p.numel() for p in model.parameters())
    assert count_parameters(model) == expected
    model.encoder.embedding.weight.requires_grad_(False)
    assert count_parameters(model) == expected - 12 * 8


def test_errors():
    batches, sv, tv = tiny_task(n=8)
    model = tiny_model(sv, tv)
    with pytest.raises(ValueError, match="epochs must be a positive int, got 0"):
        fit(model, batches, epochs=0)
    with pytest.raises(ValueError, match="train gave no batches"):
        fit(model, [], epochs=1)
    with pytest.raises(ValueError, match="train gave no batches"):
        fit(model, iter([]), epochs=1)
    with pytest.raises(ValueError, match="one-shot iterator"):
        fit(model, iter(list(batches)), epochs=2)
    with pytest.raises(ValueError, match="clip must be a positive"):
        fit(model, batches, epochs=1, clip=0)
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\)"):
        fit(model, batches, epochs=1, label_smoothing=1.5)
    other = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(other, lambda step: 1.0)
    with pytest.raises(ValueError, match="scheduler was built on a different optimizer"):
        fit(model, batches, epochs=1, scheduler=scheduler)
    with pytest.raises(ValueError, match="evaluate got no batches"):
        evaluate(model, [])


def test_teacher_forced_accuracy_counts_real_target_tokens_only():
    """A model that is right only where the target is padding scores 0, not the padding's share."""
    batches, sv, tv = tiny_task()
    batch = data.make_batch(batches.examples, sv, tv)
    assert (batch.tgt_out == 0).any()  # there is padding to miscount

    class RightOnPaddingOnly(torch.nn.Module):
        pad_id = 0

        def forward(self, src, tgt_in):
            wrong = (batch.tgt_out + 1) % len(tv)  # (B, T): never the target
            guess = torch.where(batch.tgt_out == 0, 0, torch.where(wrong == 0, 1, wrong))
            return SimpleNamespace(logits=F.one_hot(guess, len(tv)).float())  # (B, T, V)

    metrics = evaluate(RightOnPaddingOnly(), [batch], decode=False)
    assert metrics["teacher_forced_accuracy"] == 0.0


def test_evaluate_without_decoding_gives_no_exact_match_and_the_same_loss():
    batches, sv, tv = tiny_task()
    model = tiny_model(sv, tv)
    decoded, skipped = evaluate(model, batches), evaluate(model, batches, decode=False)
    assert skipped["exact_match"] is None and decoded["exact_match"] is not None
    assert skipped["valid_loss"] == pytest.approx(decoded["valid_loss"])
    history = fit(model, batches, batches, epochs=1, decode=False, progress=False)
    assert history.last["exact_match"] is None and history.last["teacher_forced_accuracy"] is not None


def test_warmup_schedule_is_the_papers():
    """lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), step from 1: peak 6.99e-4 at step 4000."""
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([parameter], lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_schedule(optimizer, d_model=512, warmup=4000)
    rates = []
    for _ in range(8000):
        rates.append(optimizer.param_groups[0]["lr"])  # the rate of the next optimizer step
        optimizer.step()
        scheduler.step()
    paper = [512**-0.5 * min(step**-0.5, step * 4000**-1.5) for step in range(1, 8001)]
    assert rates == pytest.approx(paper, rel=1e-12)
    assert max(range(8000), key=rates.__getitem__) + 1 == 4000
    assert rates[3999] == pytest.approx(6.99e-4, abs=5e-7)
    assert rates[0] == pytest.approx(512**-0.5 * 4000**-1.5)  # the first step is not zero
    half = torch.optim.SGD([parameter], lr=0.5)  # the optimizer's lr scales the schedule
    assert warmup_schedule(half, 512, 4000).get_last_lr()[0] == pytest.approx(0.5 * rates[0])
    with pytest.raises(ValueError, match="warmup must be a positive int, got 0"):
        warmup_schedule(optimizer, 512, 0)


def test_train_on_tensors_fits_a_small_classifier_and_is_repeatable():
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(200, 4, generator=generator)
    targets = (inputs.sum(dim=1) > 0).long()

    def run():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        last = train_on_tensors(model, inputs, targets, F.cross_entropy, epochs=30, lr=1e-2, batch_size=20)
        return model, last

    model, last = run()
    assert not model.training and last < 0.3
    assert (model(inputs).argmax(-1) == targets).float().mean() > 0.95
    assert run()[1] == last
    with pytest.raises(ValueError, match="len\\(inputs\\)=200 but len\\(targets\\)=3"):
        train_on_tensors(model, inputs, targets[:3], F.cross_entropy, epochs=1)
