"""The model runner's batch layout: grouping decodes so padding stays small."""

from worker.engine.model_runner import _padding_split


def test_padding_split_cuts_where_padding_would_dominate():
    assert _padding_split([]) == 0 and _padding_split([5]) == 0
    assert _padding_split([4, 4, 5, 5]) == 0  # nearly even: one group
    assert _padding_split([1, 1, 1, 1, 1, 1, 20, 20]) == 6
    assert _padding_split([2, 3, 3, 16]) == 3
