"""Block manager: allocation, reference counts, prefix caching and lazy eviction."""

from worker.engine import block_manager as bm_module
from worker.engine.block_manager import BlockManager
from worker.engine.sampling_params import SamplingParams
from worker.engine.sequence import Sequence

BS = 4


def seq_make(tokens: list[int], rid: str = "r") -> Sequence:
    return Sequence(rid, tokens, SamplingParams(max_tokens=4))


def admit(bm: BlockManager, seq: Sequence) -> None:
    """Admit as the scheduler would: prefix match, then room for the rest of the prompt."""
    matched = bm.prefix_match(seq)
    bm.admit(seq, matched)
    bm.append_slots(seq, seq.num_tokens - seq.num_computed_tokens)
    seq.num_computed_tokens = seq.num_tokens
    bm.register_full_blocks(seq, seq.num_computed_tokens)


def test_allocate_and_free_return_every_block():
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=False)
    seq = seq_make(list(range(10)))
    admit(bm, seq)
    assert len(seq.block_table) == 3 and bm.num_free_blocks == 5
    assert bm.free_sequence(seq) == 3
    assert bm.num_free_blocks == 8 and seq.block_table == []


def test_shared_prefix_hits_and_always_recomputes_one_token():
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=True)
    first = seq_make(list(range(8)), "a")  # exactly two full blocks
    admit(bm, first)
    again = seq_make(list(range(8)), "b")
    # Both blocks are cached, but the last token must be computed: only one block matches.
    assert bm.prefix_match(again) == first.block_table[:1]
    longer = seq_make(list(range(8)) + [99, 98], "c")
    matched = bm.prefix_match(longer)
    assert matched == first.block_table
    bm.admit(longer, matched)
    assert longer.num_computed_tokens == 8 and longer.num_cached_tokens == 8
    assert [bm.blocks[b].ref_count for b in matched] == [2, 2]
    assert bm.prefix_cache_hits == 8 and bm.prefix_cache_queries == 8 + 10


def test_prefix_differs_after_first_block_matches_only_first():
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=True)
    admit(bm, seq_make([1, 2, 3, 4, 5, 6, 7, 8, 9], "a"))
    other = seq_make([1, 2, 3, 4, 5, 6, 7, 0, 9], "b")
    assert len(bm.prefix_match(other)) == 1


def test_hash_collision_is_caught_by_comparing_token_ids(monkeypatch):
    monkeypatch.setattr(bm_module, "block_hash_chain", lambda parent, tokens: 42)
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=True)
    admit(bm, seq_make([1, 2, 3, 4, 5], "a"))
    assert bm.prefix_match(seq_make([9, 9, 9, 9, 5], "b")) == []
    assert len(bm.prefix_match(seq_make([1, 2, 3, 4, 5], "c"))) == 1


def test_freed_cached_blocks_count_as_free_and_are_evicted_lazily():
    bm = BlockManager(num_blocks=4, block_size=BS, enable_prefix_caching=True)
    a = seq_make(list(range(9)), "a")  # 2 full blocks cached, 1 partial
    admit(bm, a)
    cached = a.block_table[:2]
    bm.free_sequence(a)
    assert bm.num_free_blocks == 4
    # Still findable while nobody needs the space.
    assert bm.prefix_match(seq_make(list(range(9)), "b")) == cached
    # Uncached blocks go first; the cached ones are reused, and forgotten, only when needed.
    c = seq_make([50 + i for i in range(8)], "c")
    admit(bm, c)
    assert bm.prefix_match(seq_make(list(range(9)), "d")) == cached
    bm.free_sequence(c)
    e = seq_make([70 + i for i in range(16)], "e")
    admit(bm, e)
    assert bm.prefix_match(seq_make(list(range(9)), "f")) == []
    assert set(bm.hash_to_block.values()) == set(e.block_table)


def test_can_admit_counts_matched_free_blocks_as_taken():
    bm = BlockManager(num_blocks=3, block_size=BS, enable_prefix_caching=True)
    a = seq_make(list(range(9)), "a")
    admit(bm, a)
    bm.free_sequence(a)
    b = seq_make(list(range(8)) + [5, 6, 7, 8, 9], "b")  # 13 tokens: 4 blocks
    matched = bm.prefix_match(b)
    assert len(matched) == 2
    assert bm.can_admit(b, matched, 4)  # 2 matched + 1 new block
    assert not bm.can_admit(b, matched, 5)  # would need a fourth block


def forked_pair(bm: BlockManager, tokens: int) -> tuple[Sequence, Sequence]:
    """A prompt of `tokens` admitted and computed, and a second sample forked off it."""
    parent = seq_make(list(range(tokens)), "p")
    admit(bm, parent)
    child = Sequence("p:1", list(range(tokens)), SamplingParams(max_tokens=4, n=2))
    bm.fork(parent, child)
    return parent, child


def test_fork_counts_a_reference_per_holder_and_frees_only_at_zero():
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=False)
    parent, child = forked_pair(bm, 6)  # one full block, one holding 2 of 4 slots
    assert child.block_table == parent.block_table
    assert [bm.blocks[b].ref_count for b in parent.block_table] == [2, 2]
    assert bm.num_free_blocks == 6 and child.num_computed_tokens == 6
    assert bm.free_sequence(parent) == 0  # still held by the child
    assert bm.free_sequence(child) == 2 and bm.num_free_blocks == 8


def test_writing_into_a_shared_partial_block_copies_it_and_the_last_holder_writes_in_place():
    bm = BlockManager(num_blocks=8, block_size=BS, enable_prefix_caching=False)
    parent, child = forked_pair(bm, 6)
    full, partial = parent.block_table
    bm.append_slots(child, 1)  # the child's next token lands in the shared partial block
    copy = child.block_table[1]
    assert copy != partial and child.block_table[0] == full
    assert bm.copies_take() == [("p:1", partial, copy)]
    assert bm.blocks[partial].ref_count == 1 and bm.blocks[copy].ref_count == 1
    assert bm.blocks[full].ref_count == 2
    bm.append_slots(parent, 1)  # now the only holder: no copy
    assert parent.block_table == [full, partial] and bm.copies_take() == []
    assert bm.num_copy_on_writes == 1 and bm.num_free_blocks == 5


def test_can_append_counts_the_copy_a_shared_block_needs():
    bm = BlockManager(num_blocks=3, block_size=BS, enable_prefix_caching=False)
    parent, child = forked_pair(bm, 6)  # 2 blocks held, 1 free
    assert bm.can_append(child, 1)  # the copy takes the free block
    bm.append_slots(child, 1)
    assert bm.num_free_blocks == 0
    # The parent now holds its partial block alone: a write there needs no block at all.
    assert bm.can_append(parent, 1) and not bm.can_append(parent, 3)
    # A second fork of the same partial block cannot write into it with the pool empty.
    other = Sequence("p:2", list(range(6)), SamplingParams(max_tokens=4, n=3))
    bm.fork(parent, other)
    assert not bm.can_append(other, 1)
