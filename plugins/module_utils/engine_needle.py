# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The needle test's parts, standard library only: passphrases planted at fractional depths of a
filler text of a chosen token length must all come back, in order.

- :func:`make_passphrases`, :class:`FillerText`, :func:`build_needle_prompt`: the prompt, sized with
  the engine's tokenizer or :func:`estimate_tokens`;
- :func:`check_passphrases`: the reply's check;
- :class:`Needle`: one test from its options to its check, as the smoke checks (engine_checks) and
  the benchmark (engine_bench) run it.
"""

from __future__ import annotations

import bisect
import math
import random

from ansible_collections.sparkfold.cluster.plugins.module_utils.engine_errors import shorten

DEFAULT_DEPTHS = (0.1, 0.5, 0.9)

# Estimate used when the server has no /tokenize: about 4 characters per token, the usual figure
# for English prose with the BPE tokenizers of current models (DeepSeek's included).
CHARS_PER_TOKEN = 4.0

_ADJECTIVES = (
    "amber", "brisk", "cobalt", "dusky", "ember", "fallow", "gilded", "hollow", "ivory", "jade", "kindled",
    "lunar", "misty", "nimble", "ochre", "pale", "quiet", "russet", "silver", "tawny", "umber", "velvet",
    "woven", "young", "zealous", "copper", "scarlet", "frosted", "hidden", "sunlit",
)
_NOUNS = (
    "falcon", "harbor", "lantern", "meadow", "orchid", "pebble", "quarry", "river", "saddle", "thistle",
    "valley", "willow", "anchor", "beacon", "canyon", "delta", "ember", "fjord", "glacier", "heron",
    "island", "juniper", "kestrel", "lagoon", "marble", "nectar", "otter", "prairie", "summit", "tundra",
)
_VERBS = (
    "follows", "crosses", "watches", "circles", "passes", "reaches", "leaves", "finds", "guards", "joins",
    "shelters", "outlines", "borders", "greets", "echoes",
)
_PLACES = (
    "old mill", "northern ridge", "quiet station", "stone bridge", "harbor wall", "eastern field",
    "market square", "forest edge", "river bend", "lighthouse", "orchard gate", "mountain pass",
)
_TAILS = (
    "before the evening bell", "while the wind turns west", "as the tide comes in", "under a grey sky",
    "long after the rain", "without a sound", "at the first light", "in the late afternoon",
)


def estimate_tokens(text):
    """Token estimate without a tokenizer: ceil(characters / 4)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def make_passphrases(count, seed=0):
    """``count`` distinct passphrases like ``amber-falcon-42``, the same for the same seed.

    Each is one whitespace-free word, so it survives any tokenizer and the simple parsers of the
    lab engine.
    """
    rng = random.Random(f"sparkfold-passphrases-{seed}")
    seen = []
    while len(seen) < count:
        word = f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}-{rng.randint(10, 99)}"
        if word not in seen:
            seen.append(word)
    return seen


class FillerText:
    """An endless, deterministic supply of plain filler sentences (no digits, no passphrases)."""

    def __init__(self, seed=0):
        self.rng = random.Random(f"sparkfold-filler-{seed}")
        self.words = []
        self.ends = []  # word counts at which a sentence ends

    def _sentence(self):
        rng = self.rng
        return (
            f"The {rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)} {rng.choice(_VERBS)} the "
            f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)} near the {rng.choice(_PLACES)} {rng.choice(_TAILS)}."
        )

    def take(self, n):
        """The first ``n`` words (a list), generating more sentences when needed."""
        while len(self.words) < n:
            self.words.extend(self._sentence().split())
            self.ends.append(len(self.words))
        return self.words[:n]

    def boundary(self, position):
        """The sentence end closest to word ``position`` (0 for the very start)."""
        if position <= 0 or not self.ends:
            return 0
        i = bisect.bisect_left(self.ends, position)
        candidates = [0] + [self.ends[j] for j in (i - 1, i) if 0 <= j < len(self.ends)]
        return min(candidates, key=lambda end: (abs(end - position), end))


NEEDLE_INTRO = (
    "Below is a long text. A few of its sentences each hold a passphrase. Read all of it; a question "
    "follows at the end.\n\n"
)
NEEDLE_QUESTION = (
    "\n\nQuestion: which passphrases does the text above contain? Reply with every passphrase, "
    "exactly as written, in the order they appear in the text, separated by commas, and nothing else."
)


class NeedlePrompt:
    """A built needle prompt: ``text``, ``tokens`` (as counted), ``target_tokens``, ``passphrases``,
    ``depths`` (asked) and ``positions`` (the filler word each passphrase sentence follows)."""

    def __init__(self, text, tokens, target_tokens, passphrases, depths, positions, filler_words, rounds):
        self.text = text
        self.tokens = tokens
        self.target_tokens = target_tokens
        self.passphrases = list(passphrases)
        self.depths = list(depths)
        self.positions = list(positions)
        self.filler_words = filler_words
        self.rounds = rounds

    @property
    def error(self):
        """Relative difference between the tokens counted and the target."""
        return abs(self.tokens - self.target_tokens) / max(self.target_tokens, 1)


def _assemble(filler, n_words, depths, passphrases, prefix=""):
    words = filler.take(n_words)
    positions = [filler.boundary(round(d * n_words)) for d in depths]
    positions = [min(p, n_words) for p in positions]
    order = sorted(range(len(passphrases)), key=lambda i: (positions[i], i))
    parts = [NEEDLE_INTRO]
    at = 0
    for i in order:
        if positions[i] > at:
            parts.append(" ".join(words[at:positions[i]]))
            at = positions[i]
        parts.append(f"Remember this passphrase: {passphrases[i]}.")
    if at < n_words:
        tail = " ".join(words[at:n_words])
        parts.append(tail if tail.endswith(".") else tail + ".")
    text = " ".join(p for p in parts[1:] if p)
    return prefix + parts[0] + text + NEEDLE_QUESTION, positions


def build_needle_prompt(target_tokens, depths, passphrases, count_tokens, seed=0, tolerance=0.01, max_rounds=8,
                        prefix=""):
    """A prompt of ``target_tokens`` tokens with ``passphrases`` planted at fractional ``depths``.

    The prompt is one user message: an intro, filler sentences with one sentence
    ``Remember this passphrase: WORD.`` per passphrase inserted at the sentence boundary nearest
    to its depth (0.0 = start of the filler, 1.0 = end), then the question.

    ``count_tokens(text) -> int`` counts tokens: the engine's tokenizer (``EngineClient.tokenize``,
    which counts the text without the chat template, a few tokens less than the request's
    ``prompt_tokens``) or :func:`estimate_tokens` when the server has no /tokenize. The filler is
    sized by the secant method on word counts, calling ``count_tokens`` a few times (at most
    ``max_rounds`` + 2), until the count is exactly ``target_tokens``, no word more or less can get
    closer, or the rounds run out; the closest prompt is returned (a :class:`NeedlePrompt`; its
    ``error`` is usually far below ``tolerance``). ``prefix`` goes first, counted with the rest (the
    benchmark's nonce, so that no prompt cache holds the prompt). Raises ValueError on bad input or when
    the question and passphrases alone exceed the target.
    """
    depths = [float(d) for d in depths]
    if len(depths) != len(passphrases):
        raise ValueError(f"{len(passphrases)} passphrases but {len(depths)} depths")
    if any(not 0.0 <= d <= 1.0 for d in depths):
        raise ValueError(f"depths are fractions of the prompt, from 0.0 to 1.0; got {depths}")
    target_tokens = int(target_tokens)
    filler = FillerText(seed)

    def measure(n):
        text, positions = _assemble(filler, n, depths, passphrases, prefix)
        return text, positions, int(count_tokens(text))

    text0, pos0, base = measure(0)
    if base > target_tokens:
        raise ValueError(
            f"the question and {len(passphrases)} passphrases alone take {base} tokens, more than the "
            f"target of {target_tokens}"
        )
    best = (abs(base - target_tokens), 0, text0, pos0, base)
    rounds = 1
    if base < target_tokens:
        # Rate of tokens per filler word, from a sample of the filler.
        sample = 2000
        rate = max(count_tokens(" ".join(filler.take(sample))) / sample, 1e-3)
        rounds += 1
        prev = (0, base)
        tried = {0}
        n = max(1, round((target_tokens - base) / rate))
        for _round in range(max_rounds):
            text, positions, tokens = measure(n)
            tried.add(n)
            rounds += 1
            if abs(tokens - target_tokens) < best[0]:
                best = (abs(tokens - target_tokens), n, text, positions, tokens)
            if tokens == target_tokens:
                break
            if n != prev[0] and tokens != prev[1]:
                rate = min(max((tokens - prev[1]) / (n - prev[0]), 0.05), 20.0)
            next_n = max(0, n + round((target_tokens - tokens) / rate))
            if next_n in tried:
                break  # less than one word away, or oscillating between two counts: the closest is kept
            prev = (n, tokens)
            n = next_n
    _diff, n_best, text, positions, tokens = best
    return NeedlePrompt(text, tokens, target_tokens, passphrases, depths, positions, n_best, rounds)


def check_passphrases(reply, passphrases):
    """(passed, detail): every passphrase appears in ``reply`` and they appear in order."""
    low = (reply or "").lower()
    found = []
    missing = []
    for word in passphrases:
        at = low.find(word.lower())
        if at < 0:
            missing.append(word)
        else:
            found.append((at, word))
    if missing:
        return False, (f"{len(passphrases) - len(missing)} of {len(passphrases)} passphrases returned; missing "
                       f"{', '.join(missing)}; reply {shorten(reply)!r}")
    order = [word for _at, word in sorted(found)]
    if order != list(passphrases):
        return False, (f"all {len(passphrases)} passphrases returned but out of order: expected "
                       f"{', '.join(passphrases)}, got {', '.join(order)}")
    return True, f"all {len(passphrases)} passphrases returned in order"


def depths_for(count, depths=None):
    """The depths to use: ``depths`` when given (its length must be ``count``), else evenly 0.1..0.9."""
    if depths:
        if count is not None and len(depths) != count:
            raise ValueError(f"needle_count is {count} but needle_depths has {len(depths)} entries")
        return [float(d) for d in depths]
    if count is None:
        return list(DEFAULT_DEPTHS)
    if count == 1:
        return [0.5]
    return [round(0.1 + 0.8 * i / (count - 1), 4) for i in range(count)]


class Needle:
    """One needle test: ``passphrases`` at ``depths`` (from ``count`` and ``depths``, see :func:`depths_for`),
    a prompt of ``target_tokens`` tokens (:meth:`build`, ``prefix`` first), one greedy request (:meth:`ask`),
    its check.

    Raises ValueError on depths that do not match the count.
    """

    def __init__(self, target_tokens, count=None, depths=None, seed=0, prefix=""):
        self.target_tokens = int(target_tokens)
        self.seed = seed
        self.prefix = prefix
        self.depths = depths_for(count, depths)
        self.passphrases = make_passphrases(len(self.depths), seed)
        self.prompt = None

    def fit(self, max_tokens, context):
        """Raise ValueError when the prompt and a ``max_tokens`` reply cannot fit ``context`` (None: unknown)."""
        if context and self.target_tokens + max_tokens > context:
            raise ValueError(
                f"a {self.target_tokens}-token prompt plus a {max_tokens}-token reply does not fit the engine's "
                f"context of {context} tokens; lower needle_tokens or raise the engine's context")

    def build(self, count_tokens):
        """The prompt (a NeedlePrompt), sized with ``count_tokens``; see :func:`build_needle_prompt`."""
        self.prompt = build_needle_prompt(self.target_tokens, self.depths, self.passphrases, count_tokens,
                                          seed=self.seed, prefix=self.prefix)
        return self.prompt

    def ask(self, client, max_tokens, extra=None, deadline=None):
        """Send the prompt (greedy, streamed); the StreamResult. EngineError when the engine cannot be asked."""
        return client.ask(self.prompt.text, max_tokens, 0.0, extra, deadline)

    def check(self, reply):
        """(passed, detail) of ``reply``: see :func:`check_passphrases`."""
        return check_passphrases(reply, self.passphrases)
