"""Hand-written explanations and answers about LLM inference, the on-topic half of the corpus.

Written for this course. Each entry of EXPLANATIONS is one topic told in a few paragraphs; each
entry of ANSWERS pairs several phrasings of a learner's question with one answer, so the model
sees chat turns that end in a useful reply.
"""

EXPLANATIONS: dict[str, list[str]] = {
    "prefill and decode": [
        "Serving a language model happens in two phases. In the prefill phase the engine reads "
        "the whole prompt at once: every prompt token goes through every layer in one forward "
        "pass, the keys and values of each token are written into the KV cache, and the logits "
        "of the last position give the first output token.",
        "In the decode phase the model produces one token per forward pass. Each step feeds only "
        "the newest token, reads the keys and values of all earlier tokens from the KV cache, "
        "and appends one new key and value per layer. Decoding repeats until the model emits an "
        "end token, a stop string appears, or the request reaches its token limit.",
        "The two phases stress the hardware in opposite ways. Prefill multiplies large matrices "
        "by many tokens at once, so it is limited by arithmetic throughput. Decode multiplies the "
        "same weights by a single token per sequence, so almost all of its time goes to reading "
        "the weights and the cache from memory. That is why time to first token depends on "
        "prompt length and compute, while the time per output token depends on memory bandwidth.",
    ],
    "the kv cache": [
        "The KV cache stores the key and value vectors that attention computed for earlier "
        "tokens. Without it, every decode step would recompute attention inputs for the whole "
        "sequence, and generating n tokens would cost work that grows with the square of n. With "
        "it, each step computes keys and values for one new token and reuses the rest.",
        "Its size is easy to work out. For every token, every layer stores one key and one value "
        "for each key-value head, each of length head_dim. So the bytes per token are two times "
        "the number of layers times the number of KV heads times head_dim times the bytes per "
        "element. Multiply by the number of tokens in the context and by the batch size to get "
        "the whole cache.",
        "For long contexts and large batches the KV cache can be larger than the weights, and it "
        "is often what limits how many requests a GPU can serve at once. Grouped-query attention, "
        "a lower precision for the cache, and paging are the usual ways to make it smaller or to "
        "waste less of it.",
    ],
    "grouped-query attention": [
        "In multi-head attention every query head has its own key head and value head. "
        "Grouped-query attention lets several query heads share one key-value head. A model with "
        "32 query heads and 8 KV heads keeps a quarter of the keys and values that full "
        "multi-head attention would keep, so its KV cache is four times smaller.",
        "Multi-query attention is the extreme case with a single KV head for all query heads. "
        "Grouped-query attention sits between the two: it keeps most of the quality of full "
        "attention while saving most of the cache memory and the memory traffic of decoding.",
    ],
    "batching": [
        "A single decode step reads all the weights of the model to produce one token for one "
        "sequence. If the engine puts many sequences in the same step, it reads the weights once "
        "and produces one token for each sequence, so throughput rises almost linearly with the "
        "batch until the step stops being limited by memory bandwidth.",
        "Static batching forms a batch, runs it until every request in it has finished, and only "
        "then starts the next batch. Short requests wait for the longest one, and their slots "
        "sit idle. Continuous batching, also called in-flight batching, decides the batch again "
        "at every step: finished sequences leave at once and waiting requests join as soon as "
        "there is room, so the GPU stays busy.",
        "The scheduler of a continuous batching engine works under two limits: the maximum "
        "number of sequences running at once and a token budget per step. Decode tokens are "
        "cheap, one per running sequence. Prefill tokens are many, so long prompts are split "
        "into chunks that fit the budget and are mixed with the decodes of other requests in the "
        "same step. This is chunked prefill, and it keeps long prompts from stalling everyone "
        "else.",
    ],
    "paged attention": [
        "Paged attention manages the KV cache the way an operating system manages memory. The "
        "cache is one large pool of fixed-size blocks, each holding the keys and values of a "
        "small number of tokens, for example sixteen. Each sequence has a block table that maps "
        "its token positions to blocks, and the blocks need not be next to each other.",
        "Because blocks are allocated as a sequence grows, the engine never reserves memory for "
        "the longest possible output. The only waste is the unused tail of the last block of "
        "each sequence, less than one block per sequence. This lets far more sequences share the "
        "same GPU memory than a contiguous allocation would.",
        "A block manager keeps a free list and a reference count for every block. When a "
        "request finishes or is aborted, its blocks go back to the free list. When memory runs "
        "out, the scheduler preempts a running sequence, frees its blocks, and later recomputes "
        "its cache from the tokens it already has.",
    ],
    "prefix caching": [
        "Many requests begin with the same text: a system prompt, a few-shot template, or the "
        "earlier turns of a conversation. Prefix caching lets them share the KV cache of that "
        "common beginning. The engine hashes every full block of token ids together with the "
        "hash of the block before it, so one hash names a whole prefix.",
        "When a new request arrives, the engine looks up the hashes of its full blocks. Every "
        "block found is reused, its reference count goes up, and prefill starts after the last "
        "cached token. At least one prompt token is always computed again, because the model "
        "needs the logits of the last prompt position to choose the first output token.",
        "Cached blocks that no request uses any more are not erased at once. They stay in the "
        "pool, marked as free but still holding their contents, and are evicted only when the "
        "memory is needed for something else.",
    ],
    "quantization": [
        "Quantization stores numbers with fewer bits. Weights in bf16 take two bytes each; in "
        "int8 or fp8 they take one byte, and in a 4-bit format about half a byte plus a small "
        "overhead for scales. Since decoding is limited by reading the weights, halving their "
        "size roughly halves the time of each decode step at small batch sizes.",
        "Weight-only quantization keeps activations in higher precision and converts the weights "
        "back when they are used. Methods such as GPTQ and AWQ choose the rounding carefully so "
        "that the output of each layer changes as little as possible. Quantizing the KV cache to "
        "eight bits halves its memory and lets more sequences or longer contexts fit.",
        "Lower precision is not free. Every format adds rounding error, and the error shows up "
        "as a small drift in the logits. The practical question is whether that drift changes "
        "the answers on the tasks that matter, which is why quantized models are always checked "
        "against the original on an evaluation set.",
    ],
    "speculative decoding": [
        "Speculative decoding uses a small draft model to guess several tokens ahead and the "
        "large target model to check all of them in one forward pass. Checking k tokens costs "
        "about the same as generating one, because a decode step is limited by reading the "
        "weights, not by arithmetic.",
        "The target model accepts the draft tokens one by one. Under greedy decoding a draft "
        "token is kept when it equals the target's own choice; at the first mismatch the target "
        "token replaces it and the rest of the guess is thrown away. Under sampling, the "
        "acceptance rule of Leviathan and coauthors accepts a draft token with probability equal "
        "to the target probability divided by the draft probability, capped at one, and "
        "resamples from the difference of the two distributions on rejection. The output then "
        "follows exactly the target model's distribution.",
        "The speedup depends on how often the draft agrees with the target. If each draft token "
        "is accepted with probability a and the draft proposes k tokens, one verification step "
        "yields on average (1 - a to the power k + 1) divided by (1 - a) tokens. A fast draft "
        "that agrees often gives the largest gain.",
    ],
    "latency metrics": [
        "Time to first token, or TTFT, is the time from the arrival of a request to the moment "
        "its first output token is ready. It includes the time the request waited in the queue "
        "and the time of its prefill.",
        "Time per output token, or TPOT, is the average gap between output tokens after the "
        "first one. The list of individual gaps is the inter-token latency, ITL. End-to-end "
        "latency is the time until the last token, which is about TTFT plus TPOT times the "
        "number of output tokens minus one.",
        "Throughput counts tokens per second across all requests. Latency and throughput pull "
        "against each other: a larger batch raises throughput but makes each step slower, so "
        "every user waits longer between tokens. Service targets are therefore stated as "
        "percentiles, such as a p99 TTFT under a second at a given request rate.",
    ],
    "the roofline": [
        "The roofline model says that a kernel is limited either by compute or by memory "
        "bandwidth. Its arithmetic intensity is the number of floating point operations it does "
        "for each byte it moves. If the intensity is below the ratio of the chip's peak FLOPs to "
        "its bandwidth, memory is the limit; above it, compute is.",
        "A matrix-vector product, as in decoding with batch size one, does about two operations "
        "per weight and reads two bytes per weight in bf16, so its intensity is about one. "
        "Modern GPUs need hundreds of operations per byte to be compute bound, which is why "
        "decoding a single sequence uses a tiny fraction of the available FLOPs and why batching "
        "helps so much.",
    ],
    "gpus": [
        "A GPU has many streaming multiprocessors, each with its own registers and a small fast "
        "shared memory, all attached to a large high-bandwidth memory. Tensor cores inside each "
        "multiprocessor do small matrix multiplications very quickly, in bf16, fp8 and other "
        "low-precision formats.",
        "For inference the two numbers that matter most are memory capacity and memory "
        "bandwidth. Capacity decides whether the weights and the KV cache fit. Bandwidth decides "
        "how fast decoding can go, since every decode step reads the weights once.",
        "Kernels run as grids of thread blocks. Fusing several small operations into one kernel "
        "saves trips to memory and launch overhead; FlashAttention is the best known example, "
        "computing attention in tiles that stay in on-chip memory so the full attention matrix "
        "is never written out.",
    ],
    "parallelism": [
        "When a model does not fit on one GPU, or one GPU is too slow, its work is split. Tensor "
        "parallelism splits each weight matrix across GPUs, so every GPU holds a slice of every "
        "layer and the GPUs exchange partial results after each layer with an all-reduce. It "
        "needs a fast interconnect such as NVLink.",
        "Pipeline parallelism gives each GPU a contiguous range of layers and passes activations "
        "from one stage to the next. It needs less bandwidth but leaves stages idle unless many "
        "micro-batches are in flight. Data parallelism runs full copies of the model side by "
        "side and splits the requests among them.",
    ],
    "sampling": [
        "After the forward pass the model gives a logit for every token of the vocabulary. "
        "Greedy decoding takes the token with the highest logit. Sampling divides the logits by "
        "a temperature, turns them into probabilities with a softmax, and draws a token.",
        "Top-k sampling keeps only the k most likely tokens before drawing. Top-p sampling keeps "
        "the smallest set of tokens whose probabilities add up to at least p. A temperature "
        "below one sharpens the distribution, and a temperature of zero is treated as greedy.",
        "A seed makes sampling reproducible: with the same seed, the same prompt and the same "
        "parameters, a good engine returns the same tokens whatever other requests share the "
        "batch.",
    ],
    "streaming": [
        "Streaming sends each token to the client as soon as it is decoded, instead of waiting "
        "for the whole answer. Servers usually stream over server-sent events or a chunked HTTP "
        "response. The user sees the first words after the time to first token, not after the "
        "whole generation.",
        "When the client disconnects, the server should abort the request so that the engine "
        "frees its KV cache blocks at once and the slot goes to someone else.",
    ],
    "disaggregated serving": [
        "Disaggregated serving runs prefill and decode on different machines. Prefill workers "
        "are sized for compute, decode workers for memory bandwidth and capacity. After prefill "
        "the KV cache of the request is sent to a decode worker, which continues the generation.",
        "The benefit is that long prefills no longer interrupt decoding, so time per output "
        "token stays steady, and each pool can be scaled on its own. The cost is moving the KV "
        "cache over the network, which must be fast enough not to eat the gain.",
    ],
    "the inference engine": [
        "An inference engine has a small number of parts. The engine loop takes new requests, "
        "asks the scheduler what to run, runs one step of the model and returns the new tokens. "
        "The scheduler chooses which sequences run in the step and how many prompt tokens each "
        "may prefill. The block manager owns the KV cache blocks. The model runner packs the "
        "chosen tokens into one batch, runs the forward pass and samples the next tokens.",
        "Each sequence keeps a few counters: how many tokens it has, how many already have keys "
        "and values in the cache, and how many are scheduled in this step. Prefill, chunked "
        "prefill, prefix cache hits, decoding and preemption all become simple arithmetic on "
        "those counters.",
    ],
}

# Each entry: several ways a learner may ask, then one answer.
ANSWERS: list[tuple[list[str], str]] = [
    (
        [
            "What is the KV cache?",
            "What is a KV cache?",
            "Explain the KV cache.",
            "Why do inference engines keep a KV cache?",
            "What does the KV cache store?",
            "How does the KV cache work?",
            "Why does the KV cache save time?",
            "How big is the KV cache?",
        ],
        "The KV cache holds the key and value vectors that attention computed for the tokens a "
        "sequence already has. Each decode step computes keys and values only for the newest "
        "token and reads the rest from the cache, so the model never repeats work on earlier "
        "tokens. It costs memory: per token, two times layers times KV heads times head_dim "
        "times bytes per element.",
    ),
    (
        [
            "Explain prefill and decode.",
            "What is the difference between prefill and decode?",
            "What are the two phases of LLM inference?",
            "What happens during prefill?",
            "What is prefill?",
            "What is decode?",
            "What happens during decode?",
            "How do prefill and decode differ?",
            "Explain the prefill phase and the decode phase.",
        ],
        "Prefill processes the whole prompt in one forward pass, fills the KV cache and produces "
        "the first output token; it is limited by compute. Decode then generates one token per "
        "step, reading the weights and the KV cache each time; it is limited by memory "
        "bandwidth. Prefill sets the time to first token, decode sets the time per output token.",
    ),
    (
        [
            "What is continuous batching?",
            "Explain continuous batching.",
            "How is continuous batching different from static batching?",
            "What is in-flight batching?",
            "Why is batching faster?",
            "Why does batching raise throughput?",
            "How does batching help inference?",
            "What is batching?",
            "Explain batching.",
        ],
        "Continuous batching rebuilds the batch at every decode step. A finished request leaves "
        "at once and a waiting request joins as soon as there is room, instead of waiting for "
        "the whole batch to finish as in static batching. The GPU stays busy and throughput "
        "rises, often several times over static batching.",
    ),
    (
        [
            "What is paged attention?",
            "What is PagedAttention?",
            "Why does vLLM page the KV cache?",
            "How does a paged KV cache work?",
            "What is a KV block?",
            "How does vLLM manage KV cache memory?",
        ],
        "Paged attention stores the KV cache in fixed-size blocks from one shared pool, and each "
        "sequence keeps a block table that maps its positions to blocks. Memory is allocated "
        "block by block as the sequence grows, so the only waste is part of the last block. "
        "More sequences fit in the same memory, and blocks can be shared between requests.",
    ),
    (
        [
            "What is prefix caching?",
            "Explain prefix caching.",
            "How can requests share a system prompt in the KV cache?",
            "How does prefix caching work?",
            "Why reuse a cached prefix?",
        ],
        "Prefix caching reuses the KV cache of a shared beginning, such as a system prompt. Each "
        "full block of tokens is hashed together with the hash of the block before it. A new "
        "request that finds its block hashes in the cache reuses those blocks and only prefills "
        "the rest, which cuts its time to first token.",
    ),
    (
        [
            "What is speculative decoding?",
            "Explain speculative decoding.",
            "How does a draft model speed up decoding?",
            "How does speculative decoding work?",
            "What does the draft model do?",
            "Why is speculative decoding faster?",
            "What is a draft model?",
        ],
        "Speculative decoding lets a small draft model propose several tokens and the large "
        "target model verify them in one forward pass. Accepted tokens are kept, and at the "
        "first rejection the target supplies its own token. With the right acceptance rule the "
        "output has exactly the target model's distribution, and greedy output does not change.",
    ),
    (
        [
            "What is quantization?",
            "Why quantize a model for inference?",
            "How does quantization speed up decoding?",
            "What is int8 or fp8 quantization?",
            "Explain quantization.",
            "How does quantization work?",
        ],
        "Quantization stores weights, and sometimes activations or the KV cache, in fewer bits, "
        "for example int8, fp8 or 4-bit formats instead of bf16. The model takes less memory, "
        "and since decoding is limited by reading the weights, each step gets faster. The price "
        "is a small rounding error that must be checked on real tasks.",
    ),
    (
        [
            "What is TTFT?",
            "What is time to first token?",
            "What latency metrics matter for LLM serving?",
            "What is TPOT?",
            "What is time per output token?",
            "Explain TTFT and TPOT.",
            "How do you measure LLM latency?",
        ],
        "Time to first token is the wait from the arrival of a request to its first output "
        "token: queue time plus prefill. Time per output token is the average gap between later "
        "tokens. End-to-end latency is about TTFT plus TPOT times the output length minus one. "
        "Throughput is the total tokens per second across all requests.",
    ),
    (
        [
            "Why is decoding memory bound?",
            "Why is decode limited by memory bandwidth?",
            "What limits the speed of decoding?",
            "Is decoding compute bound or memory bound?",
            "Why is decode slow?",
        ],
        "Each decode step multiplies every weight matrix by one vector per sequence. That is "
        "about two operations per weight, while the weight itself must be read from memory. The "
        "GPU can do hundreds of operations in the time it reads one byte, so at small batch "
        "sizes the step waits on memory, not on arithmetic.",
    ),
    (
        [
            "What is grouped-query attention?",
            "What is GQA?",
            "Why do models use fewer KV heads than attention heads?",
            "Explain grouped-query attention.",
            "How does GQA shrink the KV cache?",
        ],
        "Grouped-query attention lets several query heads share one key-value head. With 32 "
        "query heads and 8 KV heads the model stores a quarter of the keys and values of full "
        "multi-head attention, so the KV cache and the memory traffic of decoding shrink by four "
        "while quality stays close.",
    ),
    (
        [
            "What is chunked prefill?",
            "Why split a long prompt into chunks?",
        ],
        "Chunked prefill splits a long prompt into pieces that fit the per-step token budget and "
        "runs them alongside the decode tokens of other requests. A long prompt no longer "
        "blocks everyone else for a whole step, so time per output token stays smooth while the "
        "GPU stays busy.",
    ),
    (
        [
            "What is preemption in an inference engine?",
            "What happens when the KV cache runs out of blocks?",
        ],
        "When no free blocks are left, the scheduler preempts a running sequence, usually the "
        "newest one. Its blocks are freed and it goes back to the waiting queue. When it is "
        "admitted again, its KV cache is recomputed from the tokens it already has, so its "
        "output does not change.",
    ),
    (
        [
            "What is the roofline model?",
            "What is arithmetic intensity?",
            "When is a kernel compute bound?",
        ],
        "The roofline model compares a kernel's arithmetic intensity, its operations per byte "
        "moved, with the ratio of the chip's peak operations to its memory bandwidth. Below "
        "that ratio the kernel is memory bound, above it compute bound. Decoding at batch one "
        "has an intensity near one, far below the ratio of any modern GPU.",
    ),
    (
        [
            "What is tensor parallelism?",
            "How do you serve a model that does not fit on one GPU?",
        ],
        "Tensor parallelism splits each weight matrix across several GPUs. Every GPU computes "
        "part of each layer, and the partial results are combined with an all-reduce. It cuts "
        "the memory per GPU and the time per step, but needs a fast link such as NVLink between "
        "the GPUs.",
    ),
    (
        [
            "What is top-p sampling?",
            "What does temperature do?",
            "How does an engine sample the next token?",
        ],
        "The engine divides the logits by the temperature, applies a softmax, and draws a token. "
        "Top-k keeps only the k most likely tokens, top-p keeps the smallest set whose "
        "probabilities reach p. A temperature of zero means greedy decoding: always the most "
        "likely token.",
    ),
    (
        [
            "What is FlashAttention?",
            "Why is FlashAttention faster?",
        ],
        "FlashAttention computes attention in tiles that stay in fast on-chip memory and keeps a "
        "running softmax, so the full attention matrix is never written to main memory. The "
        "result is exact, and it is faster because it moves far fewer bytes.",
    ),
    (
        [
            "What is disaggregated serving?",
            "Why separate prefill and decode?",
        ],
        "Disaggregated serving runs prefill and decode on separate workers. The prefill worker "
        "builds the KV cache and hands it to a decode worker. Long prompts then never interrupt "
        "decoding, and each pool can be sized and scaled for its own bottleneck.",
    ),
    (
        [
            "What is a GPU good for?",
            "Why do we run LLMs on GPUs?",
            "What matters about a GPU for inference?",
            "Explain GPUs for inference.",
        ],
        "A GPU runs thousands of threads at once and has tensor cores that multiply small "
        "matrices very fast, which suits the matrix products of a transformer. For inference "
        "the numbers that matter most are memory capacity, which decides whether the weights "
        "and the KV cache fit, and memory bandwidth, which decides how fast each decode step "
        "can read the weights.",
    ),
    (
        [
            "Hello!",
            "Hi, who are you?",
            "What can you do?",
        ],
        "Hello! I am a small language model trained for this course on LLM inference. Ask me "
        "about prefill and decode, the KV cache, batching, paging, quantization, speculative "
        "decoding or latency, and I will do my best to explain.",
    ),
]
