# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The prompts of sparkfold.cluster.engine_bench and their lengths, standard library only.

- :data:`PROMPTS`: the decode and concurrency prompts (a long essay, a Python module with tests);
- :func:`prompt_of_tokens`: a prefill prompt of an exact token count, unique so no prefix cache helps;
- :class:`TokenCounter`: counts with the server's /tokenize, the model's tokenizer.json, or the
  estimate of engine_needle (4 characters per token).
"""

from __future__ import annotations

import math
import os
import random

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_needle import CHARS_PER_TOKEN, estimate_tokens

PROMPTS = {
    "prose": (
        "Write a long, detailed essay about the history of lighthouses: how they were built, how their lights "
        "and lenses changed from open fires to Fresnel lenses and electric lamps, what the life of a keeper was "
        "like, and why most of them are automated today. Use full paragraphs and do not stop early."
    ),
    "code": (
        "Write a complete Python module that implements a thread-safe LRU cache with a time-to-live per entry, "
        "a decorator that memoises a function with it, type hints, docstrings and a full set of pytest unit "
        "tests. Output only the code."
    ),
}

# Filler for prompts of a given length: common English words, mostly one token each in a BPE
# vocabulary, so adding or removing a word moves the count by about one token.
FILLER_WORDS = tuple(
    " ".join([
        "the of and to in is was for on that with as by at from it this be are or an which his her their",
        "one all were when we there can more if will about up out them some so into time only other new",
        "over also after first well year work way even because good people day most us water long light",
        "house sea ship coast night lamp tower keeper stone wind storm harbour rock bright signal watch",
    ]).split()
)
PREFILL_QUESTION = "\n\nThat was a long text. Reply with the single word: ready."


# --- token counting -----------------------------------------------------------------------------
class TokenCounter:
    """Counts prompt tokens with the server's /tokenize, the model's tokenizer.json, or an estimate.

    ``method`` is "server", "tokenizer" or "estimate"; ``notes`` says why the better methods were
    not used; ``exact`` is False only for the estimate.
    """

    def __init__(self, client, wanted="auto", tokenizer_path=None):
        self.method = None
        self.notes = []
        self._client = client
        self._tokenizer = None
        order = ["server", "tokenizer", "estimate"] if wanted == "auto" else [wanted]
        for method in order:
            if getattr(self, "_try_" + method)(tokenizer_path):
                self.method = method
                break
        if self.method is None:
            raise ValueError("; ".join(self.notes) or f"token counter {wanted} is not available")

    @property
    def exact(self):
        return self.method != "estimate"

    @property
    def label(self):
        return {
            "server": "the server's /tokenize (exact)",
            "tokenizer": "the model's tokenizer.json with the tokenizers package (exact)",
            "estimate": f"ESTIMATE ({CHARS_PER_TOKEN:g} characters per token; lengths are approximate)",
        }[self.method]

    def _try_server(self, _path):
        try:
            count = self._client.tokenize("sparkfold token count probe")
        except Exception as exc:  # EngineError or anything odd: fall back, say why
            self.notes.append(f"/tokenize failed: {exc}")
            return False
        if count is None:
            self.notes.append("the server has no /tokenize")
            return False
        return True

    def _try_tokenizer(self, path):
        if not path:
            self.notes.append("no tokenizer.json path given")
            return False
        if not os.path.isfile(path):
            self.notes.append(f"tokenizer file {path} does not exist")
            return False
        try:
            from tokenizers import Tokenizer  # optional: only when the node has it
        except ImportError:
            self.notes.append(f"the tokenizers package is not installed for this python, so {path} cannot be used")
            return False
        try:
            self._tokenizer = Tokenizer.from_file(path)
        except Exception as exc:
            self.notes.append(f"tokenizers cannot load {path}: {exc}")
            return False
        return True

    def _try_estimate(self, _path):
        return True

    def count(self, text):
        if self.method == "server":
            return self._client.tokenize(text)
        if self.method == "tokenizer":
            return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        return estimate_tokens(text)


def filler_text(n_words, seed):
    """``n_words`` filler words, the same for the same seed (sentences of 8-15 words)."""
    rng = random.Random(seed)
    words = []
    while len(words) < n_words:
        length = rng.randint(8, 15)
        part = [rng.choice(FILLER_WORDS) for _i in range(length)]
        part[0] = part[0].capitalize()
        part[-1] += "."
        words.extend(part)
    return " ".join(words[:n_words])


def prompt_of_tokens(target, count, nonce, question=PREFILL_QUESTION, max_rounds=24):
    """A prompt of ``target`` tokens by ``count`` (a callable): (text, counted tokens, rounds).

    The text is ``nonce`` (makes every prompt unique, so no prefix cache helps), filler words and
    ``question``. The number of filler words is adjusted until the count is exact, or as close as
    whole words allow (then the closest count not above the target).
    """

    def make(n):
        return f"{nonce}\n{filler_text(max(n, 0), nonce)}{question}"

    base = count(make(0))
    probe_words = min(max(target // 4, 64), 4096)
    probe = count(make(probe_words))
    per_word = max((probe - base) / probe_words, 0.05)
    n = max(round((target - base) / per_word), 0)
    best = None  # (tokens, n) closest not above target
    seen = {}
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        tokens = seen.get(n)
        if tokens is None:
            tokens = seen[n] = count(make(n))
        if tokens == target:
            return make(n), tokens, rounds
        if tokens < target and (best is None or tokens > best[0]):
            best = (tokens, n)
        step = (target - tokens) / per_word
        step = int(math.copysign(max(1, abs(round(step))), step))
        nxt = max(n + step, 0)
        if nxt in seen:
            # Oscillating between two neighbours: whole words cannot hit the target exactly.
            if step > 0 or n == 0:
                break
            nxt = n - 1
            if nxt in seen:
                break
        n = nxt
    if best is None:
        best = (count(make(0)), 0)
    return make(best[1]), best[0], rounds
