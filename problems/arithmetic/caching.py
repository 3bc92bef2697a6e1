"""Prefix caching: a prompt prefix whose KV is already cached (a shared system prompt, an
earlier turn) skips its prefill; later tokens still attend to it. Times are roofline bounds, so
a hit can never make prefill faster than reading the weights once."""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import (
    attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_flops_get,
    prefill_flops_model,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    TP_MAX,
    context_check,
    embedding_dtype_resolve,
    kv_cache,
    memory_fit,
    params_count_model,
    tp_check,
    weight_bytes_model,
    weights_read_model,
)
from problems.arithmetic.replica import kv_bytes_per_token_gpu, prefill_pass_replica
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bytes_format,
    count_format,
    flops_format,
    number_format,
    percent_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase


def prefix_cache(
    *,
    model: str,
    gpu: str,
    prompt_tokens: int,
    prefix_tokens: int,
    hit_rate: float = 1.0,
    dtype: str = "bf16",
    mfu: float = 1.0,
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """FLOPs (FLOP) and prefill time (seconds) saved per request by a cached shared prefix.

    A hit skips exactly the prefix's own prefill: its linear FLOPs and the attention among
    prefix tokens. The suffix's attention to the prefix is still computed, and the suffix's
    pass still reads every weight once, so the time with a hit is
    max(suffix compute, weight reads + the prefix's KV read). Expected savings are the
    difference times `hit_rate`.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    prefix_tokens = count_check(prefix_tokens, field="prefix_tokens", maximum=TOKENS_MAX)
    if prefix_tokens > prompt_tokens:
        raise ArithmeticInputError(field="prefix_tokens", message="must not exceed prompt_tokens")
    hit_rate = fraction_check(hit_rate, field="hit_rate", allow_zero=True)
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    rate = peak_flops_get(gpu=g, dtype=d) * mfu
    unit = "OP" if d.compute == "int8" else "FLOP"  # INT8 tensor cores are rated in OPS
    bandwidth = g.bandwidth_bytes_per_second * bandwidth_efficiency
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    parts = params_count_model(m)
    full = prefill_flops_model(m, prompt_tokens)["total"]
    prefix = prefill_flops_model(m, prefix_tokens)["total"]
    # Recomputing at least the last token keeps fresh logits (engines always do).
    suffix_tokens = max(prompt_tokens - prefix_tokens, 1)
    start = prompt_tokens - suffix_tokens
    pairs = (prompt_tokens * (prompt_tokens + 1) - start * (start + 1)) / 2
    suffix_flops = (2 * parts["non_embedding_active"] * suffix_tokens + 2 * parts["head"]
                    + attention_flops_per_token_pair(m) * pairs)

    def time(tokens: int, flops: float, kv_read: int) -> float:
        reads = weights_read_model(model=m, tokens=tokens, dtype=d, embedding=e)
        moved = reads["total"] + reads["embedding_rows"] + (tokens + kv_read) * kv_per_token
        return max(flops / rate, moved / bandwidth)

    full_seconds = time(prompt_tokens, full, 0)
    hit_seconds = time(suffix_tokens, suffix_flops, start)
    saved_seconds = hit_rate * (full_seconds - hit_seconds)
    # What a hit skips: the whole prompt's FLOPs less the suffix's (its linear layers, its
    # attention to every earlier token, the head at the last position). That is the prefix's
    # linear layers and the attention among its own tokens; the prefix alone would also pay the
    # output head at its last position, which the full prompt never computes there.
    skipped = full - suffix_flops
    saved = hit_rate * skipped
    prefix_kv = kv_cache(model=model, tokens=prefix_tokens, dtype=kv_d.id)["total_bytes"]
    weights_all = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weights_all, kv_bytes=prompt_tokens * kv_per_token,
        reserve_gb=reserve_gb, memory_fraction=memory_fraction,
    )
    return Result(
        values={
            "prefill_flops": full,
            "flops_saved": saved,
            "fraction_saved": saved / full,
            "seconds_saved": saved_seconds,
            "prefill_seconds": full_seconds,
            "hit_prefill_seconds": hit_seconds,
            "prefix_kv_bytes": prefix_kv,
            **fit,
        },
        steps=(
            Step(
                "Prefill without caching",
                f"{prompt_tokens:,}-token prompt",
                full,
                "FLOP",
                flops_format(full),
            ),
            Step(
                "Prefill of the prefix alone",
                f"{count_phrase(prefix_tokens, 'token')} (linear + attention among them + the "
                "head at its last position, which a hit does not save)",
                prefix,
                "FLOP",
                flops_format(prefix),
            ),
            Step(
                "Skipped on a hit",
                f"{flops_format(full)} − {flops_format(suffix_flops)} for the "
                f"{count_phrase(suffix_tokens, 'suffix token')} "
                + ("(its linear layers, its attention to every earlier token, the head)"
                   if suffix_tokens == 1 else
                   "(their linear layers, their attention to every earlier token, the "
                   "head at the last position)"),
                skipped,
                "FLOP",
                flops_format(skipped),
            ),
            Step(
                "Expected FLOPs saved",
                f"{number_format(hit_rate)} hit rate × {flops_format(skipped)}",
                saved,
                "FLOP",
                flops_format(saved),
            ),
            Step(
                "Share of prefill FLOPs saved",
                f"{flops_format(saved)} ÷ {flops_format(full)}",
                saved / full,
                "",
                percent_format(saved / full),
            ),
            Step(
                "Prefill time on a miss",
                f"the whole prompt: max(compute at {rate_of_format(rate, unit=unit)}, weights and "
                "KV at the usable bandwidth)",
                full_seconds,
                "s",
                seconds_format(full_seconds),
            ),
            Step(
                "Prefill time on a hit",
                f"{count_phrase(suffix_tokens, 'suffix token')} attending to the cached "
                f"{start:,}: still at "
                "least one read of every weight",
                hit_seconds,
                "s",
                seconds_format(hit_seconds),
            ),
            Step(
                "Expected time saved per request",
                f"{number_format(hit_rate)} × ({seconds_format(full_seconds)} − "
                f"{seconds_format(hit_seconds)})",
                saved_seconds,
                "s",
                seconds_format(saved_seconds),
            ),
            Step(
                "KV the cached prefix occupies (once, shared)",
                f"{count_phrase(prefix_tokens, 'token')} of {m.name} KV ({kv_d.kv_label})",
                prefix_kv,
                "B",
                bytes_format(prefix_kv),
            ),
            *fit_steps,
        ),
    )


APPLICATIONS_MAX = 100_000
REPLICAS_MAX = 10_000
RATE_MAX = 1e9
MINUTES_PER_DAY = 24 * 60


def prefix_reusable_tokens(*, prefix_tokens: int, prompt_tokens: int, block_size: int) -> int:
    """Tokens of a cached shared prefix a block-hashing engine reuses (tokens): only full
    blocks hash, and the last prompt token is always recomputed for its logits.
    A 2,000-token prefix in 16-token blocks: 125 full blocks, 2,000 tokens; a 200-token prefix
    that is the whole prompt: 12 blocks, 192 tokens (the 13th would hold the last token)."""
    return min(prefix_tokens // block_size, (prompt_tokens - 1) // block_size) * block_size


def pinned_prefixes(*, applications: float, in_flight: float) -> float:
    """Expected distinct prefixes held by the requests running on one replica (prefixes), when
    `in_flight` are running on average and each picked one of `applications` equally popular
    prefixes. Requests that arrive at random and each stay a while are, in number, Poisson
    (the infinite-server queue), so each prefix has Poisson(L/a) holders and is held with
    probability 1 − e^(−L/a): a ·(1 − e^(−L/a)) held. A running request holds its prefix's
    blocks (reference count above zero), so a new request for that prefix hits whatever the
    idle cache keeps.
    40 prefixes, 10 in flight: 40 × (1 − e^(−0.25)) = 40 × 0.2212 = 8.85."""
    if applications <= 0 or in_flight <= 0:
        return 0.0
    return applications * -math.expm1(-in_flight / applications)


def shared_hit_rate(*, capacity: int, applications: float, in_flight: float) -> float:
    """Hit rate of one replica that sees `applications` equally popular prefixes, keeps
    `capacity` idle ones and has `in_flight` requests running (fraction): the pinned prefixes
    P always hit and the idle cache covers C of the rest, so min(1, (P + C) ÷ K). With nothing
    in flight this is the plain C/K.
    40 prefixes, 15 kept, 10 in flight: (8.85 + 15) ÷ 40 = 0.596."""
    if applications <= 0:
        return 1.0
    pinned = pinned_prefixes(applications=applications, in_flight=in_flight)
    return min(1.0, (pinned + capacity) / applications)


def prefix_hit_rates(*, capacity: int, applications: int, replicas: int,
                     in_flight_fleet: float = 0.0) -> dict[str, float]:
    """Steady-state prefix-cache hit rates (fractions) for `applications` equally popular system
    prompts on `replicas` replicas that each keep `capacity` idle prefixes, with
    `in_flight_fleet` requests running on the whole fleet (arrival rate × request lifetime,
    Little's law).

    Requests arrive independently and pick an application uniformly. Then a cache of C of the
    K prefixes a replica sees is hit with probability C/K whatever it evicts (LRU or any other
    rule that cannot see the future), since the next request is uniform over all K and
    independent of what is held. A prefix some running request holds is hit for free on top
    (`shared_hit_rate`). Random (or round-robin) routing sends every application to every
    replica: K = applications, L = in_flight_fleet ÷ replicas. Prefix-affine routing gives each
    application one home, spread as evenly as possible (application i on replica i mod
    replicas): a replica home to a applications serves a/applications of the traffic, holds
    that share of the requests in flight and hits `shared_hit_rate(C, a, L_a)`; the fleet's rate
    ("affine") weights those by traffic; the busiest replica, home to ceil(applications /
    replicas), has the lowest rate ("affine_busiest"). The idle-cache-only rates (nothing in
    flight) are kept as "random_idle" and "affine_idle". Cold misses (each prefix's first visit
    to a replica) are left out.
    40 applications, 15 cached per replica, 8 replicas, nothing in flight: random 15/40 = 0.375;
    affine 1.0. 10 applications, 1 cached, 8 replicas: two replicas home to 2 (hit 1/2), six to
    1 (hit 1): fleet (2×1 + 6×1) / 10 = 0.8, busiest 0.5.
    """
    def rates(in_flight_fleet: float) -> tuple[float, float, float]:
        per_replica = in_flight_fleet / replicas
        random_hit = shared_hit_rate(capacity=capacity, applications=applications,
                                     in_flight=per_replica)
        low, extra = divmod(applications, replicas)

        def home(a: int) -> float:
            return shared_hit_rate(capacity=capacity, applications=a,
                                   in_flight=in_flight_fleet * a / applications)
        held = (extra * (low + 1) * home(low + 1)
                + (replicas - extra) * low * (home(low) if low else 0.0))
        return random_hit, held / applications, home(math.ceil(applications / replicas))

    random_hit, affine, busiest_rate = rates(in_flight_fleet)
    random_idle, affine_idle, _ = rates(0.0)
    busiest = math.ceil(applications / replicas)
    return {"random": random_hit, "affine": affine, "affine_busiest": busiest_rate,
            "random_idle": random_idle, "affine_idle": affine_idle,
            "pinned_random": pinned_prefixes(applications=applications,
                                             in_flight=in_flight_fleet / replicas),
            "apps_busiest": busiest,
            "busiest_share": busiest / applications, "even_share": 1 / replicas,
            "replicas_used": min(replicas, applications)}


def kv_replication_why(model, tp: int) -> str:
    """Why each GPU of a `tp`-way replica keeps more than its split of a token's KV."""
    if model.attention == "MLA":
        return "MLA's latent is whole on every GPU"
    return f"{model.kv_heads} KV heads over {tp} GPUs, so heads are copied"


def prefix_routing(
    *,
    model: str,
    gpu: str,
    tp: int = 4,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    system_tokens: int,
    user_tokens: int,
    requests_per_minute: float,
    replicas: int,
    applications: int = 1,
    cache_gb: float = 10.0,
    mfu: float = 0.5,
    bandwidth_efficiency: float = 0.8,
    request_seconds: float = 0.0,
) -> Result:
    """What a cached system prompt saves on a fleet (FLOP, seconds, GPU-hours per day) and the
    hit rate random and prefix-affine routing reach (fractions).

    Each replica is `tp` GPUs; a prompt is `system_tokens` shared by every request of one
    application followed by `user_tokens` of its own. A hit computes only the user tokens (they
    still attend to the cached prefix); a miss computes all of them. The two lone prefills are
    roofline bounds (`prefill_pass_replica`), and their difference is the TTFT a hit saves.
    The GPU time a hit saves on a loaded fleet is a throughput view instead: the FLOPs it skips
    ÷ (the format's dense peak × `mfu`) GPU-seconds, because at load the engine batches
    prefills (and decode steps) under a token budget, so the weight reads are shared and
    what a hit removes is its compute. Each replica keeps `cache_gb` GB of KV for idle cached
    prefixes (all its GPUs together), which fixes how many it holds; requests in flight
    (requests per second × `request_seconds`, Little's law) hold their prefixes on top; the hit
    rates come from `prefix_hit_rates`.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    w = dtype_get(dtype)
    peak_flops_get(gpu=g, dtype=w)
    kv = kv_dtype_get(kv_dtype, model=m)
    emb = embedding_dtype_resolve(model=m, dtype=w)
    tp = tp_check(model=m, tp=count_check(tp, field="tp", maximum=TP_MAX))
    system_tokens = count_check(system_tokens, field="system_tokens", maximum=TOKENS_MAX)
    user_tokens = count_check(user_tokens, field="user_tokens", maximum=TOKENS_MAX)
    prompt = system_tokens + user_tokens
    context_check(model=m, tokens=prompt, field="user_tokens",
                  what=f"the system prompt ({system_tokens:,}) plus the user's part "
                       f"({user_tokens:,})")
    rpm = number_check(requests_per_minute, field="requests_per_minute", maximum=RATE_MAX)
    replicas = count_check(replicas, field="replicas", maximum=REPLICAS_MAX)
    applications = count_check(applications, field="applications", maximum=APPLICATIONS_MAX)
    cache_bytes = number_check(cache_gb, field="cache_gb", maximum=1e6) * GB
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    request_seconds = number_check(request_seconds, field="request_seconds", maximum=1e6,
                                   allow_minimum=True)
    peak = peak_flops_get(gpu=g, dtype=w)
    unit = "OP" if w.compute == "int8" else "FLOP"  # INT8 tensor cores are rated in OPS

    def prefill(uncached: int) -> dict:
        return prefill_pass_replica(model=m, gpu=g, tp=tp, w=w, emb=emb, kv=kv,
                                    prompt_tokens=prompt, uncached_tokens=uncached,
                                    bandwidth_efficiency=bandwidth_efficiency, mfu=mfu)

    miss, hit = prefill(prompt), prefill(user_tokens)
    flops_saved = (miss["flops"] - hit["flops"]) * tp
    ttft_saved = miss["seconds"] - hit["seconds"]
    # Throughput view: at load the weight reads are shared by a batch, so a hit frees its FLOPs.
    gpu_seconds_saved = flops_saved / (peak * mfu)
    in_flight = rpm / 60 * request_seconds
    # A cached prefix occupies the KV of every GPU of the replica: its share of the KV heads
    # on each (the model's total, split), or the whole MLA latent, or a replicated head where
    # tp exceeds the KV heads, on every one of them. DeepSeek-V3 at TP 8 keeps 8 copies of
    # its 70,272 B latent a token, so a prefix costs the replica 8 times the model's figure.
    kv_token_gpu = kv_bytes_per_token_gpu(model=m, tp=tp, kv=kv)
    kv_token_replica = kv_token_gpu * tp
    replicated = kv_token_replica > kv_bytes_per_token_model(m, kv) * (1 + 1e-9)
    prefix_kv = system_tokens * kv_token_replica
    capacity = math.floor(cache_bytes / prefix_kv)
    rates = prefix_hit_rates(capacity=capacity, applications=applications, replicas=replicas,
                             in_flight_fleet=in_flight)
    per_day = rpm * MINUTES_PER_DAY
    # Does the fleet exist as described? The weights must fit each GPU, and the prefills alone
    # (every request a miss, at the planned MFU) must not need more GPUs than the fleet has.
    weights_gpu = weight_bytes_model(model=m, dtype=w, embedding=emb)["total"] / tp
    usable_gpu = g.memory_total_bytes * MEMORY_FRACTION_DEFAULT - RESERVE_GB_DEFAULT * GB
    prefill_gpus = rpm / 60 * miss["flops"] * tp / (peak * mfu)
    day = {policy: {"hits": per_day * rates[policy],
                    "gpu_hours": per_day * rates[policy] * gpu_seconds_saved / 3600,
                    "flops": per_day * rates[policy] * flops_saved}
           for policy in ("random", "affine")}
    return Result(
        values={
            "miss_flops": miss["flops"] * tp, "hit_flops": hit["flops"] * tp,
            "flops_saved": flops_saved,
            "miss_seconds": miss["seconds"], "hit_seconds": hit["seconds"],
            "miss_bound": miss["bound"], "hit_bound": hit["bound"],
            "ttft_saved": ttft_saved, "gpu_seconds_saved": gpu_seconds_saved,
            "prefix_kv_bytes": prefix_kv, "capacity": capacity,
            "kv_token_replica_bytes": kv_token_replica, "kv_replicated": replicated,
            "hit_random": rates["random"], "hit_affine": rates["affine"],
            "hit_random_idle": rates["random_idle"], "hit_affine_idle": rates["affine_idle"],
            "in_flight": in_flight, "in_flight_replica": in_flight / replicas,
            "pinned_random": rates["pinned_random"],
            "gpu_seconds_lone": tp * ttft_saved,
            "weights_gpu": weights_gpu, "usable_gpu": usable_gpu,
            "weights_fit": weights_gpu < usable_gpu, "prefill_gpus": prefill_gpus,
            # The same prefills with the cache: each hit removes the FLOPs it skips, so a fleet
            # short of GPUs with every request a miss can keep up at a high enough hit rate.
            "prefill_gpus_random": prefill_gpus * (1 - rates["random"] * flops_saved
                                                   / (miss["flops"] * tp)),
            "prefill_gpus_affine": prefill_gpus * (1 - rates["affine"] * flops_saved
                                                   / (miss["flops"] * tp)),
            "fleet_gpus": replicas * tp,
            "hit_affine_busiest": rates["affine_busiest"],
            "apps_busiest": rates["apps_busiest"], "busiest_share": rates["busiest_share"],
            "even_share": rates["even_share"], "replicas_used": rates["replicas_used"],
            "requests_per_day": per_day,
            "gpu_hours_random": day["random"]["gpu_hours"],
            "gpu_hours_affine": day["affine"]["gpu_hours"],
            "flops_day_random": day["random"]["flops"], "flops_day_affine": day["affine"]["flops"],
        },
        steps=(
            Step("Prefill on a miss",
                 f"{count_phrase(prompt, 'token')} on {tp} × {g.name} at "
                 f"{percent_format(mfu)} MFU: "
                 f"{flops_format(miss['flops'] * tp)}, {miss['bound']}-bound",
                 miss["seconds"], "s", seconds_format(miss["seconds"])),
            Step("Prefill on a hit",
                 f"{count_phrase(user_tokens, 'user token')} attending to the cached "
                 f"{system_tokens:,}: "
                 f"{flops_format(hit['flops'] * tp)}, {hit['bound']}-bound",
                 hit["seconds"], "s", seconds_format(hit["seconds"])),
            Step("FLOPs a hit saves", f"{flops_format(miss['flops'] * tp)} − "
                 f"{flops_format(hit['flops'] * tp)}", flops_saved, "FLOP",
                 flops_format(flops_saved)),
            Step("TTFT a hit saves (prefill part, no queue)",
                 f"{seconds_format(miss['seconds'])} − {seconds_format(hit['seconds'])}",
                 ttft_saved, "s", seconds_format(ttft_saved)),
            Step("GPU-seconds a hit saves at load (throughput view)",
                 f"{flops_format(flops_saved)} ÷ ({rate_of_format(peak, unit=unit)} per GPU × "
                 f"{percent_format(mfu)} MFU): batched prefills share the weight reads, so a "
                 "hit frees its FLOPs",
                 gpu_seconds_saved, "GPU·s", f"{number_format(gpu_seconds_saved)} GPU·s"),
            Step("GPUs the prefills alone would keep busy, every request a miss",
                 f"{number_format(rpm)} a minute ÷ 60 × {flops_format(miss['flops'] * tp)} ÷ "
                 f"({rate_of_format(peak, unit=unit)} × {percent_format(mfu)}), against the "
                 f"fleet's {count_phrase(replicas * tp, 'GPU')}",
                 prefill_gpus, "GPUs", number_format(prefill_gpus)),
            Step("KV of one cached prefix, on the whole replica",
                 f"{count_phrase(system_tokens, 'token')} × "
                 + (f"{bytes_format(kv_token_gpu)} per token on each of "
                    f"{count_phrase(tp, 'GPU')} ({kv_replication_why(m, tp)}; {kv.kv_label})"
                    if replicated else
                    f"{bytes_format(kv_token_replica)} per token ({kv.kv_label})"),
                 prefix_kv, "B", bytes_format(prefix_kv)),
            Step("Prefixes one replica keeps", f"⌊{bytes_format(cache_bytes)} ÷ "
                 f"{bytes_format(prefix_kv)}⌋", capacity, "prefixes", f"{capacity:,}"),
            Step("Requests in flight per replica (Little's law)",
                 f"{number_format(rpm)} a minute ÷ 60 × {number_format(request_seconds)} s ÷ "
                 f"{count_format(replicas, 'replica')}",
                 in_flight / replicas, "requests", number_format(in_flight / replicas)),
            Step("Prefixes running requests hold, random routing",
                 f"{applications:,} × (1 − e^(−{number_format(in_flight / replicas)} ÷ "
                 f"{applications:,})): held prefixes hit for free",
                 rates["pinned_random"], "prefixes", number_format(rates["pinned_random"])),
            Step("Hit rate, random or round-robin routing",
                 f"every replica sees "
                 f"{'the one prefix' if applications == 1 else f'all {applications:,} prefixes'}"
                 ": min(1, "
                 f"({number_format(rates['pinned_random'])} held + {capacity:,} kept idle) ÷ "
                 f"{applications:,})", rates["random"], "", percent_format(rates["random"])),
            Step("Hit rate, prefix-affine routing (the fleet's)",
                 f"{count_phrase(applications, 'home')} spread over "
                 f"{count_format(replicas, 'replica')}, "
                 f"each replica hitting min(1, (held + {capacity:,} kept idle) ÷ the "
                 "applications it is home to), weighted by its traffic",
                 rates["affine"], "", percent_format(rates["affine"])),
            Step("Hit rate on the busiest replica, prefix-affine (the lowest)",
                 f"home to ⌈{applications:,} ÷ {replicas:,}⌉ = {rates['apps_busiest']:,}: "
                 f"min(1, (held + {capacity:,}) ÷ {rates['apps_busiest']:,})",
                 rates["affine_busiest"], "", percent_format(rates["affine_busiest"])),
            Step("Busiest replica's share of traffic, prefix-affine",
                 f"{rates['apps_busiest']:,} of {count_phrase(applications, 'application')} "
                 "(an even split "
                 f"is {percent_format(rates['even_share'])})",
                 rates["busiest_share"], "", percent_format(rates["busiest_share"])),
            Step("Requests per day", f"{number_format(rpm)} a minute × {MINUTES_PER_DAY:,}",
                 per_day, "requests", f"{number_format(per_day)}"),
            Step("GPU-hours saved per day, random routing",
                 f"{number_format(per_day)} × {percent_format(rates['random'])} × "
                 f"{number_format(gpu_seconds_saved)} GPU·s ÷ 3,600",
                 day["random"]["gpu_hours"], "GPU·h",
                 f"{number_format(day['random']['gpu_hours'])} GPU·h"),
            Step("GPU-hours saved per day, prefix-affine routing",
                 f"{number_format(per_day)} × {percent_format(rates['affine'])} × "
                 f"{number_format(gpu_seconds_saved)} GPU·s ÷ 3,600",
                 day["affine"]["gpu_hours"], "GPU·h",
                 f"{number_format(day['affine']['gpu_hours'])} GPU·h"),
        ),
    )
