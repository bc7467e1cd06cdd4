"""A tiny scripted model that follows the model protocol, for checking decoding functions."""

import torch

from attnbook.exercises._wording import describe, kind_of
from attnbook.protocol import Step


class RunawayDecoding(RuntimeError):
    """Raised by :class:`ScriptedSeq2Seq` when decoding goes on far past ``max_len``."""


class _ScriptedState:
    """The decoder state of :class:`ScriptedSeq2Seq`: the step number and the scripts."""

    def __init__(self, scripts: list, step: int):
        self.scripts = scripts
        self.step = step
        self.used = False


class ScriptedSeq2Seq:
    """A fake seq2seq model that follows the course's model protocol with fixed answers.

    Each source row has a *script*: the tokens the model predicts at steps 0, 1, 2, ...
    when it is fed back its own predictions, as greedy decoding does. A script may
    contain ``eos_id`` (tokens after it are arbitrary, as a real model's would be) or
    not (the row never ends by itself, so ``max_len`` has to stop it). If a step is fed
    a token other than the one predicted just before (or ``bos_id`` at step 0), the
    model predicts a "confused" token instead, so a loop that does not feed back its
    predictions gets wrong answers.

    Protocol (:class:`attnbook.protocol.Seq2SeqModel`):
        ``start(src (B, S) long) -> state``;
        ``step(state, prev_tokens (B,) long) -> Step(logits (B, V), new state, weights (B, S))``.

    The model also records misuse for the checker's hints: ``stale_state`` (a state was
    stepped twice), ``only_fed_bos`` (every step after the first was fed ``bos_id``) and
    ``fed_wrong_token``, the first ``(step, row, fed, predicted)`` where an unfinished
    row was fed something other than its previous prediction.

    Calling ``step`` more than ``max_steps`` times in a row raises :class:`RunawayDecoding`
    with ``runaway_hint`` in its message, so a loop that never stops fails quickly.

    Shapes:
        sources: (N, S) long, the source rows it knows; ``start`` accepts any of them,
            in any order or batch size (decoding one row at a time works too).
        scripts: N lists of token ids, each at least ``max_steps`` long.
    """

    def __init__(
        self,
        sources: torch.Tensor,
        scripts: list,
        vocab_size: int,
        bos_id: int,
        eos_id: int,
        max_steps: int,
        pad_id: int = 0,
        runaway_hint: str = "decoding should have stopped earlier",
    ):
        self.pad_id = pad_id
        self.runaway_hint = runaway_hint
        self.vocab_size = vocab_size
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.max_steps = max_steps
        self._scripts = {tuple(row.tolist()): list(script) for row, script in zip(sources, scripts)}
        self._num_src = sources.shape[1]
        self.stale_state = False
        self._fed_only_bos = True
        self.fed_wrong_token = None
        self._steps_after_first = 0

    def __call__(self, *args, **kwargs):
        raise TypeError("this model only decodes step by step: use model.start(src) and model.step(state, prev_tokens)")

    def start(self, src: torch.Tensor) -> _ScriptedState:
        """Encode ``src`` (B, S): here, look up each row's script."""
        if not isinstance(src, torch.Tensor) or src.dim() != 2:
            raise ValueError(f"model.start expects src as a (B, S) tensor, got {describe(src)}")
        scripts = []
        for row in src.tolist():
            if tuple(row) not in self._scripts:
                raise ValueError("model.start got a source row the checker did not give: pass src unchanged")
            scripts.append(self._scripts[tuple(row)])
        return _ScriptedState(scripts, step=0)

    def step(self, state: _ScriptedState, prev_tokens: torch.Tensor):
        """One decoder step: logits (B, V) whose argmax is each row's next scripted token."""
        self._check_step_inputs(state, prev_tokens)
        if state.used:
            self.stale_state = True
        state.used = True
        if state.step >= self.max_steps:
            raise RunawayDecoding(f"model.step was called {state.step + 1} times for one batch, {self.runaway_hint}")
        batch_size = len(state.scripts)
        generator = torch.Generator().manual_seed(1000 + state.step)
        logits = torch.rand(batch_size, self.vocab_size, generator=generator)  # noise in [0, 1)
        for row, script in enumerate(state.scripts):
            logits[row, self._next_token(state, row, script, int(prev_tokens[row]))] = 3.0
        weights = torch.full((batch_size, self._num_src), 1.0 / self._num_src)  # (B, S), uniform
        return Step(logits, _ScriptedState(state.scripts, state.step + 1), weights)

    def _next_token(self, state: _ScriptedState, row: int, script: list, fed: int) -> int:
        step = state.step
        right = self.bos_id if step == 0 else script[step - 1]
        if step > 0 and not self._finished(script, step):
            self._steps_after_first += 1
            if fed != self.bos_id:
                self._fed_only_bos = False
        if fed == right:
            return script[step]
        if self.fed_wrong_token is None and not self._finished(script, step):
            self.fed_wrong_token = (step, row, fed, right)
        return self._confused_token(script[step])

    def _finished(self, script: list, step: int) -> bool:
        """True if this row already predicted eos before ``step``."""
        return self.eos_id in script[:step]

    def _confused_token(self, token: int) -> int:
        """A regular token other than ``token`` (never pad, bos or eos)."""
        specials = {self.pad_id, self.bos_id, self.eos_id, token}
        return next(t for t in range(self.vocab_size - 1, -1, -1) if t not in specials)

    def _check_step_inputs(self, state, prev_tokens) -> None:
        if not isinstance(state, _ScriptedState):
            raise TypeError(
                f"model.step expects the state returned by model.start or by the previous "
                f"model.step, got {kind_of(state)}"
            )
        batch_size = len(state.scripts)
        if not isinstance(prev_tokens, torch.Tensor):
            raise TypeError(
                f"model.step expects prev_tokens as a tensor of shape ({batch_size},), got {kind_of(prev_tokens)}"
            )
        if tuple(prev_tokens.shape) != (batch_size,):
            hint = ""
            if tuple(prev_tokens.shape) == (self.vocab_size,):
                hint = " — did you take the argmax over dim=0 instead of the last dimension?"
            raise ValueError(
                f"model.step expects prev_tokens of shape ({batch_size},), one token per row, "
                f"but got shape {tuple(prev_tokens.shape)}{hint}"
            )
        if prev_tokens.is_floating_point() or prev_tokens.dtype == torch.bool:
            raise TypeError(f"model.step expects integer token ids (torch.long), got dtype {prev_tokens.dtype}")

    @property
    def only_fed_bos(self) -> bool:
        """True if, after step 0, every unfinished row was always fed ``bos_id``."""
        return self._steps_after_first > 0 and self._fed_only_bos
