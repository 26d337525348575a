# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Measurements of sparkfold.cluster.engine_bench, standard library only (runs on the head's python3).

The bench definitions (docs/bench.md):

- decode tok/s = (n - 1) / (t_last_chunk - t_first_chunk), n = completion tokens (the server's usage
  figure when it sends one, else the content chunks); TTFT = first content chunk - request sent;
- prefill tok/s = prompt tokens / TTFT;
- aggregate tok/s = total output tokens of all streams / wall time (first request sent to last
  stream finished); per-stream tok/s = median decode tok/s of the streams;
- a stream is garbled when its output is empty or a repeated token (one token, or a cycle of up to
  four, repeated to the end; or one token making up at least half of the output).

Phases (``run_*``) take an EngineClient-like object and return plain dicts (JSON-ready). Nothing
here raises on a failed request: failures are recorded in the results with their reason.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import tempfile
import threading
import time

from ansible_collections.sparkfold.cluster.plugins.module_utils import engine_checks

PHASES = ("decode", "prefill", "concurrency", "needle")

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

DEFAULT_DECODE_CASES = (
    {"name": "prose_t0.7_thinking", "prompt": "prose", "temperature": 0.7, "thinking": True},
    {"name": "prose_t0", "prompt": "prose", "temperature": 0.0, "thinking": False},
    {"name": "code_t0", "prompt": "code", "temperature": 0.0, "thinking": False},
)

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
CHARS_PER_TOKEN_ESTIMATE = 4.0


# --- statistics ---------------------------------------------------------------------------------
def summarize(values):
    """n, median, mean, min, max, stdev and spread (% of the median, (max - min) / median) of numbers.

    None values are dropped; with no values left every figure is None (n is 0).
    """
    data = sorted(float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not data:
        return {"n": 0, "median": None, "mean": None, "min": None, "max": None, "stdev": None, "spread_pct": None}
    median = statistics.median(data)
    return {
        "n": len(data),
        "median": median,
        "mean": statistics.fmean(data),
        "min": data[0],
        "max": data[-1],
        "stdev": statistics.stdev(data) if len(data) > 1 else 0.0,
        "spread_pct": (100.0 * (data[-1] - data[0]) / median) if median else None,
    }


# --- garble check -------------------------------------------------------------------------------
def garble_reason(text, min_tokens=16):
    """Why an output counts as garbled, or None when it does not.

    Empty (nothing but whitespace) is garbled. With at least ``min_tokens`` whitespace-separated
    tokens, so is an output whose last ``min_tokens`` tokens are one token or a short cycle (period
    up to 4) repeated, or in which one token makes up half or more of all tokens.
    """
    if not text or not text.strip():
        return "empty output"
    tokens = text.split()
    if len(tokens) < min_tokens:
        return None
    tail = tokens[-min_tokens:]
    for period in range(1, 5):
        if all(tail[i] == tail[i % period] for i in range(len(tail))) and len(set(tail[:period])) == period:
            if period == 1:
                return f"repeated token {tail[0][:40]!r} at the end ({min_tokens}+ times in a row)"
            return f"repeated cycle {' '.join(tail[:period])[:60]!r} at the end"
    counts = {}
    for token in tokens:
        counts[token] = counts.get(token, 0) + 1
    token, count = max(counts.items(), key=lambda item: item[1])
    if count * 2 >= len(tokens):
        return f"token {token[:40]!r} is {count} of {len(tokens)} tokens"
    return None


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
            "estimate": f"ESTIMATE ({CHARS_PER_TOKEN_ESTIMATE:g} characters per token; lengths are approximate)",
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
        return round(len(text) / CHARS_PER_TOKEN_ESTIMATE)


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


# --- progress -----------------------------------------------------------------------------------
class Progress:
    """Writes the progress of a run to a JSON file (replaced atomically) for the role to poll."""

    def __init__(self, path, total):
        self.path = path
        self.total = total
        self.done = 0
        self.started = time.time()
        self.state = {"phase": "starting", "step": "", "last": ""}
        self.write()

    def step(self, phase, step):
        self.state.update(phase=phase, step=step)
        self.write()

    def finished(self, last):
        self.done += 1
        self.state["last"] = last
        self.write()

    def write(self):
        if not self.path:
            return
        data = dict(self.state, done=self.done, total=self.total, elapsed_s=round(time.time() - self.started, 1),
                    pid=os.getpid(), updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, tmp = tempfile.mkstemp(prefix=".bench-progress.", dir=directory)
            with os.fdopen(fd, "w") as handle:
                json.dump(data, handle)
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is a courtesy; the run does not depend on it


# --- phases -------------------------------------------------------------------------------------
def thinking_extra(thinking, key="thinking", extra_body=None):
    """The extra body of a request: ``extra_body`` plus ``chat_template_kwargs: {key: thinking}``."""
    extra = dict(extra_body or {})
    if thinking is not None:
        kwargs = dict(extra.get("chat_template_kwargs") or {})
        kwargs[key] = bool(thinking)
        extra["chat_template_kwargs"] = kwargs
    return extra


def one_stream(client, messages, max_tokens, temperature, extra, deadline):
    """One streamed chat request as a dict of figures (errors recorded, never raised)."""
    started = time.monotonic()
    try:
        res = client.stream_chat(messages, max_tokens, temperature=temperature, extra=extra, deadline=deadline)
    except Exception as exc:
        return {"ok": False, "error": str(exc), "t_start": started, "t_end": time.monotonic(), "text": "",
                "completion_tokens": 0, "ttft_s": None, "decode_tok_s": None, "prompt_tokens": None,
                "finish_reason": None, "status": None}
    out = res.as_dict()
    # Thinking (reasoning_content) is timed with the content; the garble check reads both.
    reasoning = getattr(res, "reasoning", "") or ""
    out["text"] = (reasoning + "\n" + res.text) if reasoning else res.text
    out["ok"] = res.ok and res.chunks > 0
    if res.ok and res.chunks == 0 and not out.get("error"):
        out["error"] = "no content chunk in the stream"
    out["t_start"] = res.t_start
    out["t_end"] = time.monotonic()
    return out


def run_decode(client, cases, repeats, max_tokens, thinking_key="thinking", extra_body=None, deadline=None,
               progress=None, garble_min_tokens=16):
    """Single-stream decode: each case ``repeats`` times, one request at a time."""
    out = []
    for case in cases:
        prompt_kind = case.get("prompt", "prose")
        prompt = case.get("text") or PROMPTS[prompt_kind]
        extra = thinking_extra(case.get("thinking"), thinking_key, extra_body)
        runs = []
        for i in range(repeats):
            if progress:
                progress.step("decode", f"{case['name']} run {i + 1}/{repeats}")
            r = one_stream(client, [{"role": "user", "content": prompt}], max_tokens, case.get("temperature", 0.0),
                           extra, deadline)
            runs.append({
                "ok": r["ok"], "error": r.get("error"), "completion_tokens": r["completion_tokens"],
                "prompt_tokens": r["prompt_tokens"], "finish_reason": r["finish_reason"],
                "ttft_ms": None if r["ttft_s"] is None else r["ttft_s"] * 1000.0,
                "decode_tok_s": r["decode_tok_s"], "garbled": garble_reason(r["text"], garble_min_tokens),
                "text_head": r["text"][:160],
            })
            if progress:
                last = (f"decode {case['name']} run {i + 1}: {_fmt(r['decode_tok_s'])} tok/s, "
                        f"TTFT {_fmt(None if r['ttft_s'] is None else r['ttft_s'] * 1000)} ms"
                        if r["ok"] else f"decode {case['name']} run {i + 1} failed: {r.get('error')}")
                progress.finished(last)
        good = [run for run in runs if run["ok"]]
        out.append({
            "name": case["name"], "prompt": prompt_kind, "temperature": case.get("temperature", 0.0),
            "thinking": case.get("thinking"), "max_tokens": max_tokens, "runs": runs,
            "ok": len(good), "failed": len(runs) - len(good),
            "decode_tok_s": summarize(run["decode_tok_s"] for run in good),
            "ttft_ms": summarize(run["ttft_ms"] for run in good),
        })
    return out


def run_prefill(client, counter, lengths, max_tokens=4, context_length=None, extra_body=None, deadline=None,
                progress=None, nonce_seed="sparkfold"):
    """Prefill ladder: one prompt of each length (built to the token count), TTFT and prefill tok/s."""
    out = []
    for target in lengths:
        row = {"target_tokens": target, "counted_tokens": None, "prompt_tokens": None, "ttft_ms": None,
               "prefill_tok_s": None, "ok": False, "error": None, "skipped": None, "exact": counter.exact}
        out.append(row)
        if context_length and target + max_tokens > context_length:
            row["skipped"] = f"{target} + {max_tokens} tokens exceeds the server's context of {context_length}"
            if progress:
                progress.finished(f"prefill {target}: skipped ({row['skipped']})")
            continue
        if progress:
            progress.step("prefill", f"{target} tokens: building the prompt")
        nonce = f"[bench {nonce_seed} {target} {time.time_ns()}]"
        try:
            text, counted, rounds = prompt_of_tokens(target, counter.count, nonce)
        except Exception as exc:
            row["error"] = f"could not build the prompt: {exc}"
            if progress:
                progress.finished(f"prefill {target}: {row['error']}")
            continue
        row["counted_tokens"] = counted
        row["count_rounds"] = rounds
        if progress:
            progress.step("prefill", f"{target} tokens: waiting for the first token")
        try:
            res = client.stream_completion(text, max_tokens, temperature=0.0, extra=dict(extra_body or {}),
                                           deadline=deadline)
        except Exception as exc:
            row["error"] = str(exc)
            if progress:
                progress.finished(f"prefill {target}: {row['error']}")
            continue
        row["prompt_tokens"] = res.prompt_tokens if res.prompt_tokens is not None else counted
        row["prompt_tokens_source"] = "server usage" if res.prompt_tokens is not None else counter.method
        if res.ttft_s is None:
            row["error"] = res.error or "no token came back"
        else:
            row["ok"] = res.ok
            row["error"] = res.error
            row["ttft_ms"] = res.ttft_s * 1000.0
            row["prefill_tok_s"] = row["prompt_tokens"] / res.ttft_s if res.ttft_s > 0 else None
        if progress:
            if row["ttft_ms"] is None:
                progress.finished(f"prefill {target}: {row['error']}")
            else:
                progress.finished(f"prefill {target}: {row['prompt_tokens']} tokens, TTFT {_fmt(row['ttft_ms'])} ms, "
                                  f"{_fmt(row['prefill_tok_s'])} tok/s")
    return out


def run_concurrency_point(client, streams, prompt, max_tokens, temperature=0.0, extra=None, deadline=None,
                          garble_min_tokens=16, raw=None):
    """``streams`` requests started together; aggregate and per-stream figures.

    ``raw``: a list to receive each stream's own figures (``one_stream`` dicts), for callers that need them.
    """
    results = [None] * streams
    barrier = threading.Barrier(streams + 1)
    messages = [{"role": "user", "content": prompt}]

    def worker(i):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        results[i] = one_stream(client, messages, max_tokens, temperature, extra, deadline)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    barrier.wait()
    for t in threads:
        t.join()
    if raw is not None:
        raw.extend(results)
    t_end = max((r["t_end"] for r in results if r), default=time.monotonic())
    wall = max(t_end - t0, 1e-9)
    completed = [r for r in results if r and r["ok"]]
    garbled = []
    for i, r in enumerate(results):
        if r and r["ok"]:
            reason = garble_reason(r["text"], garble_min_tokens)
            if reason:
                garbled.append({"stream": i, "reason": reason})
    errors = {}
    for r in results:
        if r and not r["ok"]:
            key = r.get("error") or f"status {r.get('status')}"
            errors[key] = errors.get(key, 0) + 1
    total_tokens = sum(r["completion_tokens"] or 0 for r in results if r)
    texts = {r["text"] for r in completed}
    return {
        "streams": streams, "sent": streams, "completed": len(completed),
        "garbled": len(garbled), "garbled_streams": garbled[:10],
        "errors": [{"error": k, "count": v} for k, v in sorted(errors.items())],
        "output_tokens": total_tokens, "wall_s": wall,
        "aggregate_tok_s": total_tokens / wall,
        "per_stream_tok_s": summarize(r["decode_tok_s"] for r in completed),
        "ttft_ms": summarize(None if r["ttft_s"] is None else r["ttft_s"] * 1000.0 for r in completed),
        "distinct_outputs": len(texts), "max_tokens": max_tokens, "temperature": temperature,
    }


def run_concurrency(client, grid, max_tokens, prompt_kind="prose", temperature=0.0, thinking=None,
                    thinking_key="thinking", extra_body=None, deadline=None, progress=None, garble_min_tokens=16):
    """The concurrency grid: one point per stream count, in order."""
    out = []
    extra = thinking_extra(thinking, thinking_key, extra_body)
    for streams in grid:
        if progress:
            progress.step("concurrency", f"{streams} streams")
        point = run_concurrency_point(client, streams, PROMPTS[prompt_kind], max_tokens, temperature, extra,
                                      deadline, garble_min_tokens)
        point["prompt"] = prompt_kind
        out.append(point)
        if progress:
            progress.finished(
                f"{streams} streams: {point['completed']}/{point['sent']} completed, {point['garbled']} garbled, "
                f"aggregate {_fmt(point['aggregate_tok_s'])} tok/s, per stream "
                f"{_fmt(point['per_stream_tok_s']['median'])} tok/s"
            )
    return out


def run_needle(client, counter, target_tokens, count=3, depths=None, seed=0, max_tokens=256, context_length=None,
               thinking_key="thinking", extra_body=None, deadline=None, progress=None):
    """The needle test of the smoke checks (engine_checks) at ``target_tokens``, with TTFT."""
    out = {"target_tokens": target_tokens, "prompt_tokens": None, "counted_tokens": None,
           "token_counter": counter.method, "passed": False, "found": 0, "expected": 0, "detail": None,
           "ttft_ms": None, "passphrases": [], "reply_head": None}
    if progress:
        progress.step("needle", f"{target_tokens} tokens: building the prompt")
    try:
        depths = engine_checks.depths_for(count, depths)
        phrases = engine_checks.make_passphrases(len(depths), seed)
        out["passphrases"] = phrases
        out["expected"] = len(phrases)
        out["depths"] = depths
        if context_length and target_tokens + max_tokens > context_length:
            raise ValueError(f"a {target_tokens}-token prompt plus a {max_tokens}-token reply does not fit the "
                             f"server's context of {context_length} tokens; lower the needle length")
        prompt = engine_checks.build_needle_prompt(target_tokens, depths, phrases, counter.count, seed=seed)
        out["counted_tokens"] = prompt.tokens
        if progress:
            progress.step("needle", f"{prompt.tokens} tokens: waiting for the reply")
        res = client.stream_chat([{"role": "user", "content": prompt.text}], max_tokens, temperature=0.0,
                                 extra=thinking_extra(False, thinking_key, extra_body), deadline=deadline)
    except Exception as exc:  # ValueError from the prompt builder, EngineError from the client
        out["detail"] = str(exc)
        if progress:
            progress.finished(f"needle {target_tokens}: {out['detail']}")
        return out
    out["prompt_tokens"] = res.prompt_tokens if res.prompt_tokens is not None else prompt.tokens
    out["ttft_ms"] = None if res.ttft_s is None else res.ttft_s * 1000.0
    out["reply_head"] = res.text[:300]
    if not res.ok:
        out["detail"] = res.error or f"status {res.status}"
    else:
        low = res.text.lower()
        out["found"] = sum(1 for word in phrases if word.lower() in low)
        out["passed"], out["detail"] = engine_checks.check_passphrases(res.text, phrases)
    if progress:
        progress.finished(f"needle {target_tokens}: {'PASS' if out['passed'] else 'FAIL'}: {out['detail']}")
    return out


def _fmt(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


def summary_lines(results):
    """One line per measurement of ``results`` (the module's RV(results))."""
    lines = []
    for case in results.get("decode") or []:
        d, t = case["decode_tok_s"], case["ttft_ms"]
        spread = "" if d["spread_pct"] is None else f", spread {d['spread_pct']:.1f}%"
        lines.append(f"decode {case['name']}: median {_fmt(d['median'])} tok/s ({d['n']} of {len(case['runs'])} runs"
                     f"{spread}), TTFT {_fmt(t['median'], 0)} ms")
    for row in results.get("prefill") or []:
        if row.get("skipped"):
            lines.append(f"prefill {row['target_tokens']}: skipped, {row['skipped']}")
        elif row.get("prefill_tok_s") is None:
            lines.append(f"prefill {row['target_tokens']}: failed, {row.get('error')}")
        else:
            lines.append(f"prefill {row['target_tokens']}: {row['prompt_tokens']} tokens, TTFT "
                         f"{_fmt(row['ttft_ms'], 0)} ms, {_fmt(row['prefill_tok_s'])} tok/s")
    for point in results.get("concurrency") or []:
        lines.append(f"{point['streams']} streams: {point['completed']}/{point['sent']} completed, "
                     f"{point['garbled']} garbled, aggregate {_fmt(point['aggregate_tok_s'])} tok/s, per stream "
                     f"{_fmt(point['per_stream_tok_s']['median'])} tok/s")
    needle = results.get("needle")
    if needle:
        lines.append(f"needle {needle['target_tokens']}: {'PASS' if needle['passed'] else 'FAIL'}, {needle['detail']}")
    return lines
