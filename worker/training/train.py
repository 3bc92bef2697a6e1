"""Train the shipped demo models from scratch: `python -m worker.training.train`
(or `make train`).

Builds the corpus (worker/training/corpus.py), trains a byte-level BPE tokenizer on it, then
trains course-lm (the target) and course-lm-draft (the speculative-decoding draft, same
tokenizer) and saves both as Hugging Face directories under worker/models/. Seeded and
single-threaded, so a rerun on the same machine type, torch and transformers versions writes the
same files. Takes about 50 minutes (course-lm 40, the draft 10) on one thread each; never run by
CI. Checkpoints go to var/train/ so a stopped run resumes.
"""

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from worker.training.corpus import BOS, CHAT_TEMPLATE, EOS, PAD, SPECIAL_TOKENS, corpus_documents

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = ROOT / "worker" / "models"
STATE_DIR = ROOT / "var" / "train"
VOCAB_SIZE = 4096
SEED = 0


@dataclass(frozen=True)
class Recipe:
    """One model's shape and training schedule. Learning rates are per step; tokens per step are
    batch_size x seq_len."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    steps: int
    lr: float
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    batch_size: int = 16
    seq_len: int = 256
    weight_decay: float = 0.1
    save_every: int = 100


RECIPES = {
    "course-lm": Recipe("course-lm", 256, 688, 6, 8, 4, steps=1500, lr=2e-3, warmup_steps=50,
                        save_every=50),
    "course-lm-draft": Recipe("course-lm-draft", 128, 344, 2, 4, 2, steps=800, lr=3e-3),
}


def tokenizer_train(*, documents: list[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE of `vocab_size` tokens (special tokens included) learned on `documents`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Special tokens are fixed ids; keep their spelling out of the merges.
    plain = []
    for document in documents:
        for special in SPECIAL_TOKENS:
            document = document.replace(special, "\n")
        plain.append(document)
    tokenizer.train_from_iterator(plain, trainer=trainer)
    # Plain-text prompts start with BOS like every training document; chat prompts get it from
    # the template (apply_chat_template tokenizes without special tokens).
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tokenizer


def tokenizer_wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    """The transformers tokenizer saved beside the model, with special tokens and chat template."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=1024,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def tokenizer_save(*, tokenizer: PreTrainedTokenizerFast, path: Path) -> None:
    """Save the tokenizer files, with the chat template inside tokenizer_config.json."""
    tokenizer.save_pretrained(path)
    config_path = path / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    # The class name every transformers release knows (5.x writes its new backend's name).
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (path / "chat_template.jinja").unlink(missing_ok=True)


def token_streams(
    *, documents: list[str], tokenizer: Tokenizer, val_every: int = 50
) -> tuple[torch.Tensor, torch.Tensor]:
    """Train and validation token ids, each one long stream; every val_every-th document is held
    out. Documents already carry their BOS and EOS, so they are encoded without the BOS
    post-processor."""
    encodings = tokenizer.encode_batch(documents, add_special_tokens=False)
    train, val = [], []
    for index, encoding in enumerate(encodings):
        (val if index % val_every == 0 else train).extend(encoding.ids)
    return torch.tensor(train, dtype=torch.long), torch.tensor(val, dtype=torch.long)


def model_config(*, recipe: Recipe, tokenizer: Tokenizer) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_hidden_layers,
        num_attention_heads=recipe.num_attention_heads,
        num_key_value_heads=recipe.num_key_value_heads,
        max_position_embeddings=1024,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.token_to_id(BOS),
        eos_token_id=tokenizer.token_to_id(EOS),
        pad_token_id=tokenizer.token_to_id(PAD),
        architectures=["LlamaForCausalLM"],
    )


def lr_at(*, recipe: Recipe, step: int) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio of the peak."""
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    progress = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return recipe.lr * (recipe.min_lr_ratio + (1 - recipe.min_lr_ratio) * cosine)


def batch_sample(*, stream: torch.Tensor, recipe: Recipe, step: int) -> torch.Tensor:
    """Random windows of seq_len + 1 tokens, drawn from a generator seeded by the step alone, so
    a resumed run sees the same batches as an unbroken one."""
    generator = torch.Generator().manual_seed(SEED * 1_000_003 + step)
    starts = torch.randint(0, len(stream) - recipe.seq_len - 1, (recipe.batch_size,),
                           generator=generator)
    return torch.stack([stream[s : s + recipe.seq_len + 1] for s in starts.tolist()])


@torch.no_grad()
def loss_evaluate(*, model: LlamaForCausalLM, stream: torch.Tensor, recipe: Recipe,
                  max_windows: int = 64) -> float:
    """Mean next-token cross-entropy (nats) over consecutive windows of `stream`."""
    model.eval()
    window = recipe.seq_len + 1
    count = min(max_windows, (len(stream) - 1) // recipe.seq_len)
    rows = torch.stack([stream[i * recipe.seq_len : i * recipe.seq_len + window]
                        for i in range(count)])
    losses = []
    for chunk in rows.split(recipe.batch_size):
        logits = model(input_ids=chunk[:, :-1]).logits
        losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                      chunk[:, 1:].reshape(-1), reduction="sum"))
    model.train()
    return float(torch.stack(losses).sum() / (count * recipe.seq_len))


def model_save(*, model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, path: Path) -> None:
    """Write the Hugging Face directory: config, safetensors, generation config, tokenizer."""
    path.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        bos_token_id=model.config.bos_token_id,
        eos_token_id=model.config.eos_token_id,
        pad_token_id=model.config.pad_token_id,
    )
    model.save_pretrained(path, safe_serialization=True)
    # transformers 5 nests rope_theta under rope_parameters; readers of the 4.x layout (and
    # engines that parse config.json themselves) look for it at the top level.
    config_path = path / "config.json"
    config = json.loads(config_path.read_text())
    config["rope_theta"] = config.get("rope_parameters", {}).get("rope_theta", 10000.0)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer_save(tokenizer=tokenizer, path=path)


def model_train(*, recipe: Recipe, tokenizer: Tokenizer, train: torch.Tensor, val: torch.Tensor,
                out_dir: Path, log=print) -> dict:
    """Train one model from its recipe, saving to out_dir/recipe.name every save_every steps and
    at the end; returns a summary (losses in nats per token, wall time in seconds)."""
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(model_config(recipe=recipe, tokenizer=tokenizer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95),
                                  weight_decay=recipe.weight_decay)
    wrapped = tokenizer_wrap(tokenizer)
    state_path = STATE_DIR / f"{recipe.name}.pt"
    start_step, elapsed = 0, 0.0
    if state_path.exists():
        state = torch.load(state_path, weights_only=True)
        if state["recipe"] == asdict(recipe):
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_step, elapsed = state["step"], state["elapsed"]
            log(f"{recipe.name}: resuming at step {start_step}")
    params = sum(p.numel() for p in model.parameters())
    log(f"{recipe.name}: {params:,} parameters, {len(train):,} train / {len(val):,} val tokens")
    model.train()
    began = time.monotonic() - elapsed
    for step in range(start_step, recipe.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(recipe=recipe, step=step)
        batch = batch_sample(stream=train, recipe=recipe, step=step)
        logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        done = step + 1
        if done % 10 == 0:
            log(f"{recipe.name} step {done}/{recipe.steps} loss {loss.item():.3f} "
                f"lr {optimizer.param_groups[0]['lr']:.2e} {time.monotonic() - began:.0f}s")
        if done % recipe.save_every == 0:
            val_loss = loss_evaluate(model=model, stream=val, recipe=recipe)
            log(f"{recipe.name} step {done} val loss {val_loss:.3f}")
            model_save(model=model, tokenizer=wrapped, path=out_dir / recipe.name)
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            torch.save({"recipe": asdict(recipe), "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(), "step": done,
                        "elapsed": time.monotonic() - began}, state_path)
    model_save(model=model, tokenizer=wrapped, path=out_dir / recipe.name)
    summary = {
        "name": recipe.name,
        "parameters": params,
        "recipe": asdict(recipe),
        "train_loss": loss_evaluate(model=model, stream=train, recipe=recipe),
        "val_loss": loss_evaluate(model=model, stream=val, recipe=recipe),
        "wall_seconds": round(time.monotonic() - began),
    }
    log(json.dumps(summary))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(RECIPES), help="train just this model")
    parser.add_argument("--steps", type=int, help="override the step count (quick checks)")
    parser.add_argument("--out", type=Path, default=MODELS_DIR)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 keeps runs bit-for-bit reproducible")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)

    documents = corpus_documents(seed=SEED)
    tokenizer = tokenizer_train(documents=documents)
    train, val = token_streams(documents=documents, tokenizer=tokenizer)
    print(f"corpus: {len(documents):,} documents, {sum(map(len, documents)):,} characters, "
          f"{len(train) + len(val):,} tokens", flush=True)
    for name in [args.only] if args.only else list(RECIPES):
        recipe = RECIPES[name]
        if args.steps:
            recipe = Recipe(**{**asdict(recipe), "steps": args.steps,
                               "warmup_steps": min(recipe.warmup_steps, args.steps // 4)})
        model_train(recipe=recipe, tokenizer=tokenizer, train=train, val=val, out_dir=args.out,
                    log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
