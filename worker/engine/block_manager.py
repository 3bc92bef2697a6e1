"""The paged KV cache's bookkeeping: which physical blocks each sequence holds.

The pool's tensors live in the model runner; this file only hands out block ids. A block is
free when no sequence references it. A free block may still hold a cached prefix (its hash is
kept): it stays findable until it is handed out again, and only then is its hash dropped. That
is lazy eviction, and the free list's order (least recently freed first) makes it LRU.

Several samples of one prompt (SamplingParams.n) share the prompt's blocks: `fork` copies the
block table and counts one more reference on each block. Full blocks are never written again, so
sharing them is free; the last, partly filled block is copied on write: the first sample to
write its next token there gets a fresh block and a copy of the shared one's K/V (queued in
`pending_copies` for the model runner), and the last holder writes in place.
"""

from collections import OrderedDict
from dataclasses import dataclass

from worker.engine.sequence import Sequence

_ROOT_HASH = 0x5EED  # parent hash of a sequence's first block


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    hash: int | None = None
    token_ids: tuple[int, ...] = ()


def block_hash_chain(parent_hash: int, token_ids: tuple[int, ...]) -> int:
    """Hash of one full block, chained to the hash of everything before it."""
    return hash((parent_hash, token_ids))


def block_hash_root(seq: Sequence) -> int:
    """The parent hash of a sequence's first block: salted per client when it has a salt, so
    equal prompts from two clients never share blocks."""
    return _ROOT_HASH if seq.cache_salt is None else hash((_ROOT_HASH, seq.cache_salt))


class BlockManager:
    def __init__(self, *, num_blocks: int, block_size: int, enable_prefix_caching: bool) -> None:
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        # Insertion-ordered set of free block ids: allocation takes from the front.
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.hash_to_block: dict[int, int] = {}
        self.prefix_cache_queries = 0  # tokens looked up
        self.prefix_cache_hits = 0  # tokens found
        # Copy-on-write: (request_id, source block, new block) to copy before the next forward.
        self.pending_copies: list[tuple[str, int, int]] = []
        self.num_copy_on_writes = 0

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        """Blocks that can be allocated now, cached-but-unreferenced ones included."""
        return len(self.free)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    # Prefix caching -------------------------------------------------------------------------

    def prefix_match(self, seq: Sequence) -> list[int]:
        """Cached blocks holding a prefix of `seq`, without taking them.

        The last token is never matched: the step needs at least one token to compute, and its
        logits give the next token.
        """
        if not self.enable_prefix_caching:
            return []
        matched: list[int] = []
        parent = block_hash_root(seq)
        bs = self.block_size
        for start in range(0, seq.num_tokens - 1 - bs + 1, bs):
            tokens = tuple(seq.token_ids[start : start + bs])
            parent = block_hash_chain(parent, tokens)
            block_id = self.hash_to_block.get(parent)
            # A hash collision must never serve wrong K/V: compare the token ids too.
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            matched.append(block_id)
        return matched

    def can_admit(self, seq: Sequence, matched: list[int], num_new_tokens: int) -> bool:
        """Whether `seq` fits: its matched prefix plus `num_new_tokens` to compute now."""
        needed = self.blocks_for(len(matched) * self.block_size + num_new_tokens) - len(matched)
        # Matched blocks that sit on the free list stop being allocatable once taken.
        matched_free = sum(1 for b in matched if self.blocks[b].ref_count == 0)
        return needed <= self.num_free_blocks - matched_free

    def admit(self, seq: Sequence, matched: list[int], *, count_query: bool = True) -> None:
        """Take references on the matched prefix blocks and set the sequence's cursors."""
        for block_id in matched:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self.free[block_id]
            block.ref_count += 1
        seq.block_table = list(matched)
        seq.block_hashes = [self.blocks[b].hash for b in matched]
        seq.num_computed_tokens = len(matched) * self.block_size
        seq.draft_num_computed_tokens = seq.num_computed_tokens
        seq.num_cached_tokens = seq.num_computed_tokens
        if count_query and self.enable_prefix_caching:
            self.prefix_cache_queries += seq.num_tokens
            self.prefix_cache_hits += seq.num_computed_tokens

    # Allocation -----------------------------------------------------------------------------

    def _shared_write_block(self, seq: Sequence, num_new_tokens: int) -> int | None:
        """Index in the block table of a block this step would write that another sequence
        also holds (only the partly filled block at the write cursor can be), or None."""
        if num_new_tokens < 1:
            return None
        index = seq.num_computed_tokens // self.block_size
        if index < len(seq.block_table) and self.blocks[seq.block_table[index]].ref_count > 1:
            return index
        return None

    def can_append(self, seq: Sequence, num_new_tokens: int) -> bool:
        needed = self.blocks_for(seq.num_computed_tokens + num_new_tokens) - len(seq.block_table)
        if self._shared_write_block(seq, num_new_tokens) is not None:
            needed += 1  # the copy
        return needed <= self.num_free_blocks

    def append_slots(self, seq: Sequence, num_new_tokens: int) -> None:
        """Grow the block table to cover `num_new_tokens` past the computed ones, first
        copying a shared block the step would write into (copy-on-write)."""
        if not self.can_append(seq, num_new_tokens):
            raise RuntimeError("append_slots called without can_append")
        index = self._shared_write_block(seq, num_new_tokens)
        if index is not None:
            source = seq.block_table[index]
            self.blocks[source].ref_count -= 1
            copy = self._take_free()
            seq.block_table[index] = copy
            self.pending_copies.append((seq.request_id, source, copy))
            self.num_copy_on_writes += 1
        needed = self.blocks_for(seq.num_computed_tokens + num_new_tokens) - len(seq.block_table)
        for _ in range(needed):
            seq.block_table.append(self._take_free())

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Give `child` the parent's blocks (one more reference each) and cursors."""
        for block_id in parent.block_table:
            self.blocks[block_id].ref_count += 1
        child.block_table = list(parent.block_table)
        child.block_hashes = list(parent.block_hashes)
        child.num_computed_tokens = parent.num_computed_tokens
        child.draft_num_computed_tokens = parent.draft_num_computed_tokens
        child.num_cached_tokens = parent.num_cached_tokens

    def copies_take(self) -> list[tuple[str, int, int]]:
        """The copy-on-write copies queued since the last call (the runner makes them)."""
        copies, self.pending_copies = self.pending_copies, []
        return copies

    def _take_free(self) -> int:
        block_id, _ = self.free.popitem(last=False)
        block = self.blocks[block_id]
        if block.hash is not None:
            # Lazy eviction: the cached prefix dies only now that the block is reused.
            if self.hash_to_block.get(block.hash) == block_id:
                del self.hash_to_block[block.hash]
            block.hash = None
            block.token_ids = ()
        block.ref_count = 1
        return block_id

    def register_full_blocks(self, seq: Sequence, num_ready_tokens: int) -> None:
        """Make the full blocks among the first `num_ready_tokens` findable by later requests."""
        bs = self.block_size
        while (len(seq.block_hashes) + 1) * bs <= num_ready_tokens:
            index = len(seq.block_hashes)
            parent = seq.block_hashes[-1] if seq.block_hashes else block_hash_root(seq)
            tokens = tuple(seq.token_ids[index * bs : (index + 1) * bs])
            h = block_hash_chain(parent, tokens)
            seq.block_hashes.append(h)
            if not self.enable_prefix_caching or h in self.hash_to_block:
                continue
            block = self.blocks[seq.block_table[index]]
            block.hash, block.token_ids = h, tokens
            self.hash_to_block[h] = block.block_id

    def free_sequence(self, seq: Sequence) -> int:
        """Drop the sequence's references; returns how many blocks became free."""
        freed = 0
        # Tail blocks first, so the least shared end of a prefix is evicted first.
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                freed += 1
                self.free[block_id] = None
                if block.hash is None:
                    # Nothing cached here: hand it out before any block that holds a prefix.
                    self.free.move_to_end(block_id, last=False)
        seq.block_table = []
        seq.block_hashes = []
        seq.num_computed_tokens = 0
        seq.draft_num_computed_tokens = 0
        return freed
