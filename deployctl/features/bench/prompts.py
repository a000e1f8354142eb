"""Prompts of a given length, and how tokens are counted.

No model tokenizer is downloaded (the hub is not reachable from where deployctl runs, and the weights sit on the
servers). Instead:

* a prompt of N input tokens is N - CHAT_TEMPLATE_TOKENS common English words drawn from WORDS: lower-case words
  that byte-level BPE vocabularies (DeepSeek's, Qwen's) hold as one token each, with their leading space, so a
  real engine counts about one token per word; the chat template adds a few tokens per message (role markers),
  CHAT_TEMPLATE_TOKENS for the one user message;
* every prompt starts differently (seeded per request), so a prefix cache cannot make later requests cheaper;
  unless the point asks for a shared prefix of T tokens (`--shared-prefix`): then every prompt of the point
  starts with the same T - CHAT_TEMPLATE_TOKENS words (the chat template's tokens come first and are shared too)
  and differs after them. The prefix is written into the dataset here: AIPerf's own --prompt-prefix-pool-size /
  --prompt-prefix-length apply to its synthetic prompts only (AIPerf 0.13 drops them for an --input-file
  dataset, aiperf/config/flags/_converter_dataset.py _apply_dataset_type);
* the numbers in the results are the server's own (`usage.prompt_tokens` / `usage.completion_tokens`, AIPerf's
  --use-server-token-count), so the input length measured is the engine's count, whatever the prompt became;
* AIPerf still wants a tokenizer to load its dataset: it gets a word-level one built here (`write_tokenizer`,
  HF tokenizers format, one token per whitespace-separated word), never a download.

The simulated cluster's stand-in engines count the same way: one token per word of the prompt plus 4 per chat
message (tests/fakecluster/fake_bin/openai_fake.py), so a point of N input tokens is N tokens there exactly.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

CHAT_TEMPLATE_TOKENS = 4       # role markers and turn separators the chat template adds to one user message

WORDS = tuple("""
the of and to in is was for on are with as his they be at one have this from or had by word but what some we
can out other were all there when up use your how said an each she which do their time if will way about many
then them write would like so these her long make thing see him two has look more day could go come did number
sound no most people my over know water than call first who may down side been now find any new work part take
get place made live where after back little only round man year came show every good me give our under name very
through just form sentence great think say help low line differ turn cause much mean before move right boy old
too same tell does set three want air well also play small end put home read hand port large spell add even land
here must big high such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found answer school grow study
still learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start
might story saw far sea draw left late run while press close night real life few north open seem together next
white children begin got walk example ease paper group always music those both mark often letter until mile river
car feet care second book carry took science eat room friend began idea fish mountain stop once base hear horse
cut sure watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird
soon body dog family direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king space heard best
hour better true during hundred five remember step early hold west ground interest reach fast verb sing listen six
table travel less morning ten simple several toward war lay against pattern slow center love person money serve
appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine
note wait plan figure star box noun field rest correct able pound done beauty drive stood contain front teach week
final gave green quick develop ocean warm free minute strong special mind behind clear tail produce fact street inch
""".split())


def prompt_words(input_tokens: int) -> int:
    """Words in a prompt meant to be `input_tokens` tokens long (at least one)."""
    return max(1, int(input_tokens) - CHAT_TEMPLATE_TOKENS)


def make_prompt(input_tokens: int, seed: int) -> str:
    """A prompt of about `input_tokens` tokens; the seed makes each request's prompt differ from its first word."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(prompt_words(input_tokens)))


def shared_words(input_tokens: int, shared_prefix: int) -> int:
    """Words every prompt starts with for a shared prefix of `shared_prefix` tokens (the chat template's tokens
    first), leaving at least one word that differs."""
    if shared_prefix <= 0:
        return 0
    return max(0, min(int(shared_prefix) - CHAT_TEMPLATE_TOKENS, prompt_words(input_tokens) - 1))


def write_dataset(path: Path, input_tokens: int, output_tokens: int, count: int, seed: int,
                  shared_prefix: int = 0) -> Path:
    """AIPerf's single_turn JSONL: `count` different prompts, each asking for `output_tokens` tokens; with
    `shared_prefix`, all starting with the same words (`shared_words`)."""
    n = shared_words(input_tokens, shared_prefix)
    prefix = make_prompt(n + CHAT_TEMPLATE_TOKENS, seed * 100003 - 1).split() if n else []
    with path.open("w") as f:
        for i in range(count):
            rest = make_prompt(input_tokens - n, seed * 100003 + i)
            f.write(json.dumps({"text": " ".join(prefix + [rest]) if prefix else rest,
                                "output_length": int(output_tokens)}) + "\n")
    return path


def write_tokenizer(directory: Path) -> Path:
    """A word-level tokenizer in the HF format (tokenizer.json + tokenizer_config.json) that AIPerf loads from the
    directory, so it never asks the hub for the model's. The token counts in the results are the server's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    directory.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")          # decodes word ids back to space-separated words
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 10_000_000,
        "clean_up_tokenization_spaces": False}, indent=1) + "\n")
    return directory
