"""Words to know: the terms the pages lean on, each defined in a line.

Each term has a slug so any page can link to it as /#term-<slug>.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    slug: str
    name: str
    definition: str

    @property
    def anchor(self) -> str:
        return f"term-{self.slug}"


TERMS: tuple[Term, ...] = (
    Term("inference", "Inference",
         "Running an already trained model on new input to get its output, leaving its weights "
         "unchanged. Serving means doing that for many people at once, quickly and cheaply."),
    Term("token", "Token",
         "The unit a language model reads and writes: a word, a piece of a word, a punctuation "
         "mark or a space, which the tokenizer maps to an integer id."),
    Term("latency", "Latency",
         "How long one user waits for something: the first token, each token after it, or the "
         "whole answer."),
    Term("throughput", "Throughput",
         "How much work the whole system finishes per second across all users, usually counted "
         "in tokens per second or requests per second."),
    Term("gpu", "GPU",
         "A processor with thousands of arithmetic units working in parallel and its own fast "
         "memory (HBM on most data-centre GPUs), which holds the weights and the KV cache."),
    Term("prefill", "Prefill",
         "Processing a request's prompt: in as few forward passes as each step's token budget "
         "allows (a long prompt goes in chunks), filling the KV cache and yielding the first "
         "output token. For a dense model, limited by arithmetic once the prompt is more than a "
         "few hundred tokens (an MoE's crossover comes later, scaled by its total over "
         "active parameters); shorter ones still have to read every weight "
         "once."),
    Term("decode", "Decode",
         "Every step after prefill: one forward pass that adds one token to each running "
         "sequence. Limited by how fast memory can be read: batching shares the weight reads, "
         "but attention's reads of each sequence's KV cache stay memory-bound at any batch "
         "size."),
    Term("kv-cache", "KV cache",
         "The attention keys and values of every token already processed, kept per layer and "
         "per sequence so that each new token attends to them instead of recomputing them."),
    Term("batch", "Batch",
         "The sequences that share one forward pass, so that weights read from memory once "
         "serve all of them."),
    Term("ttft", "TTFT",
         "Time to first token: from the request arriving to its first output token. Queueing, "
         "tokenization and prefill all count."),
    Term("tpot-itl", "TPOT / ITL",
         "Time per output token and inter-token latency: the gap between successive tokens of "
         "one answer. TPOT is usually the average after the first token; ITL is each gap."),
    Term("p50-p99", "p50 / p99",
         "Percentiles of latency: half of the requests are faster than p50, all but one in a "
         "hundred are faster than p99. The slow tail is what users remember."),
    Term("mfu", "MFU",
         "Model FLOPs utilisation: the floating-point operations the model strictly needs per "
         "second of wall-clock time, divided by the chip's dense peak for the number format in "
         "use (BF16, FP8, ...), not a sparse or other-format figure."),
    Term("mbu", "MBU",
         "Model bandwidth utilisation: the bytes a step must read (weights and KV cache) per "
         "second of wall-clock time, divided by the chip's peak memory bandwidth. The decode "
         "counterpart of MFU."),
    Term("goodput", "Goodput",
         "Throughput that counts only the requests that met their latency targets (TTFT and "
         "TPOT within their limits): the rate a service can actually promise."),
    Term("roofline", "Roofline",
         "A chart of a chip's limits: attainable FLOP/s is the lower of peak compute and "
         "memory bandwidth × arithmetic intensity (FLOPs per byte moved), so it shows whether "
         "a kernel is bound by compute or by memory."),
)
