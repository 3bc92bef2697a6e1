"""Top-k routing with skewed expert popularity over an expert-parallel group: how far the busiest
GPU's load, and so its MoE-layer time, sits above the mean the layout arithmetic assumes, with and
without redundant copies of the hottest experts.

Popularity: expert i gets weight rank_i^(−skew), the ranks a seeded shuffle of 1..E, so hot
experts land on any GPU; skew 0 is uniform. Each token picks k distinct experts with probability
proportional to those weights, drawn exactly by an exponential race (the k smallest of
Exp(1)/p_i, the same law as Gumbel-top-k). The same random numbers serve every skew of a step,
so the curves against skew are smooth.

Placement: without redundancy expert i sits on GPU ⌊i ÷ (E/e)⌋. With `redundant` extra slots,
loads are estimated from a separate seeded sample of half a step's tokens (as a balancer works
from recent statistics, never the traffic to come); each extra slot goes to the expert with the
most estimated load per copy, and copies are placed, largest first, on the least-loaded GPU
with a free slot that does not yet hold that expert (DeepSeek's EPLB works in this spirit). A
token's choice of a copied expert goes to one of its copies at random.

Per GPU and step: pairs (token, expert) to compute, experts read, and remote tokens received
(tokens live on GPU index mod e, as with data-parallel attention). The MoE layer's time on a GPU
is the roofline of its experts' matmuls (2 FLOPs per weight per pair) and their weight reads,
plus its dispatch and combine traffic; the step waits for the slowest GPU. The prediction is the
same formula at the uniform means, the layout calculator's assumption.
"""

import math

import numpy as np

WORK_MAX = 30_000_000  # token × expert draws per run: keeps a run to a few hundred ms
SKEWS = (0.0, 0.5, 1.0, 1.5, 2.0)


def routing_work(*, tokens: int, experts: int, steps: int, sweeps: int) -> int:
    """Token × expert keys a run ranks: its steps and the balancer's sample of half a step,
    at each skew."""
    return tokens * experts * (2 * steps + 1) * sweeps // 2


def popularity(*, experts: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """Each expert's routing weight (sums to 1): Zipf over a random order of the experts."""
    ranks = rng.permutation(experts) + 1
    weights = ranks.astype(float) ** (-skew)
    return weights / weights.sum()


def route(*, race: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """The k experts each token picks (tokens × k), distinct, drawn with probability
    proportional to `weights` from `race` (tokens × experts of Exp(1) draws)."""
    keys = race * (1.0 / weights).astype(race.dtype)
    return np.argpartition(keys, k - 1, axis=1)[:, :k]


def expert_hit_probability(*, experts: int, per_gpu: int, k: int) -> float:
    """Chance a GPU holding `per_gpu` experts holds one of a token's k (uniform routing)."""
    if per_gpu >= experts:
        return 1.0
    return 1 - math.comb(experts - per_gpu, k) / math.comb(experts, k)


def placement_plain(*, experts: int, gpus: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Experts in order, E/e per GPU: (slot's GPU, slot's expert, expert's first slot and
    copies) as arrays, the same shape `placement_balanced` returns."""
    per = experts // gpus
    slot_gpu = np.arange(experts) // per
    slot_expert = np.arange(experts)
    return slot_gpu, slot_expert, np.ones(experts, dtype=int)


def placement_balanced(*, load: np.ndarray, gpus: int, redundant: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Copies of the hottest experts and a balanced placement from estimated `load` per expert:
    (slot's GPU, slot's expert, copies per expert). Never two copies of one expert on one GPU;
    every GPU gets (E + redundant)/e slots. Experts with the most copies are placed first (while
    enough GPUs still have room for them), then by load per copy, each copy on the least-loaded
    GPU with a free slot."""
    experts = len(load)
    copies = np.ones(experts, dtype=int)
    for _ in range(redundant):
        copies[int(np.argmax(load / copies))] += 1
    slots = (experts + redundant) // gpus
    gpu_load = np.zeros(gpus)
    used = np.zeros(gpus, dtype=int)
    slot_gpu, slot_expert = [], []
    for j in sorted(range(experts), key=lambda j: (-copies[j], -load[j] / copies[j], j)):
        free = [g for g in range(gpus) if used[g] < slots]
        chosen = sorted(free, key=lambda g: (gpu_load[g], g))[:copies[j]]
        for g in chosen:
            gpu_load[g] += load[j] / copies[j]
            used[g] += 1
            slot_gpu.append(g)
            slot_expert.append(j)
    return np.array(slot_gpu), np.array(slot_expert), copies


def gpu_counts(*, choices: np.ndarray, slot_gpu: np.ndarray, slot_expert: np.ndarray,
               gpus: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per GPU: pairs to compute (`load`), distinct expert copies used (`touched`), and distinct
    remote tokens received (`received`), for one step's `choices` (tokens × k)."""
    tokens, _ = choices.shape
    experts = int(slot_expert.max()) + 1
    # Each expert's copies as a list of slots; a pair goes to one of them at random.
    order = np.argsort(slot_expert, kind="stable")
    first = np.searchsorted(slot_expert[order], np.arange(experts))
    count = np.bincount(slot_expert, minlength=experts)
    flat = choices.ravel()
    pick = (rng.random(flat.size) * count[flat]).astype(int)
    slot = order[first[flat] + pick]
    gpu = slot_gpu[slot]
    load = np.bincount(gpu, minlength=gpus)
    touched = np.bincount(slot_gpu[np.unique(slot)], minlength=gpus)
    token = np.repeat(np.arange(tokens), choices.shape[1])
    hit = np.zeros((tokens, gpus), dtype=bool)
    hit[token, gpu] = True
    home = np.arange(tokens) % gpus
    hit[np.arange(tokens), home] = False
    return {"load": load, "touched": touched, "received": hit.sum(axis=0)}


def simulate(*, experts: int, k: int, gpus: int, tokens: int, skew: float, redundant: int,
             steps: int, seed: int, expert_params: float, hidden: int, weight_bytes: float,
             dispatch_bytes: float, combine_bytes: float, peak_flops: float, mfu: float,
             bandwidth: float, link_bandwidth: float, collective_seconds: float,
             skews: tuple[float, ...] = SKEWS) -> dict:
    """Route `steps` steps of `tokens` tokens at each skew in `skews` (and `skew`), over `gpus`
    GPUs, without and with `redundant` copies (loads in pairs, times in seconds).

    `bandwidth` and `link_bandwidth` are the achieved bytes/s of HBM and of the link the
    all-to-all crosses; `peak_flops` × `mfu` the achieved rate of the experts' matmuls.
    Returns, per skew: mean over steps of the hottest expert's load over the mean expert's
    (`ratio_expert`), of the busiest GPU's load over the mean (`ratio_plain`,
    `ratio_balanced`) and of the busiest GPU's MoE-layer time (`time_plain`,
    `time_balanced`); the prediction at uniform means (`predicted_time`); and the first step's
    per-GPU loads at `skew` (`loads_plain`, `loads_balanced`).
    """
    if experts % gpus or (experts + redundant) % gpus:
        raise ValueError("experts and experts + redundant must split evenly over the GPUs")
    sweep = tuple(sorted(set(skews) | {float(skew)}))
    if routing_work(tokens=tokens, experts=experts, steps=steps, sweeps=len(sweep)) > WORK_MAX:
        raise ValueError("too much work for one run")
    rng = np.random.default_rng(seed)
    orders = {s: popularity(experts=experts, skew=s, rng=np.random.default_rng(seed + 1))
              for s in sweep}
    plain = placement_plain(experts=experts, gpus=gpus)
    balanced = {}
    sample = np.random.default_rng(seed + 2).standard_exponential(
        (max(1, tokens // 2), experts), dtype=np.float32)
    for s in sweep:
        history = route(race=sample, weights=orders[s], k=k)
        estimate = np.bincount(history.ravel(), minlength=experts).astype(float)
        balanced[s] = placement_balanced(load=estimate, gpus=gpus, redundant=redundant)

    def layer_time(load: np.ndarray, touched: np.ndarray, received: np.ndarray) -> np.ndarray:
        compute = 2 * load * expert_params / (peak_flops * mfu)
        memory = touched * expert_params * weight_bytes / bandwidth
        comm = (2 * collective_seconds
                + received * hidden * (dispatch_bytes + combine_bytes) / link_bandwidth)
        return np.maximum(compute, memory) + comm

    sums = {s: {"ratio_plain": 0.0, "ratio_balanced": 0.0, "time_plain": 0.0,
                "time_balanced": 0.0, "ratio_expert": 0.0} for s in sweep}
    first_loads = {}
    mean_load = tokens * k / gpus
    mean_expert = tokens * k / experts
    for step in range(steps):
        race = rng.standard_exponential((tokens, experts), dtype=np.float32)
        for s in sweep:
            choices = route(race=race, weights=orders[s], k=k)
            per_expert = np.bincount(choices.ravel(), minlength=experts)
            sums[s]["ratio_expert"] += per_expert.max() / mean_expert
            for name, (slot_gpu, slot_expert, _) in (("plain", plain), ("balanced", balanced[s])):
                counts = gpu_counts(choices=choices, slot_gpu=slot_gpu, slot_expert=slot_expert,
                                    gpus=gpus, rng=rng)
                times = layer_time(counts["load"], counts["touched"], counts["received"])
                sums[s][f"ratio_{name}"] += counts["load"].max() / mean_load
                sums[s][f"time_{name}"] += float(times.max())
                if step == 0 and s == float(skew):
                    first_loads[name] = counts["load"]
    per_gpu = experts // gpus
    touched_mean = per_gpu * (1 - (1 - k / experts) ** tokens)
    received_mean = tokens * (gpus - 1) / gpus * expert_hit_probability(
        experts=experts, per_gpu=per_gpu, k=k)
    predicted = float(layer_time(np.array([mean_load]), np.array([touched_mean]),
                                 np.array([received_mean]))[0])
    return {
        "skews": sweep,
        **{key: tuple(sums[s][key] / steps for s in sweep)
           for key in ("ratio_plain", "ratio_balanced", "time_plain", "time_balanced",
                       "ratio_expert")},
        "predicted_time": predicted, "mean_load": mean_load, "mean_expert_load": mean_expert,
        "loads_plain": first_loads["plain"], "loads_balanced": first_loads["balanced"],
        "copies": balanced[float(skew)][2],
    }
