"""``map_dims`` and the two readings behind it, ``_map_product`` and ``_Mapper._by_position``,
on hand-made records; every expected shape mapped by hand from the module docstring of
:mod:`lumos.estimate.shapes`.

Most cases use sizes where 3 is the token count, the FFN and the vocabulary at once: tokens
3 -> 3, hidden 2 -> 4, FFN 3 -> 6, vocabulary 3 -> 9. So a 3 read as a token stays 3, a 3 read
as a feature inside a layer is the FFN (6) and outside the vocabulary (9); a 2 is the hidden
size (4) whatever its role."""

from __future__ import annotations

from lumos.estimate.shapes import Dims, _Mapper, map_dims

OLD = Dims(hidden=2, ffn=3, vocab=3, tokens=3)
NEW = Dims(hidden=4, ffn=6, vocab=9, tokens=3)


def test_with_params_every_tensor_is_a_weight_and_other_entries_are_kept():
    """An optimizer op: a tensor list ``[[3, 2], [3]]`` -> ``[[6, 4], [6]]`` (all feature-like,
    inside: the 3s are the FFN), a tensor ``[2, 3]`` -> ``[4, 6]``; an empty entry and a
    non-list one are kept as they are. Outside a layer the 3s are the vocabulary (9)."""
    m = _Mapper(OLD, NEW)
    dims = [[[3, 2], [3]], [], [2, 3], "ab"]
    assert map_dims("aten::_foreach_add_", dims, m, True, params=True) == [
        [[6, 4], [6]], [], [4, 6], "ab"]  # fmt: skip
    assert map_dims("aten::_foreach_add_", dims, m, False, params=True) == [
        [[9, 4], [9]], [], [4, 9], "ab"]  # fmt: skip


def test_without_params_a_tensor_list_is_weights_and_every_entry_is_mapped_in_order():
    """A tensor list (a foreach op's) is weights: ``[[3, 2], [3]]`` -> ``[[6, 4], [6]]``
    inside; ``[]`` and ``"ab"`` are kept; the activation ``[3, 2]`` after them keeps its
    leading token count: ``[3, 4]``."""
    m = _Mapper(OLD, NEW)
    assert map_dims("aten::_foreach_mul_", [[[3, 2], [3]], [], "ab", [3, 2]], m, True) == [
        [[6, 4], [6]], [], "ab", [3, 4]]  # fmt: skip


def test_a_weight_gradient_product_reads_its_inner_dimension_as_the_tokens():
    """``mm [2, 3] @ [3, 2]``: ``M`` = 2 is no token count, so it is the hidden size (4), ``K`` =
    3 the tokens (kept), ``N`` = 2 hidden (4): ``[[4, 3], [3, 4]]``. Mapped tensor by tensor
    the 3 would read as the FFN. ``addmm`` with a full ``[3, 3]`` input first (a weight: both
    3s the FFN) then ``[2, 3] @ [3, 3]``: ``[[6, 6], [4, 3], [3, 6]]``, the trailing scalars
    kept."""
    m = _Mapper(OLD, NEW)
    assert map_dims("aten::mm", [[2, 3], [3, 2]], m, True) == [[4, 3], [3, 4]]
    assert map_dims("aten::addmm", [[3, 3], [2, 3], [3, 3], [], []], m, True) == [
        [6, 6], [4, 3], [3, 6], [], []]  # fmt: skip
    assert map_dims("aten::addmm", [[3], [2, 3], [3, 3]], m, False) == [[9], [4, 3], [3, 9]]


def test_a_product_s_non_token_dimensions_read_the_layer_context():
    """FFN = vocabulary = 5 (-> 10 and 15), tokens 3, hidden 2 -> 4. ``mm [5, 5] @ [5, 2]``:
    ``M`` = 5 is no token count, so ``M`` is feature-like and ``K`` token-like; neither 5 is a
    token count, so both read as features: the FFN inside a layer (10), the vocabulary
    outside (15); ``N`` = 2 -> 4."""
    m = _Mapper(
        Dims(hidden=2, ffn=5, vocab=5, tokens=3), Dims(hidden=4, ffn=10, vocab=15, tokens=3)
    )
    assert map_dims("aten::mm", [[5, 5], [5, 2]], m, True) == [[10, 10], [10, 4]]
    assert map_dims("aten::mm", [[5, 5], [5, 2]], m, False) == [[15, 15], [15, 4]]


def test_records_that_are_not_one_product_are_mapped_tensor_by_tensor():
    """``K`` differs (2 vs 3), so no product: ``mm [3, 2], [3, 3]``: the first an activation
    ``[3, 4]``, the second a weight ``[6, 6]``; ``addmm [3], [3, 2], [3, 3]``: bias ``[6]``,
    activation ``[3, 4]``, weight ``[6, 6]``; ``mm [2, 3], [3]`` (the second no matrix): an
    activation ``[4, 6]`` and a 1-D weight ``[6]``. A scalar after an ``mm``'s two matrices
    does not stop them being one product (``[[4, 3], [3, 4]]``, the scalar kept)."""
    m = _Mapper(OLD, NEW)
    assert map_dims("aten::mm", [[3, 2], [3, 3]], m, True) == [[3, 4], [6, 6]]
    assert map_dims("aten::addmm", [[3], [3, 2], [3, 3]], m, True) == [[6], [3, 4], [6, 6]]
    assert map_dims("aten::mm", [[2, 3], [3]], m, True) == [[4, 6], [6]]
    assert map_dims("aten::mm", [[2, 3], [3, 2], []], m, True) == [[4, 3], [3, 4], []]


def test_attention_shapes_are_read_by_position():
    """b 2, s 3 -> 7 (tokens 6 -> 14), heads 4 -> unknown, FFN = vocabulary = 5 -> 10 and 15.
    ``[2, 4, 3, 5]`` is ``(b, heads, s, x)``: b kept, heads kept (the new count is unknown),
    s -> 7, the last 5 a feature (10 inside, 15 outside; one ambiguous choice each).
    ``[2, 9, 3]`` is neither ``(b, s, ...)`` nor 4-D: mapped by value, the 2 as b (kept), 9
    kept, the last 3 the sequence (7)."""
    m = _Mapper(Dims(microbatch_size=2, seq=3, heads=4, ffn=5, vocab=5),
                Dims(microbatch_size=2, seq=7, ffn=10, vocab=15))  # fmt: skip
    assert map_dims("aten::_softmax", [[2, 4, 3, 5]], m, True) == [[2, 4, 7, 10]]
    assert map_dims("aten::_softmax", [[2, 4, 3, 5]], m, False) == [[2, 4, 7, 15]]
    assert m.ambiguous == 2
    assert map_dims("aten::gelu", [[2, 9, 3]], m, True) == [[2, 9, 7]]


def test_equal_batch_and_sequence_are_told_apart_by_position():
    """b = s = 3, s -> 5: ``[3, 3, 8]`` is ``(b, s, 8)``: ``[3, 5, 8]`` (by value both 3s
    would read as b)."""
    m = _Mapper(Dims(microbatch_size=3, seq=3), Dims(microbatch_size=3, seq=5))
    assert map_dims("aten::gelu", [[3, 3, 8]], m, True) == [[3, 5, 8]]


def test_position_needs_both_b_and_s_or_the_token_count():
    """Only b known (2) and tokens 7 (s not derivable: 7 / 2 is not whole): any leading pair
    whose product is 7 is kept, ``[7, 1, 4]`` -> ``[7, 1, 8]`` (hidden 4 -> 8). Neither b, s
    nor tokens known: no reading by position, ``[2, 2, 2]`` by value, all hidden: ``[4, 4,
    4]``."""
    m = _Mapper(Dims(microbatch_size=2, tokens=7, hidden=4),
                Dims(microbatch_size=2, tokens=7, hidden=8))  # fmt: skip
    assert map_dims("aten::gelu", [[7, 1, 4]], m, True) == [[7, 1, 8]]
    m = _Mapper(Dims(hidden=2), Dims(hidden=4))
    assert map_dims("aten::gelu", [[2, 2, 2]], m, True) == [[4, 4, 4]]
