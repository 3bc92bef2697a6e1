"""The demo model's training corpus: inference prose, computed facts, and the Jargon File.

Everything here is deterministic given the seed, so `python -m worker.training.train` rebuilds the
same corpus on any machine that has Debian's `jargon-text` package installed. No Django, no torch.
"""

import gzip
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

from worker.training.corpus_prose import ANSWERS, EXPLANATIONS

# Debian package `jargon-text` (Jargon File 4.4.7, Eric S. Raymond et al., public domain).
JARGON_PATH = Path("/usr/share/doc/jargon-text/jargon.txt.gz")

BOS = "<|begin|>"
EOS = "<|end|>"
PAD = "<|pad|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = [PAD, BOS, EOS, *ROLE_TOKENS]

# The Jinja template shipped in tokenizer_config.json; chat_render below is its Python twin, and a
# test checks that the two agree so training text matches what apply_chat_template produces.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def chat_render(*, messages: list[dict[str, str]], add_generation_prompt: bool = False) -> str:
    """The text CHAT_TEMPLATE renders for `messages` (roles system, user, assistant)."""
    text = BOS
    for message in messages:
        text += f"<|{message['role']}|>\n{message['content']}{EOS}\n"
    if add_generation_prompt:
        text += "<|assistant|>\n"
    return text


@dataclass(frozen=True)
class ModelShape:
    """A published model's shape, from its config.json on its maker's model card."""

    name: str
    params: float  # parameters, count
    layers: int
    heads: int
    kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class Gpu:
    """A GPU's datasheet figures (NVIDIA product pages): dense bf16 tensor FLOP/s, HBM bytes/s."""

    name: str
    memory_gb: float
    bandwidth_tb_s: float
    bf16_tflops: float


MODELS = [
    ModelShape("Llama 2 7B", 6.74e9, 32, 32, 32, 128),
    ModelShape("Llama 3 8B", 8.03e9, 32, 32, 8, 128),
    ModelShape("Mistral 7B", 7.24e9, 32, 32, 8, 128),
    ModelShape("Qwen2.5 7B", 7.62e9, 28, 28, 4, 128),
    ModelShape("Qwen2.5 0.5B", 0.49e9, 24, 14, 2, 64),
    ModelShape("Llama 3 70B", 70.6e9, 80, 64, 8, 128),
]

GPUS = [
    Gpu("A100 80GB", 80, 2.039, 312),
    Gpu("H100 SXM", 80, 3.35, 989),
    Gpu("H200", 141, 4.8, 989),
    Gpu("L4", 24, 0.3, 121),
]

PRECISIONS = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def number_words(value: float) -> str:
    """A number written the way the prose writes it: grouped digits, at most three significant."""
    if value >= 100:
        return f"{round(value):,}"
    if value >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def article(word: str) -> str:
    """'a' or 'an' before `word`, by how its first letter or digit is spoken (an H100, an 8B)."""
    return "an" if word[0] in "aeiouAEFHILMNORSX8" else "a"


def params_words(params: float) -> str:
    """A parameter count as words, e.g. 8.03 billion."""
    return f"{number_words(params / 1e9)} billion"


def fact_weights(rng: random.Random) -> tuple[str, str]:
    model = rng.choice(MODELS)
    precision = rng.choice(list(PRECISIONS))
    gigabytes = model.params * PRECISIONS[precision] / 1e9
    question = f"How much memory do the weights of {model.name} take in {precision}?"
    answer = (
        f"{model.name} has about {params_words(model.params)} parameters. In {precision} each "
        f"parameter takes {number_words(PRECISIONS[precision])} bytes, so the weights need about "
        f"{number_words(gigabytes)} GB."
    )
    return question, answer


def fact_kv_per_token(rng: random.Random) -> tuple[str, str]:
    model = rng.choice(MODELS)
    precision = rng.choice(["bf16", "fp8"])
    per_token = 2 * model.layers * model.kv_heads * model.head_dim * PRECISIONS[precision]
    context = rng.choice([1024, 2048, 4096, 8192, 32768])
    batch = rng.choice([1, 8, 16, 32, 64])
    total_gb = per_token * context * batch / 1e9
    question = (
        f"How large is the KV cache of {model.name} for {batch} sequences of {context:,} tokens "
        f"in {precision}?"
    )
    answer = (
        f"{model.name} has {model.layers} layers and {model.kv_heads} KV heads of size "
        f"{model.head_dim}. One token needs 2 x {model.layers} x {model.kv_heads} x "
        f"{model.head_dim} x {number_words(PRECISIONS[precision])} bytes, which is "
        f"{round(per_token):,} bytes, or {number_words(per_token / 1024)} KiB. For {batch} "
        f"sequences of {context:,} tokens the cache holds about {number_words(total_gb)} GB."
    )
    return question, answer


def fact_prefill_flops(rng: random.Random) -> tuple[str, str]:
    model = rng.choice(MODELS)
    gpu = rng.choice(GPUS)
    tokens = rng.choice([100, 500, 1000, 2000, 4000, 8000])
    flops = 2 * model.params * tokens
    seconds = flops / (gpu.bf16_tflops * 1e12 * 0.5)
    question = (
        f"How long does {article(str(tokens))} {tokens:,}-token prefill take for {model.name} on "
        f"one {gpu.name}?"
    )
    answer = (
        f"A forward pass costs about two FLOPs per parameter per token, so "
        f"{article(str(tokens))} {tokens:,}-token prompt on a "
        f"{params_words(model.params).replace(' ', '-')}-parameter model costs about "
        f"{number_words(flops / 1e12)} TFLOPs. At half of the {gpu.name}'s "
        f"{number_words(gpu.bf16_tflops)} dense bf16 TFLOP/s, the prefill takes about "
        f"{number_words(seconds * 1000)} ms."
    )
    return question, answer


def fact_decode_floor(rng: random.Random) -> tuple[str, str]:
    model = rng.choice(MODELS[:5])
    gpu = rng.choice(GPUS)
    precision = rng.choice(["bf16", "fp8", "int4"])
    weight_bytes = model.params * PRECISIONS[precision]
    seconds = weight_bytes / (gpu.bandwidth_tb_s * 1e12)
    question = (
        f"What is the fastest decode step for {model.name} in {precision} on "
        f"{article(gpu.name)} {gpu.name}?"
    )
    answer = (
        f"Every decode step reads all the weights once: about {number_words(weight_bytes / 1e9)} "
        f"GB for {model.name} in {precision}. The {gpu.name} reads about "
        f"{number_words(gpu.bandwidth_tb_s)} TB/s, so one step takes at least "
        f"{number_words(seconds * 1000)} ms, at most about {number_words(1 / seconds)} tokens per "
        f"second for a single sequence."
    )
    return question, answer


def fact_ridge(rng: random.Random) -> tuple[str, str]:
    gpu = rng.choice(GPUS)
    ridge = gpu.bf16_tflops / gpu.bandwidth_tb_s
    question = (
        f"What arithmetic intensity makes a kernel compute bound on {article(gpu.name)} "
        f"{gpu.name}?"
    )
    answer = (
        f"The {gpu.name} does about {number_words(gpu.bf16_tflops)} TFLOP/s in bf16 and reads "
        f"about {number_words(gpu.bandwidth_tb_s)} TB/s from memory. The ratio is about "
        f"{number_words(ridge)} FLOPs per byte: a kernel below that is memory bound, above it "
        f"compute bound. Decoding at batch one does about one FLOP per byte."
    )
    return question, answer


def fact_max_batch(rng: random.Random) -> tuple[str, str]:
    model = rng.choice(MODELS[:5])
    gpu = rng.choice(GPUS[:3])
    context = rng.choice([2048, 4096, 8192])
    weights_gb = model.params * 2 / 1e9
    per_sequence_gb = 2 * model.layers * model.kv_heads * model.head_dim * 2 * context / 1e9
    sequences = math.floor((gpu.memory_gb * 0.9 - weights_gb) / per_sequence_gb)
    question = (
        f"How many {context:,}-token sequences of {model.name} fit on one {gpu.name} in bf16?"
    )
    answer = (
        f"Keep about ten percent of the {number_words(gpu.memory_gb)} GB free, and the weights "
        f"take {number_words(weights_gb)} GB. Each sequence of {context:,} tokens needs "
        f"{number_words(per_sequence_gb)} GB of KV cache, so about {sequences:,} sequences fit."
    )
    return question, answer


def fact_latency(rng: random.Random) -> tuple[str, str]:
    ttft_ms = rng.choice([80, 150, 200, 350, 500, 900])
    tpot_ms = rng.choice([10, 15, 20, 25, 40, 60])
    tokens = rng.choice([50, 100, 200, 256, 500])
    e2e_s = (ttft_ms + tpot_ms * (tokens - 1)) / 1000
    question = (
        f"A request has a TTFT of {ttft_ms} ms and a TPOT of {tpot_ms} ms. How long do "
        f"{tokens} output tokens take?"
    )
    answer = (
        f"End-to-end latency is TTFT plus TPOT for each token after the first: {ttft_ms} ms plus "
        f"{tokens - 1} x {tpot_ms} ms, about {number_words(e2e_s)} seconds. The user reads at "
        f"about {number_words(1000 / tpot_ms)} tokens per second once the answer starts."
    )
    return question, answer


def fact_speculative(rng: random.Random) -> tuple[str, str]:
    acceptance = rng.choice([0.5, 0.6, 0.7, 0.8, 0.9])
    k = rng.choice([2, 3, 4, 5, 8])
    expected = (1 - acceptance ** (k + 1)) / (1 - acceptance)
    question = (
        f"With speculative decoding, a draft proposes {k} tokens and each is accepted with "
        f"probability {acceptance}. How many tokens does one step yield?"
    )
    answer = (
        f"The expected number of tokens per verification step is (1 - a^(k+1)) / (1 - a) with "
        f"a = {acceptance} and k = {k}, which is about {number_words(expected)} tokens, against "
        f"one token per step without a draft."
    )
    return question, answer


def fact_blocks(rng: random.Random) -> tuple[str, str]:
    block_size = rng.choice([8, 16, 32])
    tokens = rng.randint(20, 3000)
    blocks = math.ceil(tokens / block_size)
    wasted = blocks * block_size - tokens
    question = (
        f"How many KV blocks of {block_size} tokens does {article(str(tokens))} {tokens:,}-token "
        f"sequence need?"
    )
    answer = (
        f"It needs {tokens:,} divided by {block_size}, rounded up: {blocks:,} blocks. The last "
        f"block has {wasted} empty slots, the only memory paging wastes for this sequence."
    )
    return question, answer


FACTS = [
    fact_weights,
    fact_kv_per_token,
    fact_prefill_flops,
    fact_decode_floor,
    fact_ridge,
    fact_max_batch,
    fact_latency,
    fact_speculative,
    fact_blocks,
]


def jargon_paragraphs(*, path: Path = JARGON_PATH) -> list[str]:
    """The Jargon File's prose paragraphs, reflowed to single lines, ASCII punctuation."""
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: install Debian's public-domain Jargon File with "
            "`apt-get install jargon-text`"
        )
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    for fancy, plain in {"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'",
                         "\u2014": " - ", "\u2013": "-", "\u00b7": "", "\u2026": "..."}.items():
        text = text.replace(fancy, plain)
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines()]
        joined = " ".join(line for line in lines if line)
        joined = re.sub(r"[{}]", "", joined)
        # Headwords, index lines and box drawings are short or non-ASCII; keep running prose.
        if len(joined) < 200 or not joined.isascii() or joined.startswith(":"):
            continue
        paragraphs.append(joined)
    return paragraphs


def corpus_documents(
    *, seed: int = 0, facts: int = 6000, jargon_path: Path = JARGON_PATH
) -> list[str]:
    """Every training document as text, shuffled with `seed`; special tokens already in place."""
    rng = random.Random(seed)
    documents = []
    for _ in range(4):  # The course's own prose is small: repeat it so it outweighs the File.
        for topic, paragraphs in EXPLANATIONS.items():
            documents.append(BOS + "\n\n".join(paragraphs) + EOS)
            documents.append(chat_render(messages=[
                {"role": "user", "content": f"Tell me about {topic}."},
                {"role": "assistant", "content": " ".join(paragraphs[:2])},
            ]))
    for questions, answer in ANSWERS:
        for _ in range(6):
            for question in questions:
                documents.append(chat_render(messages=[
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": answer},
                ]))
    for _ in range(facts):
        question, answer = rng.choice(FACTS)(rng)
        if rng.random() < 0.7:
            documents.append(chat_render(messages=[
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
            ]))
        else:
            documents.append(BOS + answer + EOS)
    documents.extend(BOS + paragraph + EOS for paragraph in jargon_paragraphs(path=jargon_path))
    rng.shuffle(documents)
    return documents
